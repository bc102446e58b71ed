"""The partitioned run's run-wide stages, reading only the small parts of every rank.

``cross-rank``: the cross-rank half of the measure stage (tracekit.measure.run.cross_rank,
the one the whole-run execution runs) over the ``comm`` parts; ``findings``: the lints,
once over all ranks, from ``units`` with the topology of every rank's process groups (on a
large run in a process of its own, :func:`lints_task`, while this one runs the cross-rank
half). The main process holds these subsets, never a rank's events.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.measure.run import CROSS_RANK_COLUMNS, CrossRanked, cross_rank
from tracekit.model import AnalyzeOptions, Run
from tracekit.pipeline.parts import read_part
from tracekit.rules.lints import run_lints
from tracekit.rules.model import RuleSet


def run_info(out: Path, ranks: list[int]) -> Run:
    """The run without its events: every rank's PROCESS_GROUPS and RANK_INFO."""
    return Run(events=S.empty(S.EVENTS),
               process_groups=S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               rank_info=S.conform(read_part(out, "info", ranks), S.RANK_INFO))


def match_and_bound(out: Path, ranks: list[int], info: Run, topo: Any,
                    options: AnalyzeOptions) -> CrossRanked:
    """The cross-rank half of the measure (tracekit.measure.run.cross_rank) over the ``comm``
    parts: only the columns it reads come off disk, and not PG_RANKS: the member lists are
    most of the parts' bytes and a third of their read time, and MEMBERS holds the same
    lists as text (tracekit.measure.run.comm_frame splits each distinct one back). MEASURED
    in (rank, start) order."""
    columns = [c for c in (*CROSS_RANK_COLUMNS, S.CALL_SITE) if c != S.PG_RANKS]
    # passed on, not kept: cross_rank frees the table once it has its frame
    return cross_rank(read_part(out, "comm", ranks, columns, text_dictionaries=True),
                      info, dataclasses.replace(options, topology=topo), rank_order=True)


def lints(out: Path, ranks: list[int], rules: RuleSet, topo: Any, info: Run) -> pa.Table:
    """The lints over every rank's COLLECTIVE_UNITS."""
    units = S.conform(read_part(out, "units", ranks), S.COLLECTIVE_UNITS)
    return run_lints(units, rules, topo, info)


@dataclass(frozen=True)
class LintTask:
    """What :func:`lints_task` needs (picklable: it runs in a process of its own)."""

    out: str
    ranks: tuple[int, ...]
    rules: RuleSet
    topology: Any
    info: Run


def lints_task(task: LintTask) -> pa.Table:
    """:func:`lints` as a task (top-level: tracekit.engine.beside runs it in a worker)."""
    return lints(Path(task.out), list(task.ranks), task.rules, task.topology, task.info)
