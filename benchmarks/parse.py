"""Parse throughput and memory of tracekit against HTA on one large synthetic Kineto rank.

    python benchmarks/parse.py [--size-mb 500] [--jobs N] [--skip-hta] [--skip-analyze] [--keep]

The trace is generated deterministically by ``tracekit.synth`` (seed 0): one rank of an
SGLang-style TP8/DP8-attention/EP8 DeepSeek run with eager steps, so it carries NCCL kernels
enriched with ``record_param_comms`` args, custom all-reduce and pynccl kernels, cpu ops,
python stacks and ac2g flows (at 500 MB: about 2.4 M events). It is written as plain JSON so
that both tools read the same bytes (throughput is MB of uncompressed JSON per second).

Then (issue 17) the whole ``tracekit analyze FOLDER --hardware h200 --json`` of the same file in
a fresh process (parse, attribution, measurement, the JSON report), against HTA's load alone:
target >= 20x faster at <= 1/3 of HTA's peak RSS (``--skip-analyze`` leaves it out).

Each tool loads the same file in a fresh process: tracekit with ``tracekit.parsers.load_run``
(``--jobs``: the cores it may use, default all; one file is parsed in one process by either
reader, the msgspec fallback too, and the native scan runs in a worker thread beside the main
thread), HTA with
``TraceAnalysis(trace_dir=...)`` in its own venv (``benchmarks/_work/hta-venv``,
holistictraceanalysis pinned in ``_hta_env.py``). Printed: load time, MB/s, MB/s per core,
MB per CPU-second, peak RSS of the process tree, and the ratios against the targets of
issue 2 (20x HTA's throughput, 1/6 of its peak RSS, 300 MB/s per core, checked as MB per
CPU-second of the load: the CPU time of all threads and waited-for child processes between
the start and the end of the load call, which is also what the throughput times; the whole
process's figure, interpreter start-up and imports included, is printed beside it).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _hta_env import HTA_VERSION, WORK, hta_python
from _measure import Measured, fmt_gb, fmt_mb, run_measured

from tracekit.engine import default_jobs
from tracekit.synth import ModelShape, SynthConfig
from tracekit.synth.run import RankJob, steps_for_target, write_rank

# CPU during the load: this process (all its threads) plus the children it waited for
_CPU = r"""
import resource
def _cpu():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime
"""

# argv: trace folder, jobs, and an optional small trace loaded first (a warm process: the
# first load's one-off costs, such as the pandas import pyarrow makes on its first array,
# are then paid before the timed load; they are reported as the warm-up's CPU)
TRACEKIT_SCRIPT = r"""
import json, sys, time
from pathlib import Path
from tracekit.api import LoadOptions
from tracekit.parsers import load_run
""" + _CPU + r"""
warm_cpu = None
if len(sys.argv) > 3:
    c = _cpu()
    load_run(Path(sys.argv[3]), LoadOptions(jobs=1))
    warm_cpu = _cpu() - c
t, c = time.perf_counter(), _cpu()
run = load_run(Path(sys.argv[1]), LoadOptions(jobs=int(sys.argv[2])))
elapsed, cpu = time.perf_counter() - t, _cpu() - c
reader = (run.events.schema.metadata or {}).get(b"reader", b"").decode()
print(json.dumps({"load_s": elapsed, "load_cpu_s": cpu, "events": run.events.num_rows,
                  "ranks": run.ranks, "warm_up_cpu_s": warm_cpu, "reader": reader}))
"""
# the small trace of a warm process: one rank of a bundled sample run
WARM_UP_TRACE = (Path(__file__).resolve().parents[1] / "sample_traces" / "tp4_dp2_attn_tp"
                 / "rank0.trace.json.gz")

# HTA's load (TraceAnalysis over the trace folder), timed the same way as tracekit's
HTA_SCRIPT = r"""
import json, sys, time
from hta.trace_analysis import TraceAnalysis
""" + _CPU + r"""
t, c = time.perf_counter(), _cpu()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
elapsed, cpu = time.perf_counter() - t, _cpu() - c
frames = analysis.t.traces
print(json.dumps({"load_s": elapsed, "load_cpu_s": cpu,
                  "events": int(sum(len(df) for df in frames.values())),
                  "ranks": sorted(int(r) for r in frames)}))
