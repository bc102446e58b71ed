"""The data model every stage passes along: a Run (what was read), the options of the
stages, and an Analysis (the result tables reports read). Imports only the standard library
at first (the schema, and with it pyarrow, when a method needs it): the options are built,
and a warm cached analysis keyed, before any table library loads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


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
        from tracekit import schema

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
        from tracekit import schema
        from tracekit.analysis_view import frame

        return frame(self.phases_table, schema.PHASES)

    def findings(self) -> pd.DataFrame:
        """FINDINGS as a DataFrame, lints and measurement findings together."""
        from tracekit import schema
        from tracekit.analysis_view import frame

        return frame(self.findings_table, schema.FINDINGS)

    def coverage(self) -> pd.DataFrame:
        """COVERAGE as a DataFrame: the run row, then one row per communicator."""
        from tracekit import schema
        from tracekit.analysis_view import frame

        return frame(self.extra_tables.get("coverage"), schema.COVERAGE)

    def __repr__(self) -> str:
        from tracekit.analysis_view import summary_text

        return summary_text(self)

    def _repr_html_(self) -> str:
        from tracekit.analysis_view import summary_html

        return summary_html(self)
