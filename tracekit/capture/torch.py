"""``tracekit capture -- COMMAND``: profile every rank of an unchanged torch program.

The command runs with ``tracekit/capture/hook`` first on PYTHONPATH: its ``sitecustomize``
starts torch.profiler in each rank when torch.distributed initialises and writes
``rank{r}.trace.json.gz`` into the output folder when the rank ends. The command runs in its
own session; when it ends (or times out) whatever it left running is stopped. A failing
rank's exception is read from the hook's status file, so the error names the rank and why.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import CaptureError, ConfigError

HOOK_DIR = Path(__file__).resolve().parent / "hook"
STATUS_DIR = ".tracekit"
GRACE_S = 10.0  # between SIGTERM and SIGKILL
FAILED_GRACE_S = 20.0  # a rank failed: how long the launcher has to stop the others
POLL_S = 0.5


@dataclass(frozen=True)
class CaptureOptions:
    with_stack: bool = True
    record_shapes: bool = True
    activities: tuple[str, ...] = ("CPU", "GPU")
    timeout: float | None = None  # seconds the command may run
    failed_grace: float = FAILED_GRACE_S  # after a rank failed, then the others are stopped
    flight_recorder: bool = False  # also write every rank's Flight Recorder dump


@dataclass
class CaptureResult:
    out_dir: Path
    returncode: int
    traces: list[Path] = field(default_factory=list)
    ranks: dict[int, dict[str, object]] = field(default_factory=dict)  # hook status per rank


def check_out_dir(out: Path) -> None:
    """Refuse a folder that already holds traces: a capture never overwrites one."""
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", out)
    if out.is_dir() and any(out.glob("*.trace.json*")):
        raise ConfigError("already holds trace files; choose a new --out folder", out)


def capture_env(out: Path, options: CaptureOptions, base: dict[str, str] | None = None
                ) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HOOK_DIR), *filter(None, [env.get("PYTHONPATH")])])
    env["TRACEKIT_CAPTURE_DIR"] = str(out.resolve())
    env["TRACEKIT_CAPTURE_STACK"] = "1" if options.with_stack else "0"
    env["TRACEKIT_CAPTURE_SHAPES"] = "1" if options.record_shapes else "0"
    env["TRACEKIT_CAPTURE_ACTIVITIES"] = ",".join(options.activities)
    if options.flight_recorder:
        env.update(flight_recorder_env(out, env))
    return env


FR_BUFFER = "2000"  # entries per rank: torch 2.13's own default (FlightRecorder.hpp)


def flight_recorder_env(out: Path, env: dict[str, str]) -> dict[str, str]:
    """Recording on (a size the user set is kept), and the watchdog's own timeout dump
    (NCCL) written into ``out`` as ``nccl_trace_rank_<r>``."""
    size = env.get("TORCH_FR_BUFFER_SIZE") or env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or FR_BUFFER
    prefix = str(out.resolve() / "nccl_trace_rank_")
    return {"TRACEKIT_CAPTURE_FR": "1", "TORCH_FR_BUFFER_SIZE": size,
            "TORCH_NCCL_TRACE_BUFFER_SIZE": size, "TORCH_FR_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_DUMP_TEMP_FILE": prefix,
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix}


def _tee(stream: object, sink: object, tail: collections.deque[str]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        sink.write(line)  # type: ignore[attr-defined]
        sink.flush()  # type: ignore[attr-defined]
        tail.append(line.rstrip("\n"))


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A zombie does not count: killpg(pgid, 0)
    reaches it until its parent reaps it, which for the command's orphaned ranks may be late
    (a subreaper, a PID 1 that does not reap) or never (the command itself, before poll)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return True
    for stat in proc_dir.glob("[0-9]*/stat"):
        try:  # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _stop_session(proc: subprocess.Popen[str]) -> None:
    """SIGTERM whatever is left in the command's session, then SIGKILL after a grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            proc.poll()
            if not _group_alive(proc.pid):
                return
            time.sleep(0.1)


