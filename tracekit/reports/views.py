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
    s.COUNT: "n", frames.SPAN_NS: "span", frames.N_EFF: "n eff",
    s.RANKS_PRESENT: "present", s.RANKS_ABSENT: "absent", s.MISSING_RANKS: "missing",
    s.GROUP_SIZE: "size", s.SIZE_SOURCE: "size from", s.WITH_BYTES: "w/ bytes",
    s.WITH_COMM_META: "w/ pg", s.WITH_CALL_SITE: "w/ site", s.MATCHED: "matched",
    s.WITH_BOUND: "w/ bound", s.WITH_EFFICIENCY: "w/ eff", s.IN_GRAPH: "in graph",
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
                s.WAIT_NS, s.BOUND_NS, frames.N_EFF, s.EFFICIENCY)
COVERAGE_COLUMNS = (s.GROUP, s.PG_NAME, s.GROUP_SIZE, s.SIZE_SOURCE, s.RANKS_PRESENT,
                    s.RANKS_ABSENT, s.MISSING_RANKS, s.COUNT, s.WITH_BYTES, s.WITH_COMM_META,
                    s.WITH_CALL_SITE, s.MATCHED, s.WITH_EFFICIENCY)
UNKNOWN = "unknown"
FINDING_COLUMNS = (s.SEVERITY, s.RULE_ID, s.LAYER, s.GROUP, s.PATH, s.RANKS, s.MESSAGE)


def summary(analysis: Analysis) -> list[tuple[str, str]]:
    """(label, value) lines: the run, its time split, exposure, efficiency, attribution."""
    phases = frames.phase_totals(analysis)
    totals = frames.run_totals(phases)
    ranks = frames.ranks(analysis)
    n_events = frames.n_events(analysis)
    lines = [
        ("ranks", f"{len(ranks)}" + (f" ({ranks[0]}..{ranks[-1]})" if ranks else "")),
        ("events", fmt.count(n_events)),
    ]
    cov = frames.coverage_run(analysis)
    lines += coverage_lines(analysis, cov)
    if len(phases):
        lines += [
            ("communication (sum over ranks)", fmt.ns(totals[s.COMM_NS])),
            ("fused compute+exchange", fmt.ns(totals[s.FUSED_NS])),
            ("compute", fmt.ns(totals[s.COMPUTE_NS])),
            ("exposed communication", f"{fmt.ns(totals[s.EXPOSED_NS])} "
             f"({fmt.pct(totals[frames.EXPOSED_COMM_PCT])} of busy time)"),
            ("wait for peers", _wait_line(totals[s.WAIT_NS], cov)),
            ("efficiency (bound / transfer)", _efficiency_line(analysis, totals, cov)),
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


def _n(value: object) -> int:
    return 0 if fmt._missing(value) else int(float(str(value)))


def coverage_lines(analysis: Analysis, cov: dict[str, object] | None) -> list[tuple[str, str]]:
    """The coverage block: ranks present vs the world, evidence per collective, clocks."""
    if cov is None:
        return []
    present, world = _n(cov[s.RANKS_PRESENT]), cov[s.GROUP_SIZE]
    ranks = f"{present} of {UNKNOWN if fmt._missing(world) else _n(world)} (world size"
    ranks += ", not in the traces)" if fmt._missing(world) else " from the traces)"
    missing = cov[s.MISSING_RANKS]
    if isinstance(missing, list) and missing:
        shown = ",".join(str(r) for r in missing[:8]) + (",..." if len(missing) > 8 else "")
        ranks += f"; missing {shown}"
    lines = [("ranks present", ranks)]
    comms = frames.communicators(analysis)
    if len(comms):
        incomplete = comms[comms[s.RANKS_ABSENT].fillna(0) > 0]
        known = comms[comms[s.GROUP_SIZE].notna()]
        lines.append(("communicators", f"{len(comms)} ({len(known)} of known size, "
                      f"{len(incomplete)} with members' traces absent)"))
    n = _n(cov[s.COUNT])
    replays = cov[s.GRAPH_REPLAYS]
    graph = (f", {_n(cov[s.IN_GRAPH])} in CUDA-graph replays ({_n(replays)} graph launches)"
             if not fmt._missing(replays) else "")
    lines.append(("evidence", f"of {n} collectives: {_n(cov[s.WITH_BYTES])} with bytes, "
                  f"{_n(cov[s.WITH_COMM_META])} with communicator metadata, "
                  f"{_n(cov[s.WITH_CALL_SITE])} with a call site, {_n(cov[s.MATCHED])} "
                  f"matched across ranks{graph}"))
    clock = str(cov[s.CLOCKS] or UNKNOWN)
    spread = cov[s.CLOCK_SPREAD_NS]
    if not fmt._missing(spread) and clock != s.Clocks.SINGLE_RANK:
        clock += f" (collective ends spread {fmt.ns(spread)}, median)"
    lines.append(("clocks", clock))
    return lines


def _wait_line(wait: object, cov: dict[str, object] | None) -> str:
    if cov is None:
        return fmt.ns(wait)
    n, known = _n(cov[s.COUNT]), _n(cov[s.WITH_TRANSFER])
    if not known or fmt._missing(wait):
        return (f"{UNKNOWN}: none of {n} collectives was seen on enough members of its "
                "communicator to separate wait from transfer")
    return f"{fmt.ns(wait)} over {known} of {n} collectives with transfer and wait separated"


def _efficiency_line(analysis: Analysis, totals: dict[str, float | None],
                     cov: dict[str, object] | None) -> str:
    if cov is None:
        return fmt.ratio(totals[s.EFFICIENCY])
    n, known = _n(cov[s.COUNT]), _n(cov[s.WITH_EFFICIENCY])
    why = frames.why_no_efficiency(analysis)
    if not known:
        return f"{UNKNOWN}: no collective has both a bound and a transfer" + (
            f" ({why})" if why else "")
    return (f"{fmt.ratio(cov[s.EFFICIENCY])} over {known} of {n} collectives with a bound and "
            "a transfer" + (f"; without: {why}" if why else ""))


def sections(analysis: Analysis, extra_rows: int | None = EXTRA_ROWS) -> list[Section]:
    """The tables of a report, those with rows only, in reading order."""
    out: list[Section] = []
    comms = frames.communicators(analysis)
    if len(comms):
        out.append(Section("coverage", "Coverage per communicator (collectives on ranks)",
                           comms, COVERAGE_COLUMNS,
                           note="'-' = unknown; docs/coverage.md says what each count means"))
    phases = frames.phase_totals(analysis)
    if len(phases):
        out.append(Section("phases", "Time per phase (sum over ranks)", phases, PHASE_COLUMNS))
    paths = frames.path_totals(analysis)
    if len(paths):
        out.append(Section("paths", "Collectives per path and group", paths, PATH_COLUMNS,
                           note="eff = alpha-beta bound / transfer time, over the 'n eff' "
                           "collectives with both; '-' = unknown"))
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
        if name == frames.COVERAGE_TABLE or not frames.has_rows(table):
            continue
        shown = table if extra_rows is None else table.slice(0, extra_rows)
        note = "" if shown.num_rows == table.num_rows else (
            f"first {shown.num_rows} of {table.num_rows} rows (all rows in the JSON report)")
        df = frames.to_frame(shown)
        out.append(Section(f"table-{name}", f"Table {name}", df, tuple(df.columns), note=note,
                           headers={}))
    return out
