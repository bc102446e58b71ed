"""The one orchestration: every analysis, whole run or partitioned, runs these stages in order.

    parse       trace files -> EVENTS, rank by rank
    attribute   EVENTS -> ATTRIBUTED + COLLECTIVE_UNITS (the rules, with the run's topology)
    measure     each rank's time classes and the exposed time of its collectives
    cross-rank  instances matched across ranks: transfer / wait / skew, sizes and bounds,
                stragglers
    findings    the lints over every rank's collective units, then the measures' findings:
                one FINDINGS table

An :class:`Execution` says how the stages run and where their tables live:

* ``InMemory`` (tracekit.pipeline.in_memory): the whole run in this process;
* ``Partitioned`` (tracekit.pipeline.partitioned): the rank-local stages of each rank in a
  worker, written to Parquet parts; then the run-wide stages on the small parts.

Both run the one measure in its two halves (tracekit.measure.run): ``measure_ranks`` in
stage measure, ``cross_rank`` in stage cross-rank. An execution may run a stage inside an
earlier one (``Execution.inside``): the partitioned workers parse, attribute and measure a
rank in one task. That stage then gets no call of its own and the earlier stage's progress
line names both. :func:`execute` is where stage progress (tracekit.progress) is shown.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from tracekit import progress
from tracekit import schema as S
from tracekit.model import Analysis


@dataclass(frozen=True)
class Stage:
    name: str  # as the progress line shows it
    method: str  # the Execution method that runs it
    bar: bool = False  # the stage draws a progress bar of its own (files, ranks)


STAGES = (
    Stage("parse", "parse", bar=True),
    Stage("attribute", "attribute"),
    Stage("measure", "measure"),
    Stage("cross-rank", "cross_rank"),
    Stage("findings", "findings"),
)
STAGE_NAMES = tuple(s.name for s in STAGES)


class Execution(ABC):
    """How the stages run: each method is one stage, keeping its tables in the execution."""

    # stage -> the earlier stage that runs it
    inside: ClassVar[Mapping[str, str]] = {}

    @abstractmethod
    def parse(self) -> None:
        """Read every rank file."""

    def attribute(self) -> None:
        """Attribute every rank's communication (the rules)."""
        self._ran_inside("attribute")

    def measure(self) -> None:
        """The measures each rank can take alone."""
        self._ran_inside("measure")

    def cross_rank(self) -> None:
        """Match collective instances across ranks; size, bound and time them."""
        self._ran_inside("cross-rank")

    @abstractmethod
    def findings(self) -> None:
        """The run's FINDINGS, in one table."""

    @abstractmethod
    def result(self) -> Analysis:
        """The Analysis once every stage ran."""

    def close(self) -> None:
        """Release what the stages held for one another (an allocation policy); nothing by
        default. :func:`analyze` calls it, after the result or an error."""
        return None

    def _ran_inside(self, stage: str) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} runs {stage} inside {self.inside.get(stage, 'no stage')}")


def label(execution: Execution, stage: Stage) -> str:
    """The progress name of ``stage``: with the stages it also runs (``parse+attribute``)."""
    joined = [s.name for s in STAGES if execution.inside.get(s.name) == stage.name]
    return "+".join([stage.name, *joined])


def execute(execution: Execution, *, first: str = "parse", last: str = "findings") -> None:
    """Run the stages ``first`` to ``last`` of ``execution`` in order, each with its
    progress line (tracekit.progress; nothing shows unless the CLI enabled it)."""
    begin, end = STAGE_NAMES.index(first), STAGE_NAMES.index(last)
    for stage in STAGES[begin:end + 1]:
        if stage.name in execution.inside:
            continue
        with progress.stage(label(execution, stage), bar=stage.bar):
            getattr(execution, stage.method)()


def analyze(execution: Execution, *, first: str = "parse") -> Analysis:
    """Every stage from ``first`` on, then the execution's Analysis."""
    try:
        execute(execution, first=first)
        return execution.result()
    finally:
        execution.close()


def concat_findings(*tables: pa.Table | None) -> pa.Table:
    """Rules' lints first, then the measures' (stragglers, evidence): one FINDINGS table."""
    parts = [S.conform(t, S.FINDINGS) for t in tables if t is not None]
    if not parts:
        return S.empty(S.FINDINGS)
    return pa.concat_tables(parts).combine_chunks()
