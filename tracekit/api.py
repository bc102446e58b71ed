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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracekit import schema

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class LoadOptions:
    """How to read a trace file or run directory."""

    rank: int | None = None  # force the rank of a single file
    cache_dir: Path | None = None  # Parquet cache; a changed file is re-read
    on_error: str = "stop"  # "stop" at the first bad rank file, or "skip" it
    jobs: int | None = None  # processes for per-rank parsing (None = cores)
    progress: bool = False  # progress bar on a terminal
    engine: str = "local"  # "local" or "dask"
    scheduler: str | None = None  # dask scheduler address for engine "dask"


@dataclass
class Run:
    """Everything read from the files of one run, before any interpretation."""

    events: pa.Table  # EVENTS
    process_groups: pa.Table  # PROCESS_GROUPS
    rank_info: pa.Table  # RANK_INFO
    # (file, reason) for each file skipped with on_error="skip"
    skipped: list[tuple[str, str]] = field(default_factory=list)
    extra: dict[str, pa.Table] = field(default_factory=dict)  # format-specific side tables

    @property
    def ranks(self) -> list[int]:
        return sorted(set(self.rank_info.column(schema.RANK).to_pylist()))


@dataclass(frozen=True)
class AnalyzeOptions:
    """What the later stages need besides the trace."""

    topology: Any | None = None  # tracekit.topology.Topology, or None to infer
    # layout to read the trace's process groups with when topology is None ('sglang', 'vllm',
    # 'megatron'; None: SGLang's, else the one other layout they fit)
    layout: str | None = None
    rules_files: tuple[Path, ...] = ()  # user rule files added to the packaged ones
    hardware: str | Path | None = None  # profile name ('h200', 'cpu-gloo') or a YAML file


RESULT_TABLES = ("attributed", "measured", "phases", "findings")  # Analysis.tables core names


@dataclass
class Analysis:
    """The result tables of one run; reports read only this.

    ``tables`` names every result table (Arrow); ``collectives()``, ``phases()``,
    ``findings()`` and ``coverage()`` give the common ones as pandas DataFrames
    (tracekit.analysis_view; docs/api.md).
    """

    run: Run
    attributed: pa.Table | None = None  # ATTRIBUTED
    findings_table: pa.Table | None = None  # FINDINGS
    measured: pa.Table | None = None  # MEASURED
    phases_table: pa.Table | None = None  # PHASES
    # further named result tables (coverage, stragglers, a2a, fits, ...)
    extra_tables: dict[str, pa.Table] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # topology, hardware, versions
    source: str = ""  # the trace file or run directory read

    @property
    def tables(self) -> Mapping[str, pa.Table]:
        """Every result table present, by name (read-only; set the fields to change one)."""
        core = {"attributed": self.attributed, "measured": self.measured,
                "phases": self.phases_table, "findings": self.findings_table}
        clash = sorted(set(RESULT_TABLES) & set(self.extra_tables))
        if clash:
            raise ValueError(f"extra table names clash with result tables: {clash}")
        merged = {k: v for k, v in core.items() if v is not None}
        merged.update((k, v) for k, v in sorted(self.extra_tables.items()) if v is not None)
        return MappingProxyType(merged)

    def collectives(self) -> pd.DataFrame:
        """One row per collective and rank (MEASURED): COLLECTIVE_COLUMNS first, unknown = NA."""
        from tracekit.analysis_view import collectives

        return collectives(self)

    def phases(self) -> pd.DataFrame:
        """PHASES as a DataFrame (per rank, per layer and all-rank total rows)."""
        from tracekit.analysis_view import frame

        return frame(self.phases_table, schema.PHASES)

    def findings(self) -> pd.DataFrame:
        """FINDINGS as a DataFrame, lints and measurement findings together."""
        from tracekit.analysis_view import frame

        return frame(self.findings_table, schema.FINDINGS)

    def coverage(self) -> pd.DataFrame:
        """COVERAGE as a DataFrame: the run row, then one row per communicator."""
        from tracekit.analysis_view import frame

        return frame(self.extra_tables.get("coverage"), schema.COVERAGE)

    def __repr__(self) -> str:
        from tracekit.analysis_view import summary_text

        return summary_text(self)

    def _repr_html_(self) -> str:
        from tracekit.analysis_view import summary_html

        return summary_html(self)


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


COLLECTIVE_COLUMNS = (schema.RANK, schema.GROUP, schema.PATH, schema.PHASE, schema.LAYER,
                      schema.OP, schema.MSG_BYTES, schema.TRANSFER_NS, schema.WAIT_NS,
                      schema.BOUND_NS, schema.EFFICIENCY)


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
