"""Run a command in a fresh process and measure its wall time and memory.

Peak RSS is measured two ways: the largest single process (``ru_maxrss`` of the waited-for
children, from the kernel) and the whole process tree (the sum of the RSS of the process and
all its descendants, sampled every 50 ms with psutil; a short spike between samples can be
missed, so this is a lower bound of the true tree peak). CPU time is the larger of the
children's rusage and the sum of the sampled per-process CPU times.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil


@dataclass
class Measured:
    wall_s: float
    cpu_s: float  # user + system time of the process and its waited-for descendants
    tree_peak_bytes: int
    max_process_bytes: int
    result: dict[str, Any]
    returncode: int
    stderr: str


def _tree_sample(proc: psutil.Process, cpu: dict[int, float]) -> int:
    """RSS of the tree now; records each process's CPU time so far in ``cpu`` (by pid)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied), p.oneshot():
            total += p.memory_info().rss
            t = p.cpu_times()
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), t.user + t.system)
    return total


def run_measured(argv: list[str], *, env: dict[str, str] | None = None,
                 timeout: float | None = None) -> Measured:
    """Run ``argv``; its last stdout line is parsed as JSON (the child's own figures)."""
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = usage0.ru_maxrss
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             text=True)
    peak = 0
    stop = threading.Event()
    ps = psutil.Process(child.pid)
    sampled_cpu: dict[int, float] = {}

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_sample(ps, sampled_cpu))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        stop.set()
        sampler.join()
    wall = time.perf_counter() - start
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = usage1.ru_maxrss
    # rusage misses workers that a forkserver (not the child) waits for; the sampled sum
    # misses the last 50 ms of each process: take the larger
    cpu = max((usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime),
              sum(sampled_cpu.values()))
    # ru_maxrss is the largest child so far (KiB on Linux); it only says something new when the
    # new child beat the old record, so report the larger of that and the sampled tree peak.
    max_proc = max(after, before) * 1024 if after > before else 0
    result: dict[str, Any] = {}
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if lines:
        try:
            result = json.loads(lines[-1])
        except json.JSONDecodeError:
            result = {}
    return Measured(wall, cpu, max(peak, max_proc), max_proc, result, child.returncode, err)


def fmt_mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def fmt_gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def python() -> str:
    return sys.executable
