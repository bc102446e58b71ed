"""Run one hostile case through the real CLI in a child process and measure it.

``run_case`` builds the case in a folder, hashes every file there, runs the CLI (``tracekit``
with the case's arguments) in a child process with a wall-time limit, watches the process
tree's RSS (psutil; the tree is killed past twice the case's ceiling, to protect the machine)
and takes the peak RSS from the child's VmHWM.

Two ways to start that child: ``python -c`` afresh (``launcher=None``: what a user's shell
does), or forked from a :class:`Launcher`, a Python process that has imported the CLI and its
libraries once (what the test suite does for most cases: the interpreter start and the
imports are most of a small case's cost). The forked child runs the same ``python -m
tracekit`` entry (``runpy``) in its own session, folder, environment and standard streams,
and exits the way Python does (atexit, an uncaught exception's traceback on stderr).
``tests/parsers/test_hostile_corpus.py`` runs a sample of cases both ways and requires the
same exit code and output. ``python tests/bad_inputs/runner.py [--forked] [NAME...]`` prints a
table of the results (fresh processes, or forked with ``--forked``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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
    cpu_s: float
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


# What the forking server imports: the libraries and the modules that `tracekit analyze` and
# `tracekit check` of a small trace import (the rest a child imports as a fresh process would).
PRELOAD = ("click", "msgspec", "numpy", "pandas", "pyarrow", "pyarrow.compute", "sqlite3",
           "yaml", "tracekit.cli", "tracekit.cli.analyze", "tracekit.cli.check",
           "tracekit.pipeline.stages", "tracekit.parsers.kineto", "tracekit.parsers.ascend",
           "tracekit.rules.engine", "tracekit.measure", "tracekit.reports.text")

# A process that imports PRELOAD, then forks one child per request (one JSON line on stdin:
# argv, cwd, env, the files for stdout / stderr / the HWM); it answers the child's pid, then
# its wait status and CPU seconds. The child leaves the loop and runs the CLI at the top level,
# so that it ends as ``python -c _WRAP`` would. Python only on the standard streams.
_SERVER = """
import atexit, importlib, json, os, runpy, sys
for _name in sys.argv[1:]:
    importlib.import_module(_name)

def _serve():
    import gc
    gc.freeze()  # a child's collections skip what it inherited (no copy-on-write of it all)
    print("ready", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return req
        print(pid, flush=True)
        _, status, usage = os.wait4(pid, 0)
        print(status, usage.ru_utime + usage.ru_stime, flush=True)
    sys.exit(0)

req = _serve()
os.setsid()
os.chdir(req["cwd"])
os.environ.clear()
os.environ.update(req["env"])
for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY | os.O_CREAT),
                        (2, req["err"], os.O_WRONLY | os.O_CREAT)):
    new = os.open(name, flags, 0o600)
    os.dup2(new, fd)
    os.close(new)
del req["env"], fd, name, flags, new, _name

def _hwm(path=req["hwm"]):
    with open("/proc/self/status") as f:
        kb = next(int(x.split()[1]) for x in f if x.startswith("VmHWM"))
    with open(path, "w") as f:
        f.write(str(kb))

atexit.register(_hwm)
sys.argv = ["tracekit", *req["argv"]]
del req, _serve
runpy.run_module("tracekit", run_name="__main__")
"""


def _case_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), TRACEKIT_NO_CACHE="1",
               PYTHONWARNINGS="ignore")
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("_HOSTILE_HWM", None)
    return env


class Launcher:
    """The forking server: start once, ``start(...)`` a child per case, ``close()``."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *PRELOAD], cwd=REPO, env=_case_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self._expect("ready")

    def _line(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the launcher ended (exit {self._proc.wait()})")
        return line.strip()

    def _expect(self, word: str) -> None:
        line = self._line()
        if line != word:
            raise RuntimeError(f"the launcher said {line!r}")

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], out: Path, err: Path,
              hwm: Path) -> int:
        """Fork a child for ``argv``; its pid (wait for it with :meth:`wait`)."""
        assert self._proc.stdin is not None
        req = {"argv": argv, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err),
               "hwm": str(hwm)}
        self._proc.stdin.write(json.dumps(req) + "\n")
        self._proc.stdin.flush()
        return int(self._line())

    def wait(self) -> tuple[int, float]:
        """The wait status and the CPU seconds of the child last started."""
        status, cpu = self._line().split()
        return int(status), float(cpu)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _read_hwm(path: Path) -> float:
    try:
        kb = int(path.read_text())
    except (OSError, ValueError):
        return 0.0
    finally:
        path.unlink(missing_ok=True)
    return kb / 1024


