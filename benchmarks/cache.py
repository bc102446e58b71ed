"""First vs warm (derived cache) `tracekit analyze`, and the HTML report's build time.

    .venv/bin/python benchmarks/cache.py [--tp 8] [--target-mb 10] [--repeat 3] [--keep]
    .venv/bin/python benchmarks/cache.py --html-only RUN_DIR   # HTML build time, in process

Each analysis runs in a fresh process (`python -m tracekit analyze RUN --hardware h200 --json
OUT --cache-dir C`): first with an empty cache folder, then again (a hit), then a hit with
``--html`` too (rendered, then stored under ``C/reports``), then that again (the stored
reports are written). ``--html-only`` times ``reports.render("html", analysis)`` on an
analysis built in process, so that it can run against any tracekit checkout (put it first on
PYTHONPATH).
Medians of ``--repeat``; wall-clock on a machine that may be shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def synth(tp: int, target_mb: float) -> Path:
    out = WORK / f"cache-tp{tp}-{target_mb:g}mb"
    if not (out / "manifest.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "tracekit", "synth", "--out", str(out), "--tp",
                        str(tp), "--dp", str(tp), "--enable-dp-attention", "--ep", str(tp),
                        "--target-mb", str(target_mb)], check=True, stdout=subprocess.DEVNULL)
    return out


def cache_runs(run: Path, repeat: int) -> None:
    first, warm, warm_html, stored_html = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        cache, out = Path(tmp) / "cache", Path(tmp) / "out"
        base = [sys.executable, "-m", "tracekit", "analyze", str(run), "--hardware", "h200",
                "--json", str(out / "a.json"), "--cache-dir", str(cache)]
        for _ in range(repeat):
            shutil.rmtree(cache, ignore_errors=True)
            first.append(_timed(base))
            warm.append(_timed(base))
            warm_html.append(_timed([*base, "--html", str(out / "a.html")]))
            # the reports rendered just now are stored beside the derived entry
            stored_html.append(_timed([*base, "--html", str(out / "a.html")]))
    f, w, h, s = (statistics.median(x) for x in (first, warm, warm_html, stored_html))
    print(f"first analysis (empty cache)   {f:7.2f} s")
    print(f"re-analysis (derived hit)      {w:7.2f} s   {f / w:5.1f}x faster")
    print(f"re-analysis + --html (hit)     {h:7.2f} s   (HTML rendered)")
    print(f"again + --html (stored report) {s:7.2f} s   {f / s:5.1f}x faster than the first")


def html_only(run: Path, repeat: int) -> None:
    from tracekit import api, reports

    analysis = api.analyze(run, options=api.AnalyzeOptions(hardware="h200"))
    try:  # this branch's report digest; absent in older checkouts
        from tracekit.reports import digest

        digest.attach(analysis)
    except ImportError:
        pass
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        page = reports.render("html", analysis)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    size = len(page) if isinstance(page, (str, bytes)) else 0
    # CPU seconds too: on a shared machine they move far less than the wall clock
    print(f"html build  {statistics.median(times):6.2f} s  (median of {repeat}; first "
          f"{times[0]:.2f} s with imports)  CPU {statistics.median(cpu):.2f} s (first "
          f"{cpu[0]:.2f} s)  {size / 1e6:.1f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--target-mb", type=float, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--html-only", type=Path, default=None, metavar="RUN_DIR")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.html_only is not None:
        html_only(args.html_only, args.repeat)
        return
    run = synth(args.tp, args.target_mb)
    try:
        cache_runs(run, args.repeat)
    finally:
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
