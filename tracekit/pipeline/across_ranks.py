"""The partitioned run's run-wide stages, reading only the small parts of every rank.

``cross-rank``: instance matching, transfer / wait / skew and stragglers from the ``comm``
subset, sized and bounded exactly as the whole-run measure stage does; ``findings``: the lints,
once over all ranks, from ``units`` with the topology of every rank's process groups. The
main process holds these subsets, never a rank's events.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.measure import coverage, crossrank
from tracekit.measure.hardware import load_profile
from tracekit.measure.run import bound_findings, measured_frame, size_and_bound
from tracekit.model import AnalyzeOptions, Run
from tracekit.pipeline.parts import read_part
from tracekit.rules.lints import run_lints
from tracekit.rules.model import RuleSet


def run_info(out: Path, ranks: list[int]) -> Run:
    """The run without its events: every rank's PROCESS_GROUPS and RANK_INFO."""
    return Run(events=S.empty(S.EVENTS),
               process_groups=S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               rank_info=S.conform(read_part(out, "info", ranks), S.RANK_INFO))


@dataclass
class CrossRank:
    """What the cross-rank stage found."""

    measured: pa.Table  # MEASURED (transfer / wait / skew / exposed; bounds need a profile)
    stragglers: pa.Table  # STRAGGLERS
    findings: list[pa.Table]  # FINDINGS: stragglers, then the evidence (bounds, coverage)


def match_and_bound(out: Path, ranks: list[int], info: Run, topo: Any,
                    options: AnalyzeOptions) -> CrossRank:
    """Match collective instances across ranks from the ``comm`` subset only, then size and
    bound them (``options.hardware``)."""
    df = read_part(out, "comm", ranks).to_pandas()
    if not len(df):
        df = crossrank.instance_rows(S.empty(S.ATTRIBUTED))
        df[S.EXPOSED_NS] = pd.Series(dtype="int64")
    df = crossrank.fill_members(df, topo)
    matched = crossrank.match(df)
    del df
    profile = load_profile(options.hardware) if options.hardware is not None else None
    sized = size_and_bound(matched, info, profile)
    exposed = matched[S.EXPOSED_NS].to_numpy(dtype=np.float64)
    frame = measured_frame(matched, sized, exposed)
    # the evidence findings: impossible efficiencies, communicators with members absent
    evidence_findings = [bound_findings(frame, sized),
                         coverage.findings(coverage.coverage_table(info, matched, frame))]
    measured = crossrank.table_of(
        frame.sort_values([S.RANK, S.TS_NS, S.EVENT_ID], kind="stable"), S.MEASURED)
    del sized, exposed, frame
    strag = crossrank.stragglers(matched)
    strag_findings = crossrank.straggler_findings(strag, matched)
    return CrossRank(measured, strag, [strag_findings, *evidence_findings])


def lints(out: Path, ranks: list[int], rules: RuleSet, topo: Any, info: Run) -> pa.Table:
    """The lints over every rank's COLLECTIVE_UNITS: run after the cross-rank frames are
    freed, so that the peak is one of the two, not both."""
    units = S.conform(read_part(out, "units", ranks), S.COLLECTIVE_UNITS)
    return run_lints(units, rules, topo, info)
