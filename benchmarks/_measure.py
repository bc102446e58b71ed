"""Run a command in a fresh process and measure its wall time and memory.

Peak RSS is measured two ways: the whole process tree (the sum of the RSS of the process and
all its descendants, sampled every 50 ms with psutil; a short spike between samples can be
missed, so this is a lower bound of the true tree peak), and the largest single process (the
kernel's high-water mark ``VmHWM`` of each sampled process, which a spike cannot escape). The
children's ``ru_maxrss`` is not used: a child forked from this process starts with this
process's RSS as its maximum and keeps it across ``exec``, so it reported the benchmark's own
memory (1.5 GB for a child that used 15 MB). CPU time is the larger of the children's rusage
and the sum of the sampled per-process CPU times.
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


def _high_water(pid: int) -> int:
    """The kernel's peak RSS of ``pid`` since its last exec (bytes), 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_sample(proc: psutil.Process, cpu: dict[int, float], hwm: dict[int, int]) -> int:
    """RSS of the tree now; records each process's CPU time so far in ``cpu`` and its peak
    RSS in ``hwm`` (by pid)."""
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
            hwm[p.pid] = max(hwm.get(p.pid, 0), _high_water(p.pid))
    return total


def run_measured(argv: list[str], *, env: dict[str, str] | None = None,
                 timeout: float | None = None) -> Measured:
    """Run ``argv``; its last stdout line is parsed as JSON (the child's own figures)."""
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             text=True)
    peak = 0
    stop = threading.Event()
    ps = psutil.Process(child.pid)
    sampled_cpu: dict[int, float] = {}
    high_water: dict[int, int] = {}

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_sample(ps, sampled_cpu, high_water))
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
    # rusage misses workers that a forkserver (not the child) waits for; the sampled sum
    # misses the last 50 ms of each process: take the larger
    cpu = max((usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime),
              sum(sampled_cpu.values()))
    max_proc = max(high_water.values(), default=0)
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
