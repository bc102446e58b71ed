"""Run the layer on N gloo processes and check every rank's output against the reference."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tracekit.workloads import comm_log
from tracekit.workloads.config import WorkloadConfig
from tracekit.workloads.model import DeepseekV4DecoderLayer, make_forward_batch
from tracekit.workloads.parallel_state import (
    get_parallel,
    get_world_group,
    initialize_model_parallel,
    set_parallel_state,
)
from tracekit.workloads.reference import ATOL, RTOL, reference_outputs
from tracekit.workloads.sidecar import write_sidecar
from tracekit.workloads.weights import layer_weights, step_inputs, token_counts


@dataclass(frozen=True)
class RankResult:
    rank: int
    max_abs_diff: float
    matches: bool
    collectives: int


@dataclass(frozen=True)
class Outputs:
    """Where a run writes: traces (optional) and sidecars (optional), under a scenario name."""

    trace_dir: Path | None = None
    sidecar_dir: Path | None = None
    scenario: str = "workload"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local_input(cfg: WorkloadConfig, x: torch.Tensor, rows: int) -> torch.Tensor:
    """This rank's rows entering layer 0, zero-padded to ``rows`` (MAX_LEN)."""
    out = x.new_zeros((rows, cfg.hidden))
    out[: x.shape[0]] = x
    return out


def run_steps(cfg: WorkloadConfig, expected: list[list[torch.Tensor]]) -> tuple[float, bool]:
    """Forward every step through every layer; compare the real rows with ``expected``.

    Each step starts with a barrier on the world cpu group (as a scheduler's per-step sync),
    so that the ranks enter the layers together.
    """
    ps = get_parallel()
    layers = [DeepseekV4DecoderLayer(i, layer_weights(cfg, i)) for i in range(cfg.layers)]
    worst, ok = 0.0, True
    for step in range(cfg.steps):
        counts = token_counts(cfg, step)
        fb = make_forward_batch(counts)
        dp = ps.attn_dp_rank
        x = _local_input(cfg, step_inputs(cfg, step)[dp], fb.rows(dp))
        with comm_log.issued_by("barrier"):
            get_world_group().barrier()
        with torch.profiler.record_function(f"step[EXTEND bs={len(counts)} toks={sum(counts)}]"):
            for layer in layers:
                x = layer.forward(x, fb)
        want = expected[step][dp]
        got = x[: want.shape[0]]
        worst = max(worst, float((got - want).abs().max()))
        ok = ok and bool(torch.allclose(got, want, rtol=RTOL, atol=ATOL))
    return worst, ok


def run_rank(rank: int, cfg: WorkloadConfig, init_method: str, outputs: Outputs) -> RankResult:
    import torch.distributed as dist

    torch.set_num_threads(1)
    # SGLang calls all_gather_into_tensor / reduce_scatter_tensor; torch 2.13 calls them
    # deprecated. Keep SGLang's calls (they are what the stacks must show), drop the noise.
    warnings.filterwarnings("ignore", message=r".*is deprecated. Please use .*_single",
                            category=FutureWarning)
    timeout = {} if cfg.timeout_s is None else {"timeout": datetime.timedelta(
        seconds=cfg.timeout_s)}
    dist.init_process_group("gloo", init_method=init_method, rank=rank,
                            world_size=cfg.world_size, **timeout)
    written = False
    try:
        set_parallel_state(initialize_model_parallel(cfg, rank))
        expected = [reference_outputs(cfg, step) for step in range(cfg.steps)]
        comm_log.reset()
        profiling: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        if outputs.trace_dir is not None:
            from tracekit.capture.profiling import profile

            # One unprofiled step first: gloo pairs and first-call costs stay out of the
            # trace, and the sidecar lists exactly the profiled collectives.
            run_steps(dataclasses.replace(cfg, steps=1), expected[:1])
            comm_log.reset()
            profiling = profile(outputs.trace_dir, rank=rank)
        with profiling:
            worst, ok = run_steps(cfg, expected)
        entries = comm_log.entries()
        if outputs.sidecar_dir is not None:
            write_sidecar(outputs.sidecar_dir, rank, outputs.scenario, entries)
        written = True
        return RankResult(rank, worst, ok, len(entries))
    finally:
        if not written and outputs.sidecar_dir is not None:
            # a failed rank (a planted hang) still says what it issued, the last entry
            # being the collective it was blocked in
            write_sidecar(outputs.sidecar_dir, rank, outputs.scenario, comm_log.entries())
        set_parallel_state(None)
        dist.destroy_process_group()


def _spawned(index: int, cfg: WorkloadConfig, init_method: str, outputs: Outputs,
             queue: Any) -> None:
    queue.put(run_rank(index, cfg, init_method, outputs))


def launch(cfg: WorkloadConfig, outputs: Outputs) -> list[RankResult]:
    """Run every rank: under torchrun this process is one rank, otherwise spawn them all."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        if int(os.environ["WORLD_SIZE"]) != cfg.world_size:
            raise SystemExit(f"torchrun world size {os.environ['WORLD_SIZE']} != tp_size "
                             f"{cfg.world_size}")
        return [run_rank(int(os.environ["RANK"]), cfg, "env://", outputs)]
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    init_method = f"tcp://127.0.0.1:{free_port()}"
    mp.start_processes(_spawned, args=(cfg, init_method, outputs, queue),
                       nprocs=cfg.world_size, join=True, start_method="spawn")
    results = [queue.get() for _ in range(cfg.world_size)]
    return sorted(results, key=lambda r: r.rank)
