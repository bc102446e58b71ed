"""Write a synthetic run: one trace, one sidecar per rank, and the manifest.

Ranks are independent (each recomputes the shared world timeline from the seed), so they are
written with :func:`tracekit.engine.map_per_rank`. Every file is written under a temporary
name and renamed when complete; gzip output has a zero mtime and no embedded file name, so
the same config and seed give byte-identical files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from tracekit.engine import map_per_rank
from tracekit.io import atomic_path, make_folder, write_file
from tracekit.synth.comm_args import distributed_info
from tracekit.synth.config import (
    ModelShape,
    SynthConfig,
    process_groups,
    rank_groups,
    torch_version,
    trace_name,
)
from tracekit.synth.timeline import STEP_GAP_NS, step_times
from tracekit.synth.writer import RankRenderer

ORIGIN_NS = 4_458_000_000_000_000  # Kineto-like µs epoch offsets (ts ~ 4.458e12 µs)
BASE_TIME_NS = 1_790_000_000_000_000_000
_BUF = 4 * 1024 * 1024


def _gzip_writer(raw: IO[bytes], level: int) -> IO[bytes]:
    try:
        from isal import igzip

        return cast(IO[bytes], igzip.IGzipFile(fileobj=raw, mode="wb",
                                               compresslevel=min(level, 3), mtime=0, filename=""))
    except ImportError:  # pragma: no cover - isal is a default dependency here
        import gzip

        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level,
                                             mtime=0, filename=""))


@contextlib.contextmanager
def atomic_output(path: Path, gz: bool) -> Iterator[IO[bytes]]:
    """A binary stream that becomes ``path`` only when the block completes (gzip level 1:
    these are test inputs, written fast)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as raw:
        if gz:
            with _gzip_writer(raw, 1) as out:
                yield out
        else:
            yield raw


def write_json_atomic(path: Path, obj: Any) -> None:
    write_file(path, json.dumps(obj, indent=1) + "\n", compress=False)


def render_rank(cfg: SynthConfig, rank: int, out: IO[bytes]) -> tuple[list[dict[str, Any]], int]:
    """Write rank ``rank``'s trace to ``out``; return (sidecar collectives, JSON bytes)."""
    groups = process_groups(cfg)
    mine = rank_groups(cfg, rank, groups)
    buf = io.StringIO()
    written = 0

    def flush() -> None:
        nonlocal buf, written
        data = buf.getvalue().encode()
        out.write(data)
        written += len(data)
        buf = io.StringIO()

    # the renderer writes to whichever buffer is current (flush() replaces it)
    r = RankRenderer(cfg, rank, mine, lambda text: buf.write(text))
    dist = distributed_info(torch_version(cfg), cfg.nccl, rank, cfg.world, mine.member_of,
                            mine.pg_count)
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": rank % cfg.gpus_per_node, "name": "NVIDIA H200",
                              "totalGlobalMem": 150_754_820_096, "computeMajor": 9,
                              "computeMinor": 0, "numSms": 132}],
        "distributedInfo": dist,
        "record_shapes": 1,
        "with_stack": 1,
        "trace_id": f"{cfg.seed:08X}{rank:08X}",
    }
    buf.write(json.dumps(head)[:-1] + ',\n  "traceEvents": [\n')
    r.metadata()
    t = ORIGIN_NS
    for step in range(cfg.steps):
        times, slots = step_times(cfg, step, t)
        r.step(times, slots)
        t = times.end_ns + STEP_GAP_NS
        if buf.tell() > _BUF:
            flush()
    buf.write('\n  ],\n  "traceName": "' + trace_name(cfg, rank) + '",\n'
              '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": ' + str(BASE_TIME_NS) + "\n}\n")
    flush()
    return r.sidecar, written


@dataclass(frozen=True)
class RankJob:
    cfg: SynthConfig
    rank: int
    out_dir: str
    scenario: str


def write_rank(job: RankJob) -> dict[str, Any]:
    """Write one rank's trace and sidecar (a top-level function, for the process pool)."""
    cfg, rank = job.cfg, job.rank
    out_dir = Path(job.out_dir)
    name = trace_name(cfg, rank)
    with atomic_output(out_dir / name, cfg.gzip) as out:
        collectives, nbytes = render_rank(cfg, rank, out)
    sidecar = {"rank": rank, "scenario": job.scenario,
               "collectives": [{"index": i, **c} for i, c in enumerate(collectives)]}
    side_name = f"rank{rank}.sidecar.json"
    write_json_atomic(out_dir / side_name, sidecar)
    return {"rank": rank, "trace": name, "sidecar": side_name, "json_bytes": nbytes}


