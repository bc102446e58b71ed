"""Where the process pool starts to pay: `tracekit analyze` with --jobs 1 against --jobs N.

    python benchmarks/engine_inline.py [--rank-mb 0.25 1 4 16] [--ranks 8] [--jobs 2]
                                       [--repeat 3] [--plain] [--keep]

For each per-rank size, ``tracekit synth`` (seed 0, TP=RANKS, gzip unless --plain) writes a
run; ``tracekit analyze DIR`` then runs in a fresh process --repeat times in-process
(``--jobs 1``) and --repeat times on a pool (``--jobs N``, which forces the pool whatever
the size). The median wall time of each is printed with the run's bytes on disk (what
:data:`tracekit.engine.INLINE_MAX_BYTES` is compared with) and its bytes of JSON. The
threshold is the on-disk size where the pool's median falls below the in-process one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work" / "engine_inline"


def _synth(out: Path, ranks: int, rank_mb: float, gzip: bool) -> None:
    if (out / "manifest.json").is_file():
        return
    argv = [sys.executable, "-m", "tracekit", "synth", "--out", str(out), "--tp", str(ranks),
            "--target-mb", str(rank_mb), "--naming", "rank", "--gzip" if gzip else "--no-gzip"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def _analyze_s(run: Path, jobs: int) -> float:
    argv = [sys.executable, "-m", "tracekit", "analyze", str(run), "--jobs", str(jobs)]
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _bytes(run: Path, suffixes: tuple[str, ...]) -> int:
    return sum(p.stat().st_size for p in run.iterdir() if p.name.endswith(suffixes)
               and not p.name.endswith(".truth.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank-mb", type=float, nargs="+", default=[0.25, 1.0, 4.0, 16.0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plain", action="store_true", help="write .json rather than .json.gz")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"| MB JSON/rank | ranks | on disk MB | --jobs 1 s | --jobs {args.jobs} s "
          "| pool/inline |")
    print("|---|---|---|---|---|---|")
    for mb in args.rank_mb:
        run = WORK / f"r{args.ranks}_{mb:g}mb_{'json' if args.plain else 'gz'}"
        _synth(run, args.ranks, mb, not args.plain)
        disk = _bytes(run, (".json", ".json.gz"))
        inline: list[float] = []
        pool: list[float] = []
        for _ in range(args.repeat):  # interleaved, so that a load spike hits both
            inline.append(_analyze_s(run, 1))
            pool.append(_analyze_s(run, args.jobs))
        a, b = statistics.median(inline), statistics.median(pool)
        print(f"| {mb:g} | {args.ranks} | {disk / 1e6:.1f} | {a:.2f} | {b:.2f} | {b / a:.2f} |",
              flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if not args.keep:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
