"""What the tabular reports show: the summary lines and the sections, in order.

Text, Markdown and HTML all render ``summary(analysis)`` and ``sections(analysis)``, so the
three agree on every figure. Values stay raw here; each reporter formats (``fmt``) and
escapes for its own medium.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tracekit import schema as s
from tracekit.api import Analysis
from tracekit.reports import fmt, frames

EXTRA_ROWS = 20  # rows of an extra table shown by the text and Markdown reports

# short column headings for people (the JSON report keeps the column names)
HEADERS = {
    s.MSG_BYTES: "bytes", s.IN_BYTES: "bytes", s.COMM_NS: "comm", s.FUSED_NS: "fused",
    s.COMPUTE_NS: "compute", s.EXPOSED_NS: "exposed", s.WAIT_NS: "wait", s.BOUND_NS: "bound",
    s.EFFICIENCY: "eff", s.DUR_NS: "time", s.TRANSFER_NS: "transfer", s.RULE_ID: "rule",
    s.COUNT: "n", frames.SPAN_NS: "span",
}
# sentences (the only columns a text table may wrap)
FREE_TEXT_COLUMNS = (s.MESSAGE, s.EVIDENCE, s.REASON)


@dataclass(frozen=True)
class Section:
    key: str  # stable identifier (HTML element id, JSON key)
    title: str
    frame: pd.DataFrame
    columns: tuple[str, ...]
    note: str = ""
    headers: dict[str, str] = field(default_factory=lambda: dict(HEADERS))

    def header(self, column: str) -> str:
        return self.headers.get(column, column)


PHASE_COLUMNS = (s.PHASE, s.COUNT, s.MSG_BYTES, s.COMM_NS, s.FUSED_NS, s.COMPUTE_NS,
                 s.EXPOSED_NS, s.WAIT_NS, s.BOUND_NS, s.EFFICIENCY)
PATH_COLUMNS = (s.PATH, s.GROUP, s.OP, s.COUNT, s.MSG_BYTES, s.DUR_NS, s.TRANSFER_NS,
                s.WAIT_NS, s.BOUND_NS, s.EFFICIENCY)
FINDING_COLUMNS = (s.SEVERITY, s.RULE_ID, s.LAYER, s.GROUP, s.PATH, s.RANKS, s.MESSAGE)


def summary(analysis: Analysis) -> list[tuple[str, str]]:
    """(label, value) lines: the run, its time split, exposure, efficiency, attribution."""
    phases = frames.phase_totals(analysis)
    totals = frames.run_totals(phases)
    ranks = frames.ranks(analysis)
    n_events = analysis.run.events.num_rows if analysis.run.events is not None else 0
    lines = [
        ("ranks", f"{len(ranks)}" + (f" ({ranks[0]}..{ranks[-1]})" if ranks else "")),
        ("events", fmt.count(n_events)),
    ]
    if len(phases):
        lines += [
            ("communication (sum over ranks)", fmt.ns(totals[s.COMM_NS])),
            ("fused compute+exchange", fmt.ns(totals[s.FUSED_NS])),
            ("compute", fmt.ns(totals[s.COMPUTE_NS])),
            ("exposed communication", f"{fmt.ns(totals[s.EXPOSED_NS])} "
             f"({fmt.pct(totals[frames.EXPOSED_COMM_PCT])} of busy time)"),
            ("wait for peers", fmt.ns(totals[s.WAIT_NS])),
            ("efficiency (bound / transfer)", fmt.ratio(totals[s.EFFICIENCY])),
        ]
    counts = frames.attribution_counts(analysis)
    if sum(counts.values()):
        lines.append(("collectives", ", ".join(f"{n} {k}" for k, n in counts.items())))
    found = frames.findings(analysis)
    if analysis.findings is not None:
        by_sev = found[s.SEVERITY].fillna("?").value_counts().sort_index()
        lines.append(("findings", ", ".join(f"{n} {k}" for k, n in by_sev.items()) or "none"))
    if analysis.run.skipped:
        lines.append(("skipped files", str(len(analysis.run.skipped))))
    return lines


def sections(analysis: Analysis, extra_rows: int | None = EXTRA_ROWS) -> list[Section]:
    """The tables of a report, those with rows only, in reading order."""
    out: list[Section] = []
    phases = frames.phase_totals(analysis)
    if len(phases):
        out.append(Section("phases", "Time per phase (sum over ranks)", phases, PHASE_COLUMNS))
    paths = frames.path_totals(analysis)
    if len(paths):
        out.append(Section("paths", "Collectives per path and group", paths, PATH_COLUMNS,
                           note="efficiency = alpha-beta bound / transfer time"))
    found = frames.findings(analysis)
    if len(found):
        out.append(Section("findings", "Findings", found, FINDING_COLUMNS))
    if not len(paths):
        comm = frames.comm_events(analysis)
        if len(comm):
            out.append(Section("comm_events", "Communication kernels in the trace", comm,
                               tuple(comm.columns)))
        per_rank = frames.events_overview(analysis)
        if len(per_rank):
            out.append(Section("per_rank", "Events per rank", per_rank, tuple(per_rank.columns)))
    for name in sorted(analysis.tables):
        table = analysis.tables[name]
        if not frames.has_rows(table):
            continue
        shown = table if extra_rows is None else table.slice(0, extra_rows)
        note = "" if shown.num_rows == table.num_rows else (
            f"first {shown.num_rows} of {table.num_rows} rows (all rows in the JSON report)")
        df = frames.to_frame(shown)
        out.append(Section(f"table-{name}", f"Table {name}", df, tuple(df.columns), note=note,
                           headers={}))
    return out