"""

TARGET_RATIO = 20.0
TARGET_RSS_FRACTION = 1 / 6
TARGET_PER_CORE = 300.0
TARGET_ANALYZE_RATIO = 20.0  # issue 17: the whole analysis against HTA's load alone
TARGET_ANALYZE_RSS = 1 / 3


def bench_config() -> SynthConfig:
    return SynthConfig(tp=8, dp=8, enable_dp_attention=True, ep=8, cuda_graph=False,
                       naming="rank", gzip=False, seed=0,
                       shape=ModelShape(layers=8, tokens=64, extend_tokens=256))


def make_trace(size_mb: float, trace_dir: Path) -> tuple[Path, int]:
    """Write rank 0 of the benchmark run (about ``size_mb`` MB of JSON) into ``trace_dir``."""
    cfg = bench_config()
    cfg = dataclasses.replace(cfg, steps=steps_for_target(cfg, int(size_mb * 1e6)))
    trace_dir.mkdir(parents=True, exist_ok=True)
    info = write_rank(RankJob(cfg, 0, str(trace_dir), "bench-parse"))
    (trace_dir / info["sidecar"]).unlink()  # ground truth is not needed here
    path = trace_dir / info["trace"]
    return path, path.stat().st_size


def _warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def _check(name: str, m: Measured) -> Measured:
    if m.returncode != 0 or "load_s" not in m.result:
        sys.exit(f"{name} failed (exit {m.returncode}):\n{m.stderr[-3000:]}")
    return m


def _median_run(runs: list[Measured]) -> Measured:
    """The run of median load CPU (peak RSS: the largest of all the runs)."""
    ordered = sorted(runs, key=lambda m: float(m.result["load_cpu_s"]))
    mid = ordered[len(ordered) // 2]
    return dataclasses.replace(mid, tree_peak_bytes=max(m.tree_peak_bytes for m in runs))


def _tracekit(trace_dir: Path, jobs: int, repeat: int, warm: bool,
              native: bool = True) -> list[Measured]:
    """``repeat`` loads, each in a fresh process (after a warm-up load when ``warm``);
    ``native`` False: with ``TRACEKIT_NATIVE=0`` (the msgspec reader alone, as a build
    without the extension reads)."""
    argv = [sys.executable, "-c", TRACEKIT_SCRIPT, str(trace_dir), str(jobs)]
    if warm:
        argv.append(str(WARM_UP_TRACE))
    env = dict(os.environ)
    if not native:
        env["TRACEKIT_NATIVE"] = "0"
    runs = []
    for _ in range(repeat):
        m = _check("tracekit", run_measured(argv, env=env))
        runs.append(m)
        print(f"  {'warm' if warm else 'cold'} process: load {m.result['load_s']:.2f} s, "
              f"CPU during the load {m.result['load_cpu_s']:.2f} s, reader "
              f"{m.result.get('reader') or '?'}"
              + (f" (warm-up load: {m.result['warm_up_cpu_s']:.2f} s CPU)" if warm else ""))
    return runs


def _report(name: str, m: Measured, size: int, cores: int) -> dict[str, float]:
    _check(name, m)
    load_s = float(m.result["load_s"])
    load_cpu = float(m.result["load_cpu_s"])
    mbps = size / 1e6 / load_s
    cpu_mbps = size / 1e6 / m.cpu_s if m.cpu_s > 0 else float("nan")
    load_cpu_mbps = size / 1e6 / load_cpu if load_cpu > 0 else float("nan")
    print(f"{name}: load {load_s:.2f} s (process wall {m.wall_s:.2f} s, CPU {m.cpu_s:.2f} s "
          f"on {cores} core(s)); {mbps:.1f} MB/s; {mbps / cores:.1f} MB/s per core by wall "
          f"time, {cpu_mbps:.1f} MB per CPU-second of the whole process; peak RSS "
          f"{fmt_gb(m.tree_peak_bytes)} (process tree); {m.result.get('events')} rows")
    print(f"{name}: CPU during the load {load_cpu:.2f} s (all threads and waited-for "
          f"children, start-up and imports before the call excluded): {load_cpu_mbps:.1f} MB "
          f"per CPU-second")
    return {"load_s": load_s, "mbps": mbps, "rss": float(m.tree_peak_bytes),
            "cpu_mbps": cpu_mbps, "load_cpu_mbps": load_cpu_mbps}


def count_events(path: Path) -> int:
    """Trace events in the file (every event has exactly one "ph" key)."""
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(64 << 20):
            n += chunk.count(b'"ph":')
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=500.0, help="JSON size of the trace")
    ap.add_argument("--jobs", type=int, default=default_jobs(), help="tracekit processes")
    ap.add_argument("--skip-hta", action="store_true", help="measure tracekit only")
    ap.add_argument("--repeat", type=int, default=3,
                    help="tracekit loads of each kind (cold / warm process); the median counts")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument("--skip-msgspec", action="store_true",
                    help="do not measure the msgspec reader (TRACEKIT_NATIVE=0) beside it")
    ap.add_argument("--skip-analyze", action="store_true",
                    help="do not time the whole `tracekit analyze` of the trace")
    ap.add_argument("--work", type=Path, default=WORK / "parse", help="scratch folder")
    args = ap.parse_args(argv)

    trace_dir = args.work / f"trace-{int(args.size_mb)}mb"
    existing = sorted(trace_dir.glob("rank0.trace.json")) if trace_dir.exists() else []
    if existing:
        path, size = existing[0], existing[0].stat().st_size
        print(f"reusing {path} ({fmt_mb(size)})")
    else:
        print(f"generating a {args.size_mb:.0f} MB synthetic rank (tracekit.synth, seed 0)...")
        path, size = make_trace(args.size_mb, trace_dir)
        print(f"wrote {path} ({fmt_mb(size)})")
    load1 = os.getloadavg()[0]
    print(f"{count_events(path):,} trace events; load average before: {load1:.1f} on "
          f"{os.cpu_count()} CPUs (figures are wall-clock: a busy machine lowers them)")
    try:
        _warm(path)
        print(f"tracekit, {args.repeat} fresh processes of each kind (figures below: the "
              f"median by load CPU; peak RSS: the largest)")
        cold = _median_run(_tracekit(trace_dir, args.jobs, args.repeat, warm=False))
        warm = _median_run(_tracekit(trace_dir, args.jobs, args.repeat, warm=True))
        tk_r = _report("tracekit (cold process)", cold, size, args.jobs)
        warm_r = _report("tracekit (warm process)", warm, size, args.jobs)
        tk_r["rss"] = max(tk_r["rss"], warm_r["rss"])
        print(f"tracekit per core (steady state: a warm process): {warm_r['load_cpu_mbps']:.1f}"
              f" MB per CPU-second during the load (target >= {TARGET_PER_CORE:.0f}): "
              f"{'met' if warm_r['load_cpu_mbps'] >= TARGET_PER_CORE else 'MISSED'}; "
              f"{tk_r['load_cpu_mbps']:.1f} in a cold process (first load's one-off costs "
              f"included)")
        if not args.skip_msgspec:
            _msgspec_beside(trace_dir, args, size, tk_r, warm_r)
        analyzed = None if args.skip_analyze else _analyze(trace_dir, args)
        if args.skip_hta:
            return 0
        py = hta_python()
        _warm(path)
        hta = run_measured([str(py), "-c", _hta_script(), str(trace_dir)])
        hta_r = _report(f"HTA {HTA_VERSION}", hta, size, 1)
        ratio = tk_r["mbps"] / hta_r["mbps"]  # the cold process: as HTA is measured
        rss = tk_r["rss"] / hta_r["rss"]
        cpu_ratio = tk_r["cpu_mbps"] / hta_r["cpu_mbps"]
        load_cpu_ratio = tk_r["load_cpu_mbps"] / hta_r["load_cpu_mbps"]
        print(f"CPU-time throughput ratio tracekit/HTA: {cpu_ratio:.1f}x (whole process), "
              f"{load_cpu_ratio:.1f}x (during the load)")
        print(f"throughput ratio tracekit/HTA: {ratio:.1f}x (target >= {TARGET_RATIO:.0f}x): "
              f"{'met' if ratio >= TARGET_RATIO else 'MISSED'}")
        print(f"peak RSS ratio tracekit/HTA: {rss:.3f} (target <= {TARGET_RSS_FRACTION:.3f}): "
              f"{'met' if rss <= TARGET_RSS_FRACTION else 'MISSED'}")
        if analyzed is not None:
            a_ratio = hta_r["load_s"] / analyzed.wall_s
            a_rss = analyzed.tree_peak_bytes / hta_r["rss"]
            print(f"whole tracekit analyze vs HTA's load alone: {a_ratio:.1f}x faster (target >= "
                  f"{TARGET_ANALYZE_RATIO:.0f}x): "
                  f"{'met' if a_ratio >= TARGET_ANALYZE_RATIO else 'MISSED'}; peak RSS ratio "
                  f"{a_rss:.3f} (target <= {TARGET_ANALYZE_RSS:.3f}): "
                  f"{'met' if a_rss <= TARGET_ANALYZE_RSS else 'MISSED'}")
        per_core = warm_r["load_cpu_mbps"]  # MB per CPU-second of the load: what one core does
        print(f"tracekit per core: {per_core:.1f} MB per CPU-second during the load in a warm "
              f"process, {tk_r['load_cpu_mbps']:.1f} in a cold one, {tk_r['cpu_mbps']:.1f} for "
              f"the whole cold process ({tk_r['mbps'] / args.jobs:.1f} MB/s per core by wall "
              f"time over {args.jobs}) (target >= {TARGET_PER_CORE:.0f}): "
              f"{'met' if per_core >= TARGET_PER_CORE else 'MISSED'}")
    finally:
        if not args.keep:
            shutil.rmtree(trace_dir, ignore_errors=True)
    return 0


def _msgspec_beside(trace_dir: Path, args: argparse.Namespace, size: int,
                    native_cold: dict[str, float], native_warm: dict[str, float]) -> None:
    """The msgspec reader alone (what a build without the extension reads with), in the
    same conditions, and what it costs against the native reader."""
    print(f"tracekit with TRACEKIT_NATIVE=0 (the msgspec reader alone), {args.repeat} fresh "
          f"processes of each kind")
    cold = _median_run(_tracekit(trace_dir, args.jobs, args.repeat, warm=False, native=False))
    warm = _median_run(_tracekit(trace_dir, args.jobs, args.repeat, warm=True, native=False))
    m_cold = _report("msgspec reader (cold process)", cold, size, args.jobs)
    m_warm = _report("msgspec reader (warm process)", warm, size, args.jobs)
    print(f"native reader / msgspec reader: {native_cold['mbps'] / m_cold['mbps']:.1f}x "
          f"(cold, wall), {native_warm['mbps'] / m_warm['mbps']:.1f}x (warm, wall), "
          f"{native_warm['load_cpu_mbps'] / m_warm['load_cpu_mbps']:.1f}x (warm, MB per "
          f"CPU-second of the load); peak RSS {fmt_gb(native_cold['rss'])} / "
          f"{fmt_gb(max(m_cold['rss'], m_warm['rss']))}")


def _analyze(trace_dir: Path, args: argparse.Namespace) -> Measured:
    """The whole analysis of the trace folder by the CLI in a fresh process (the median of
    ``repeat`` runs by wall time; peak RSS: the largest)."""
    out = args.work / "analyze-report.json"
    argv = [sys.executable, "-m", "tracekit", "analyze", str(trace_dir), "--hardware", "h200",
            "--json", str(out), "--jobs", str(args.jobs)]
    runs = []
    for _ in range(args.repeat):
        out.unlink(missing_ok=True)
        m = run_measured(argv, env=dict(os.environ))
        if m.returncode != 0 or not out.exists():
            sys.exit(f"tracekit analyze failed (exit {m.returncode}):\n{m.stderr[-3000:]}")
        print(f"  tracekit analyze (whole analysis, JSON report): {m.wall_s:.2f} s wall, "
              f"{m.cpu_s:.2f} s CPU, peak RSS {fmt_gb(m.tree_peak_bytes)} (process tree)")
        runs.append(m)
    out.unlink(missing_ok=True)
    ordered = sorted(runs, key=lambda m: m.wall_s)
    mid = ordered[len(ordered) // 2]
    return dataclasses.replace(mid, tree_peak_bytes=max(m.tree_peak_bytes for m in runs))


def _hta_script() -> str:
    return HTA_SCRIPT


if __name__ == "__main__":
    sys.exit(main())
