"""The public API: each stage is a function over tables (ARCHITECTURE.md "Data flow").

    files --load--> Run (EVENTS + PROCESS_GROUPS + RANK_INFO)
          --attribute--> ATTRIBUTED (+ FINDINGS from the lints)
          --measure--> MEASURED, PHASES (+ extra tables: a2a matrices, fits, stragglers)
    reports read an Analysis and never recompute.

The CLI is a thin layer over these functions. Stage implementations live in their modules and
are imported lazily so that importing tracekit stays cheap.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema
from tracekit.model import (  # the data model, re-exported for API users
    Analysis,
    AnalyzeOptions,
    LoadOptions,
    Run,
)


def load(path: str | Path, options: LoadOptions | None = None) -> Run:
    """Read a trace file or a run directory (Kineto or Ascend) into EVENTS."""
    from tracekit.parsers import load_run

    return load_run(Path(path), options or LoadOptions())


def attribute(run: Run, options: AnalyzeOptions | None = None) -> tuple[pa.Table, pa.Table]:
    """EVENTS -> (ATTRIBUTED, FINDINGS) through the topology and the rules engine."""
    from tracekit.rules.engine import attribute_run

    return attribute_run(run, options or AnalyzeOptions())


def measure(run: Run, attributed: pa.Table, options: AnalyzeOptions | None = None) -> Analysis:
    """ATTRIBUTED -> MEASURED, PHASES and further tables (bounds, overlap, cross-rank)."""
    from tracekit.measure import measure_run

    return measure_run(run, attributed, options or AnalyzeOptions())


def analyze(
    path: str | Path,
    load_options: LoadOptions | None = None,
    options: AnalyzeOptions | None = None,
) -> Analysis:
    """The whole pipeline on one run."""
    run = load(path, load_options)
    analysis = analyze_run(run, options)
    analysis.source = str(path)
    return analysis


def analyze_run(run: Run, options: AnalyzeOptions | None = None) -> Analysis:
    opts = options or AnalyzeOptions()
    if opts.topology is None:
        # one topology for every stage: the rules and the cross-rank matching (which fills
        # the members of communicators whose trace rows lack them) must agree
        opts = dataclasses.replace(opts, topology=infer_topology(run, opts))
    from tracekit import progress

    with progress.stage("attribute"):
        attributed, findings = attribute(run, opts)
    with progress.stage("measure"):
        analysis = measure(run, attributed, opts)
    analysis.findings_table = _concat_findings(findings, analysis.findings_table)
    return analysis


def infer_topology(run: Run, options: AnalyzeOptions) -> Any | None:
    """The topology the run's process groups imply (None when they imply none)."""
    from tracekit.rules.engine import resolve_topology
    from tracekit.rules.loader import load_rules

    return resolve_topology(run, options, load_rules(options.rules_files))


def _concat_findings(*tables: pa.Table | None) -> pa.Table:
    """Rules' lints first, then the measure stage's (stragglers): one FINDINGS table."""
    parts = [schema.conform(t, schema.FINDINGS) for t in tables if t is not None]
    if not parts:
        return schema.empty(schema.FINDINGS)
    return pa.concat_tables(parts).combine_chunks()


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
