"""The world timeline of a synthetic run: when each collective slot starts and ends everywhere.

Every rank arrives at a slot after its own compute (noise, stragglers); the collective ends
once the last member has arrived plus the alpha-beta transfer time. The whole world is
synchronised at each slot, which is what a run with one TP group looks like and a fair
approximation otherwise. Every rank computes the same arrays from the seed, so ranks can be
written independently and still agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.synth.config import SynthConfig
from tracekit.synth.plan import Slot, StepInfo, compute_matrix, plan_step, transfer_noise

STEP_GAP_NS = 180_000
HEAD_NS = 25_000
TAIL_NS = 40_000


@dataclass(frozen=True)
class StepTimes:
    info: StepInfo
    start_ns: int
    end_ns: int
    prev_end: np.ndarray  # (slots,) end of the previous slot (step head for the first)
    arrive: np.ndarray  # (slots, world) when each rank reaches the slot
    end: np.ndarray  # (slots,) when the collective completes on every rank


def step_times(cfg: SynthConfig, step: int, start_ns: int) -> tuple[StepTimes, list[Slot]]:
    """Times of every slot of ``step`` for the whole world (rank 0's plan as the reference)."""
    info, slots = plan_step(cfg, 0, step)
    comp = compute_matrix(cfg, info, slots)
    tnoise = transfer_noise(cfg, info, len(slots))
    n = len(slots)
    prev_end = np.empty(n, dtype=np.int64)
    arrive = np.empty((n, cfg.world), dtype=np.int64)
    end = np.empty(n, dtype=np.int64)
    prev = start_ns + HEAD_NS
    for k, slot in enumerate(slots):
        prev_end[k] = prev
        arrive[k] = prev + comp[k].astype(np.int64)
        end[k] = int(arrive[k].max()) + int(slot.transfer_ns * tnoise[k])
        prev = int(end[k])
    return StepTimes(info, start_ns, prev + TAIL_NS, prev_end, arrive, end), slots


def run_times(cfg: SynthConfig, origin_ns: int) -> list[StepTimes]:
    out = []
    t = origin_ns
    for step in range(cfg.steps):
        times, _ = step_times(cfg, step, t)
        out.append(times)
        t = times.end_ns + STEP_GAP_NS
    return out