def _watch(pid: int, limit_mb: float, deadline: float,
           why: list[str], finished: threading.Event, peak: list[int]) -> None:
    """Kill the process group past the RSS or time limit (never reaps: wait4 does)."""
    try:
        root = psutil.Process(pid)
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
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:  # a forked child not yet in its own session
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return


def run_case(case: object, folder: Path, launcher: Launcher | None = None) -> Result:
    from bad_inputs.hostile import Case

    assert isinstance(case, Case)
    argv, named = case.build(folder)
    before = _hashes(folder)
    env = _case_env()
    hwm = folder.parent / f".{folder.name}.hwm"
    why: list[str] = []
    finished = threading.Event()
    peak = [0]
    if launcher is None:
        start = time.monotonic()
        env["_HOSTILE_HWM"] = str(hwm)
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRAP, *argv], cwd=folder, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            start_new_session=True)
        pid = proc.pid
        out_chunks: list[bytes] = []
        err_chunks: list[bytes] = []
        readers = [threading.Thread(target=lambda s=s, c=c: c.append(s.read()), daemon=True)
                   for s, c in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
        for t in readers:
            t.start()
    else:
        out_file = folder.parent / f".{folder.name}.stdout"
        err_file = folder.parent / f".{folder.name}.stderr"
        start = time.monotonic()
        pid = launcher.start(argv, folder, env, out_file, err_file, hwm)
    watcher = threading.Thread(
        target=_watch, args=(pid, 2 * case.rss_mb, start + case.wall_s, why, finished, peak),
        daemon=True)
    watcher.start()
    if launcher is None:
        _, status, usage = os.wait4(pid, 0)
        cpu = usage.ru_utime + usage.ru_stime
    else:
        status, cpu = launcher.wait()
    wall = time.monotonic() - start
    finished.set()
    rc = os.waitstatus_to_exitcode(status)
    if launcher is None:
        proc.returncode = rc
        for t in readers:
            t.join()
        stdout, stderr = b"".join(out_chunks), b"".join(err_chunks)
    else:
        stdout, stderr = out_file.read_bytes(), err_file.read_bytes()
        out_file.unlink()
        err_file.unlink()
    watcher.join()
    return Result(
        rc=rc, stdout=stdout.decode(errors="replace"), stderr=stderr.decode(errors="replace"),
        wall_s=wall, cpu_s=cpu, rss_mb=max(_read_hwm(hwm), peak[0] / MB), named=named,
        hashes_before=before, hashes_after=_hashes(folder), killed=", ".join(why))


def main(args: list[str]) -> None:
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from bad_inputs.hostile import CASES

    launcher = Launcher() if "--forked" in args else None
    names = [a for a in args if a != "--forked"]
    for case in CASES:
        if names and not any(n in case.name or n == case.family for n in names):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            res = run_case(case, Path(tmp), launcher)
        line = res.stderr.strip().replace(tmp, "T")
        ok = res.rc == case.rc and "Traceback" not in res.stderr
        print(f"{'ok ' if ok else 'BAD'} {case.family:18} {case.name:30} rc={res.rc} "
              f"{res.wall_s:5.1f}s {res.cpu_s:5.2f}s CPU {res.rss_mb:6.0f}MB {res.killed} | "
              f"{line[-300:]}",
              flush=True)
    if launcher is not None:
        launcher.close()


if __name__ == "__main__":
    main(sys.argv[1:])
