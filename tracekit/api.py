"""The public API: each stage is a function over tables (ARCHITECTURE.md "Data flow").

    files --load--> Run (EVENTS + PROCESS_GROUPS + RANK_INFO)
          --attribute--> ATTRIBUTED (+ FINDINGS from the lints)
          --measure--> MEASURED, PHASES (+ extra tables: a2a matrices, fits, stragglers)
    reports read an Analysis and never recompute.

Each is a façade over tracekit.pipeline, whose one orchestration (tracekit.pipeline.stages)
runs the stages in order; the CLI calls the pipeline too. Stage implementations are imported
when a stage runs, so that importing tracekit stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.model import (  # the data model, re-exported for API users
    Analysis,
    AnalyzeOptions,
    LoadOptions,
    Run,
)
from tracekit.pipeline import in_memory


def load(path: str | Path, options: LoadOptions | None = None) -> Run:
    """Read a trace file or a run directory (Kineto or Ascend) into EVENTS."""
    return in_memory.load(Path(path), options or LoadOptions())


def attribute(run: Run, options: AnalyzeOptions | None = None) -> tuple[pa.Table, pa.Table]:
    """EVENTS -> (ATTRIBUTED, FINDINGS) through the topology and the rules engine."""
    return in_memory.attribute(run, options or AnalyzeOptions())


def measure(run: Run, attributed: pa.Table, options: AnalyzeOptions | None = None) -> Analysis:
    """ATTRIBUTED -> MEASURED, PHASES and further tables (bounds, overlap, cross-rank)."""
    return in_memory.measure(run, attributed, options or AnalyzeOptions())


def analyze(
    path: str | Path,
    load_options: LoadOptions | None = None,
    options: AnalyzeOptions | None = None,
) -> Analysis:
    """The whole pipeline on one run (tracekit.pipeline: every stage, in memory)."""
    analysis = in_memory.analyze_path(Path(path), load_options, options)
    analysis.source = str(path)  # as the caller spelled it
    return analysis


def analyze_run(run: Run, options: AnalyzeOptions | None = None) -> Analysis:
    """Every stage after parse on a Run already loaded."""
    return in_memory.analyze_run(run, options)


def infer_topology(run: Run, options: AnalyzeOptions) -> Any | None:
    """The topology the run's process groups imply (None when they imply none)."""
    return in_memory.infer_topology(run, options)


def analyze_simple(path: str | Path, *, hardware: str | Path | None = None,
                   rules: tuple[str | Path, ...] | list[str | Path] = (), jobs: int | None = None,
                   cache_dir: str | Path | None = None, on_error: str = "stop",
                   **layout: Any) -> Analysis:
    """``tracekit.analyze``: the whole pipeline with the CLI's options as keywords.

    ``layout``: the parallel config of `tracekit analyze` (``config``, ``tp``, ``dp``, ``ep``,
    ``enable_dp_attention``, ...); none given: inferred from the trace's process groups.
    """
    from tracekit.topology.config import topology_from_options

    hw: str | Path | None = hardware
    if isinstance(hardware, str) and Path(hardware).is_file():
        hw = Path(hardware)
    topo = topology_from_options(**layout) if layout else None
    return analyze(path, LoadOptions(jobs=jobs, on_error=on_error,
                                     cache_dir=Path(cache_dir) if cache_dir else None),
                   AnalyzeOptions(topology=topo, rules_files=tuple(Path(r) for r in rules),
                                  hardware=hw, layout=layout.get("layout")))