def steps_for_target(cfg: SynthConfig, target_bytes: int) -> int:
    """The step count that makes rank 0's uncompressed JSON about ``target_bytes``."""
    probe_steps = min(cfg.extend_steps + 2, max(cfg.extend_steps + 1, 2))
    probe = dataclasses.replace(cfg, steps=probe_steps)

    class _Count(io.RawIOBase):
        n = 0

        def writable(self) -> bool:
            return True

        def write(self, b: Any) -> int:
            self.n += len(b)
            return len(b)

    sink = _Count()
    render_rank(probe, 0, sink)  # type: ignore[arg-type]
    total = sink.n
    decode_steps = probe_steps - cfg.extend_steps
    one = dataclasses.replace(cfg, steps=cfg.extend_steps)
    sink1 = _Count()
    render_rank(one, 0, sink1)  # type: ignore[arg-type]
    per_decode = max(1, (total - sink1.n) // max(1, decode_steps))
    extra = max(0, target_bytes - sink1.n)
    return cfg.extend_steps + max(1, round(extra / per_decode))


def synth_run(cfg: SynthConfig, out_dir: Path, *, scenario: str = "synth",
              target_mb: float | None = None, jobs: int | None = None, engine: str = "local",
              scheduler: str | None = None, progress: bool = False) -> dict[str, Any]:
    """Write the whole run into ``out_dir``; return the manifest."""
    cfg = cfg.validate()
    if target_mb:
        cfg = dataclasses.replace(cfg, steps=steps_for_target(cfg, int(target_mb * 1e6)))
    make_folder(out_dir)
    jobs_list = [RankJob(cfg, r, str(out_dir), scenario) for r in range(cfg.world)]
    results = map_per_rank(write_rank, jobs_list, engine=engine, jobs=jobs, scheduler=scheduler,
                           progress=progress, label="synth")
    manifest = {
        "scenario": scenario,
        "world_size": cfg.world,
        "config": manifest_config(cfg),
        "command": "tracekit synth " + " ".join(cli_args(cfg)),
        "ranks": {str(r["rank"]): {"trace": r["trace"], "sidecar": r["sidecar"]}
                  for r in results},
        "synth": {"steps": cfg.steps, "seed": cfg.seed, "nccl": cfg.nccl, "torch": cfg.torch,
                  "stragglers": list(cfg.stragglers),
                  "json_bytes": {str(r["rank"]): r["json_bytes"] for r in results}},
    }
    write_json_atomic(out_dir / "manifest.json", manifest)
    return manifest


def manifest_config(cfg: SynthConfig) -> dict[str, Any]:
    return {
        "tp_size": cfg.tp, "dp_size": cfg.dp, "enable_dp_attention": cfg.enable_dp_attention,
        "ep_size": cfg.ep, "moe_dp_size": cfg.moe_dp, "attn_cp_size": 1, "npu": False,
        "attn_reduce": ("none" if cfg.attn_tp == 1 else
                        "full_tp" if cfg.attn_tp == cfg.tp else "attn_tp"),
        "dp_gather": cfg.gather_path() or "none",
        "combine": cfg.combine_path(),
        "a2a": cfg.a2a, "bug": None, "layers": cfg.shape.layers,
    }


def cli_args(cfg: SynthConfig) -> list[str]:
    """The ``tracekit synth`` options that reproduce ``cfg`` (fixed step count)."""
    s: ModelShape = cfg.shape
    args = [f"--tp {cfg.tp}", f"--dp {cfg.dp}", f"--ep {cfg.ep}", f"--moe-dp {cfg.moe_dp}",
            f"--a2a {cfg.a2a}", f"--dp-gather {cfg.dp_gather}", f"--combine {cfg.combine}",
            f"--era {cfg.nccl}", f"--torch {cfg.torch}", f"--steps {cfg.steps}",
            f"--extend-steps {cfg.extend_steps}", f"--hidden {s.hidden}",
            f"--experts {s.experts}", f"--topk {s.topk}", f"--tokens {s.tokens}",
            f"--extend-tokens {s.extend_tokens}", f"--layers {s.layers}", f"--seed {cfg.seed}",
            f"--naming {cfg.naming}"]
    if cfg.enable_dp_attention:
        args.append("--enable-dp-attention")
    if not cfg.cuda_graph:
        args.append("--no-cuda-graph")
    if not cfg.custom_ar:
        args.append("--no-custom-ar")
    args += [f"--straggler {r}" for r in cfg.stragglers]
    if not cfg.gzip:
        args.append("--no-gzip")
    return args
