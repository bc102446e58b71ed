"""`tracekit capture --server` against a local server that implements SGLang's profiling API.

The contract server (127.0.0.1, ephemeral port) answers /start_profile before any file exists,
then writes real trace files (the bundled sample traces) in pieces after a delay, named as
SGLang names them (``{profile_id}-TP-{r}.trace.json.gz``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SOURCE_SCENARIO = "tp4_full_tp"


class ContractServer:
    """/start_profile and /stop_profile as SGLang's http_server + profiler manager do them."""

    def __init__(self, sources: list[Path], mode: str = "ok", delay: float = 0.5) -> None:
        self.sources, self.mode, self.delay = sources, mode, delay
        self.requests: list[tuple[str, dict[str, object] | None]] = []
        self.profiling: dict[str, object] | None = None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else None
                server.requests.append((self.path, body))
                code, text = server.answer(self.path, body)
                payload = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def answer(self, path: str, body: dict[str, object] | None) -> tuple[int, str]:
        if self.mode == "error":
            return 500, "Internal Server Error: Profiling is already in progress."
        if path == "/start_profile":
            if self.profiling is not None:
                return 500, "Profiling is already in progress. Call /stop_profile first."
            if not isinstance(body, dict) or not isinstance(body.get("output_dir"), str):
                return 400, "output_dir missing"
            self.profiling = body
            if body.get("num_steps") is not None:
                self._write_later(body)
            return 200, "Start profiling.\n"
        if path == "/stop_profile":
            if self.profiling is None:
                return 500, "Profiling is not in progress. Call /start_profile first."
            self._write_later(self.profiling)
            return 200, "Stop profiling. This will take some time.\n"
        return 404, "not found"

    def _write_later(self, body: dict[str, object]) -> None:
        if self.mode == "silent":
            return
        threading.Thread(target=self._write, args=(body,), daemon=True).start()

    def _write(self, body: dict[str, object]) -> None:
        time.sleep(self.delay)  # the reply came long before the files
        out = Path(str(body["output_dir"]))
        out.mkdir(parents=True, exist_ok=True)
        profile_id = "1796000000.123"
        for rank, src in enumerate(self.sources):
            data = src.read_bytes()
            with open(out / f"{profile_id}-TP-{rank}.trace.json.gz", "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
                time.sleep(0.3)
                fh.write(data[len(data) // 2:])
        self.profiling = None

    def __enter__(self) -> ContractServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def sources(sample_traces: Path) -> list[Path]:
    files = sorted((sample_traces / SOURCE_SCENARIO).glob("rank*.trace.json.gz"))
    if not files:
        pytest.skip(f"sample_traces/{SOURCE_SCENARIO} missing (make sample-traces)")
    return files


@pytest.fixture()
def server(sources: list[Path]) -> Iterator[ContractServer]:
    with ContractServer(sources) as s:
        yield s


def tracekit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_num_steps_waits_for_complete_files_and_analyses(
        server: ContractServer, sources: list[Path], tmp_path: Path) -> None:
    # GIVEN a server that writes 4 rank files in pieces some time after replying
    out = tmp_path / "prof"
    # WHEN tracekit capture asks it for 3 steps
    res = tracekit("capture", "--server", server.url, "--out", str(out), "--num-steps", "3",
                   "--settle", "1", "--expect-files", "4", "--timeout", "30")
    # THEN it exits 0, having sent SGLang's ProfileReq fields
    assert res.returncode == 0, res.stderr
    path, body = server.requests[0]
    assert path == "/start_profile" and body is not None
    assert body["output_dir"] == str(out.resolve()) and body["num_steps"] == 3
    assert body["with_stack"] is True and body["record_shapes"] is True
    assert body["activities"] == ["CPU", "GPU"]
    # AND every file is complete (not the first half) and the analysis ran on them
    written = sorted(out.glob("*-TP-*.trace.json.gz"))
    assert [p.read_bytes() for p in written] == [p.read_bytes() for p in sources]
    assert "4 trace file(s)" in res.stdout and "tracekit analyze" in res.stdout


def test_duration_sends_stop_profile(server: ContractServer, tmp_path: Path) -> None:
    # GIVEN a duration instead of steps WHEN captured
    res = tracekit("capture", "--server", server.url, "--out", str(tmp_path / "p"),
                   "--duration", "0.5", "--settle", "1", "--expect-files", "4",
                   "--timeout", "30", "--no-analyze")
    # THEN start carries no num_steps, stop_profile follows, and the files arrived
    assert res.returncode == 0, res.stderr
    assert [p for p, _ in server.requests] == ["/start_profile", "/stop_profile"]
    assert "num_steps" not in (server.requests[0][1] or {})
    assert len(list((tmp_path / "p").glob("*.trace.json.gz"))) == 4


def test_unreachable_server_is_one_line_error(tmp_path: Path) -> None:
    # GIVEN a port nobody listens on
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # WHEN captured THEN exit non-zero with one line naming the URL
    res = tracekit("capture", "--server", f"http://127.0.0.1:{port}", "--out",
                   str(tmp_path / "p"), "--no-analyze")
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0
    assert res.stderr.startswith(f"tracekit: error: cannot reach http://127.0.0.1:{port}")


def test_http_error_is_reported(sources: list[Path], tmp_path: Path) -> None:
    # GIVEN a server that answers 500 WHEN captured THEN its answer is in the one-line error
    with ContractServer(sources, mode="error") as bad:
        res = tracekit("capture", "--server", bad.url, "--out", str(tmp_path / "p"),
                       "--no-analyze")
    assert res.returncode == 1
    assert "answered HTTP 500" in res.stderr and "already in progress" in res.stderr
    assert "Traceback" not in res.stderr


def test_no_files_after_timeout(sources: list[Path], tmp_path: Path) -> None:
    # GIVEN a server that accepts but never writes WHEN the wait times out THEN say so
    with ContractServer(sources, mode="silent") as quiet:
        res = tracekit("capture", "--server", quiet.url, "--out", str(tmp_path / "p"),
                       "--timeout", "1.5", "--no-analyze")
    assert res.returncode == 1
    assert "no trace files appeared" in res.stderr
