"""Measure alpha and beta of gloo on this machine: the `cpu-gloo` hardware profile.

Two processes join a gloo process group on 127.0.0.1 and run a ping-pong (send / recv) sweep
and an all-reduce sweep over message sizes; the fastest time per size is fitted (Theil-Sen,
tracekit.measure.fit) to ``t = alpha + bytes / B``: on a shared machine other work only ever
adds time, and a lower bound wants what the link allows, not what it usually got. The
all-reduce fit uses bus bytes (S * 2(n-1)/n, which is S for two ranks), so its B is a bus
bandwidth like nccl-tests busbw.
The profile's link class ``loopback`` takes the smaller of the two alphas and the larger of
the two bandwidths: a lower bound must not be slower than anything that was seen.
"""

from __future__ import annotations

import datetime as _dt
import multiprocessing as mp
import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tracekit.errors import CaptureError
from tracekit.measure.fit import theil_sen
from tracekit.measure.hardware import parse_profile, user_config_dir

DEFAULT_SIZES = tuple(4**k * 16 for k in range(10))  # 16 B .. 4 MiB
DEFAULT_ITERS = 15
TIMEOUT_S = 120.0
PROFILE_NAME = "cpu-gloo"


@dataclass(frozen=True)
class Sweep:
    sizes: tuple[int, ...]
    p2p_ns: tuple[float, ...]  # one-way time per size (half a round trip), fastest
    allreduce_ns: tuple[float, ...]  # per call, fastest


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, port: int, sizes: tuple[int, ...], iters: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    try:
        p2p, ar = [], []
        for size in sizes:
            buf = torch.zeros(max(1, size // 4), dtype=torch.float32)
            samples = []
            for i in range(iters + 2):
                dist.barrier()
                t0 = time.perf_counter_ns()
                if rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
                if i >= 2:
                    samples.append((time.perf_counter_ns() - t0) / 2)
            p2p.append(float(np.min(samples)))
            samples = []
            for i in range(iters + 2):
                dist.barrier()
                t0 = time.perf_counter_ns()
                dist.all_reduce(buf)
                if i >= 2:
                    samples.append(time.perf_counter_ns() - t0)
            ar.append(float(np.min(samples)))
        if rank == 0:
            queue.put((p2p, ar))
    finally:
        dist.destroy_process_group()


def sweep(sizes: tuple[int, ...] = DEFAULT_SIZES, iters: int = DEFAULT_ITERS,
          timeout_s: float = TIMEOUT_S) -> Sweep:
    """Run the two-process gloo sweep; CaptureError when it fails or times out."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, sizes, iters, queue), daemon=True)
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        p2p, ar = queue.get(timeout=timeout_s)
    except Exception as exc:  # queue.Empty, or a worker died
        raise CaptureError(f"gloo calibration produced no result within {timeout_s:.0f} s "
                           "(is torch installed and 127.0.0.1 usable?)") from exc
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    return Sweep(tuple(sizes), tuple(p2p), tuple(ar))


def profile_from_sweep(result: Sweep, *, name: str = PROFILE_NAME) -> dict[str, Any]:
    """The YAML document of a `cpu-gloo` profile from a sweep."""
    sizes = np.asarray(result.sizes, dtype=np.float64)
    p2p = theil_sen(sizes, result.p2p_ns)
    ar = theil_sen(sizes * 2 * (2 - 1) / 2, result.allreduce_ns)
    bw_p2p = 1.0 / p2p.slope if p2p.slope > 0 else float("nan")
    bw_ar = 1.0 / ar.slope if ar.slope > 0 else float("nan")
    seen = [b for b in (bw_p2p, bw_ar) if np.isfinite(b) and b > 0]
    best = max(seen) if seen else float("nan")
    if not seen:
        raise CaptureError("gloo calibration: time did not grow with message size")
    alpha_us = max(0.0, min(p2p.alpha, ar.alpha) / 1e3)
    import torch

    return {
        "name": name,
        "description": "gloo over 127.0.0.1 on this machine, measured by `tracekit calibrate`",
        "ranks_per_node": None,
        "intra": "loopback",
        "links": {
            "loopback": {
                "nominal_gbps": round(bw_p2p if np.isfinite(bw_p2p) else best, 4),
                "achievable_gbps": round(best, 4),
                "alpha_us": round(alpha_us, 3),
                "topology": "loopback",
                "source": "measured by `tracekit calibrate` (gloo, 2 processes, 127.0.0.1)",
            },
        },
        "measured": {
            "when": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "torch": str(torch.__version__),
            "sizes_bytes": [int(s) for s in result.sizes],
            "p2p_one_way_us": [round(t / 1e3, 3) for t in result.p2p_ns],
            "allreduce_us": [round(t / 1e3, 3) for t in result.allreduce_ns],
            "p2p_alpha_us": round(p2p.alpha / 1e3, 3),
            "p2p_gbps": round(bw_p2p, 4),
            "allreduce_alpha_us": round(ar.alpha / 1e3, 3),
            "allreduce_busbw_gbps": round(bw_ar, 4),
        },
    }


def dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def write_profile(document: dict[str, Any], path: Path | None = None) -> Path:
    """Validate and write atomically (temp file then rename); default: the user config dir."""
    target = path or user_config_dir() / f"{document['name']}.yaml"
    parse_profile(document, str(target))
    from tracekit import io

    return io.write_file(target, dump(document), make_parents=True)
