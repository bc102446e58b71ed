"""``tracekit capture --server URL``: profile a live SGLang (or vLLM) server.

POST ``/start_profile`` with SGLang's ``ProfileReq`` fields (SGLANG_PATHS.md 5.2); with a
duration instead of a step count, POST ``/stop_profile`` after it. The reply comes before the
trace files are written, so the output folder is polled until files appear and stop growing.
The folder must be one the server can write and this machine can read (same host or a shared
file system).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import CaptureError

TRACE_SUFFIXES = (".trace.json.gz", ".trace.json", ".pt.trace.json.gz", ".pt.trace.json")
POLL_S = 0.2


@dataclass(frozen=True)
class ServerCapture:
    url: str
    out_dir: Path
    num_steps: int | None = 5
    duration: float | None = None  # seconds between /start_profile and /stop_profile
    activities: tuple[str, ...] = ("CPU", "GPU")
    with_stack: bool = True
    record_shapes: bool = True
    profile_prefix: str | None = None
    timeout: float = 300.0  # how long to wait for the first file after the profile ends
    settle: float = 3.0  # seconds the files must stay unchanged
    expect_files: int = 1  # wait for at least this many trace files
    http_timeout: float = 60.0


def start_body(c: ServerCapture) -> dict[str, object]:
    body: dict[str, object] = {
        "output_dir": str(c.out_dir.resolve()),
        "activities": list(c.activities),
        "with_stack": c.with_stack,
        "record_shapes": c.record_shapes,
    }
    if c.duration is None:
        body["num_steps"] = c.num_steps
    if c.profile_prefix:
        body["profile_prefix"] = c.profile_prefix
    return body


def post(url: str, body: dict[str, object] | None, timeout: float) -> str:
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return str(resp.read().decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read().decode(errors="replace").split())[:200]
        raise CaptureError(
            f"{url} answered HTTP {exc.code}" + (f": {detail}" if detail else "")) from None
    except urllib.error.URLError as exc:
        raise CaptureError(f"cannot reach {url}: {exc.reason}") from None
    except (TimeoutError, OSError) as exc:
        raise CaptureError(f"cannot reach {url}: {exc}") from None


def trace_files(folder: Path) -> dict[Path, int]:
    """Trace files (Kineto) and Ascend ``*_ascend_pt`` folders under ``folder``, with sizes."""
    found: dict[Path, int] = {}
    if not folder.is_dir():
        return found
    for path in folder.rglob("*"):
        if path.is_file() and path.name.endswith(TRACE_SUFFIXES) and not path.name.startswith("."):
            found[path] = path.stat().st_size
        elif path.is_dir() and path.name.endswith("_ascend_pt"):
            found[path] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return found


def wait_for_traces(c: ServerCapture, before: dict[Path, int]) -> list[Path]:
    """New trace files once at least ``expect_files`` exist and none grew for ``settle`` s."""
    deadline = time.monotonic() + c.timeout
    last: dict[Path, int] = {}
    stable_since = time.monotonic()
    while True:
        now = {p: s for p, s in trace_files(c.out_dir).items() if before.get(p) != s}
        if now != last:
            last, stable_since = now, time.monotonic()
        elif len(now) >= c.expect_files and time.monotonic() - stable_since >= c.settle:
            return sorted(now)
        if time.monotonic() > deadline:
            if not now:
                raise CaptureError(f"no trace files appeared in {c.out_dir} within "
                                   f"{c.timeout:g} s (can the server write there?)")
            raise CaptureError(f"{len(now)} trace file(s) in {c.out_dir} after {c.timeout:g} s, "
                               f"expected {c.expect_files} that stop growing")
        time.sleep(POLL_S)


def capture_server(c: ServerCapture) -> list[Path]:
    """Ask the server to profile, wait for its files, return them."""
    base = c.url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise CaptureError(f"--server needs an http:// or https:// URL, got {c.url!r}")
    from tracekit.capture.torch import check_out_dir

    check_out_dir(c.out_dir)  # the analysis reads the whole folder: start from a clean one
    from tracekit.io import make_folder

    make_folder(c.out_dir)
    before = trace_files(c.out_dir)
    post(f"{base}/start_profile", start_body(c), c.http_timeout)
    if c.duration is not None:
        time.sleep(c.duration)
        post(f"{base}/stop_profile", None, c.http_timeout)
    return wait_for_traces(c, before)