def read_status(out: Path) -> dict[int, dict[str, object]]:
    ranks: dict[int, dict[str, object]] = {}
    for path in sorted((out / STATUS_DIR).glob("rank*.json")):
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        fault = out / STATUS_DIR / f"rank{status.get('rank')}.fault"
        if fault.is_file() and fault.stat().st_size and not status.get("error"):
            lines = fault.read_text(errors="replace").strip().splitlines()
            status["error"] = lines[0] if lines else "fatal error"
        ranks[int(status["rank"])] = status
    return ranks


def _short(text: object, limit: int = 160) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def failure_message(result: CaptureResult, stderr_tail: list[str], timed_out: bool) -> str:
    """One line: which rank failed and why, what was kept."""
    failed = {r: s for r, s in result.ranks.items() if s.get("error")}
    unfinished = [r for r, s in result.ranks.items() if s.get("state") == "running"]
    if timed_out:
        head = "the command ran past --timeout and was stopped"
    elif failed:
        order = sorted(failed, key=lambda r: float(str(failed[r].get("time") or 0.0)))
        first = order[0]
        head = f"rank {first} failed first: {_short(failed[first]['error'])}"
        if len(order) > 1:
            head += "; then " + "; ".join(
                f"rank {r}: {_short(failed[r]['error'])}" for r in order[1:])
    else:
        last = next((ln.strip() for ln in reversed(stderr_tail)
                     if ln.strip() and not ln.startswith((" ", "\t"))), "")
        head = f"the command exited with status {result.returncode}" + (
            f" ({last})" if last else "")
    if unfinished:
        head += f"; rank(s) {', '.join(map(str, unfinished))} stopped before writing a trace"
    dumps = len(list(result.out_dir.glob("rank*.fr_trace.pkl")))
    kept = f" and {dumps} Flight Recorder dump(s) (read them with `tracekit hang " \
        f"{result.out_dir}`)" if dumps else ""
    return (f"{head}; exit status {result.returncode}; kept {len(result.traces)} trace(s)"
            f"{kept} in {result.out_dir}")


def _watch(proc: subprocess.Popen[str], out: Path, timeout: float | None, grace: float) -> bool:
    """Wait for the command. When a rank has failed and the launcher has not stopped the
    others within FAILED_GRACE_S (a plain launcher may leave them blocked in a collective),
    stop them (after ``grace`` seconds). True when ``timeout`` ran out."""
    start = time.monotonic()
    failed_at: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            return True
        if failed_at is None and any(s.get("state") == "failed"
                                     for s in read_status(out).values()):
            failed_at = now
        if failed_at is not None and now - failed_at > grace:
            _stop_session(proc)
        time.sleep(POLL_S)
    return False


def run_command(command: list[str], out: Path, options: CaptureOptions | None = None
                ) -> CaptureResult:
    """Run ``command`` with the hook; raise CaptureError when it fails or writes no trace."""
    options = options or CaptureOptions()
    if not command:
        raise ConfigError("no command given after --")
    check_out_dir(out)
    from tracekit.io import make_folder

    make_folder(out)
    tail: collections.deque[str] = collections.deque(maxlen=200)
    try:
        proc = subprocess.Popen(command, env=capture_env(out, options), stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    except OSError as exc:
        raise CaptureError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
    reader = threading.Thread(target=_tee, args=(proc.stderr, sys.stderr, tail), daemon=True)
    reader.start()
    try:
        timed_out = _watch(proc, out, options.timeout, options.failed_grace)
    except KeyboardInterrupt:
        _stop_session(proc)
        raise
    _stop_session(proc)
    proc.wait()
    reader.join(timeout=5)
    result = CaptureResult(out, proc.returncode, sorted(out.glob("rank*.trace.json.gz")),
                           read_status(out))
    if timed_out or proc.returncode != 0:
        error = CaptureError(failure_message(result, list(tail), timed_out))
        error.exit_code = proc.returncode if proc.returncode > 0 else 1
        raise error
    if not result.traces:
        raise CaptureError("the command finished but no rank wrote a trace: the hook starts "
                           "the profiler at torch.distributed.init_process_group; for a "
                           "single-process program use tracekit.capture.profile()", out)
    return result
