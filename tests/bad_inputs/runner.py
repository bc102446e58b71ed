"""Run one hostile case through the real CLI in a subprocess and measure it.

``run_case`` builds the case in a folder, hashes every file there, runs ``python -m
tracekit ...`` with a wall-time limit, watches the process tree's RSS (psutil; the tree is
killed past twice the case's ceiling, to protect the machine) and takes the peak RSS from
``os.wait4``. ``python tests/bad_inputs/runner.py [NAME...]`` prints a table of the results.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    rss_mb: float
    named: Path
    hashes_before: dict[str, str]
    hashes_after: dict[str, str]
    killed: str = ""


def _hashes(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        h = hashlib.blake2b(digest_size=16)
        st = p.stat()
        h.update(f"{st.st_size} {st.st_mtime_ns} {st.st_ino}".encode())
        with p.open("rb") as f:
            if st.st_size <= 64 * MB:
                h.update(f.read())
            else:  # a big (sparse) case: its ends and its stat (mtime moves on any write)
                h.update(f.read(16 * MB))
                f.seek(-16 * MB, os.SEEK_END)
                h.update(f.read())
        out[str(p.relative_to(folder))] = h.hexdigest()
    return out


MB = 1 << 20
# run the CLI and record the peak RSS of this process's own memory (VmHWM: the wait4
# figure would include the RSS of the parent that forked it, whose pages it shared)
_WRAP = """
import atexit, os, runpy, sys

def _hwm():
    with open('/proc/self/status') as f:
        kb = next(int(x.split()[1]) for x in f if x.startswith('VmHWM'))
    with open(os.environ['_HOSTILE_HWM'], 'w') as f:
        f.write(str(kb))

atexit.register(_hwm)
sys.argv = ['tracekit', *sys.argv[1:]]
runpy.run_module('tracekit', run_name='__main__')
"""


def _read_hwm(path: Path) -> float:
    try:
        kb = int(path.read_text())
    except (OSError, ValueError):
        return 0.0
    finally:
        path.unlink(missing_ok=True)
    return kb / 1024


def _watch(proc: subprocess.Popen[bytes], limit_mb: float, deadline: float,
           why: list[str], finished: threading.Event, peak: list[int]) -> None:
    """Kill the process group past the RSS or time limit (never reaps: wait4 does)."""
    try:
        root = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
        return
    while not finished.wait(0.02):
        try:
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
        except psutil.Error:
            rss = 0
        peak[0] = max(peak[0], rss)
        now = time.monotonic()
        if rss > limit_mb * (1 << 20) or now > deadline:
            why.append(f"rss {rss >> 20} MB" if now <= deadline else "timeout")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return


def run_case(case: object, folder: Path) -> Result:
    from bad_inputs.hostile import Case

    assert isinstance(case, Case)
    argv, named = case.build(folder)
    before = _hashes(folder)
    env = dict(os.environ, PYTHONPATH=str(REPO), TRACEKIT_NO_CACHE="1",
               PYTHONWARNINGS="ignore")
    env.pop("COVERAGE_PROCESS_START", None)
    start = time.monotonic()
    hwm = folder.parent / f".{folder.name}.hwm"
    env["_HOSTILE_HWM"] = str(hwm)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAP, *argv], cwd=folder, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True)
    why: list[str] = []
    finished = threading.Event()
    peak = [0]
    watcher = threading.Thread(
        target=_watch,
        args=(proc, 2 * case.rss_mb, start + case.wall_s, why, finished, peak),
        daemon=True)
    watcher.start()
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [threading.Thread(target=lambda s=s, c=c: c.append(s.read()), daemon=True)
               for s, c in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
    for t in readers:
        t.start()
    _, status, _usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    finished.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    watcher.join()
    return Result(
        rc=proc.returncode, stdout=b"".join(out_chunks).decode(errors="replace"),
        stderr=b"".join(err_chunks).decode(errors="replace"), wall_s=wall,
        rss_mb=max(_read_hwm(hwm), peak[0] / MB), named=named, hashes_before=before,
        hashes_after=_hashes(folder), killed=", ".join(why))


def main(names: list[str]) -> None:
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from bad_inputs.hostile import CASES

    for case in CASES:
        if names and not any(n in case.name or n == case.family for n in names):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            res = run_case(case, Path(tmp))
        line = res.stderr.strip().replace(tmp, "T")
        ok = res.rc == case.rc and "Traceback" not in res.stderr
        print(f"{'ok ' if ok else 'BAD'} {case.family:18} {case.name:30} rc={res.rc} "
              f"{res.wall_s:5.1f}s {res.rss_mb:6.0f}MB {res.killed} | {line[-300:]}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
