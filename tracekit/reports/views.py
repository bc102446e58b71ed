"""What the tabular reports show: the summary lines and the sections, in order.

Text, Markdown and HTML all render ``summary(analysis)`` and ``sections(analysis)``, so the
three agree on every figure. Values stay raw here; each reporter formats (``fmt``) and
escapes for its own medium.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import fmt, frames

EXTRA_ROWS = 20  # rows of an extra table shown by the text and Markdown reports
NOTIFY_HEADER = "notify (sync)"
# what a table with notify time says under it (docs/coverage.md "DeepEP notify kernels")
NOTIFY_NOTE = ("wait includes DeepEP notify (sync) time: notify_dispatch / cached_notify / "
               "notify_combine exchange counts and wait at a barrier before the dispatch or "
               "combine they prepare, so their time is reported as wait, not transfer")

# short column headings for people (the JSON report keeps the column names)
HEADERS = {
    s.MSG_BYTES: "bytes", s.IN_BYTES: "bytes", s.COMM_NS: "comm", s.FUSED_NS: "fused",
    s.COMPUTE_NS: "compute", s.EXPOSED_NS: "exposed", s.WAIT_NS: "wait", s.BOUND_NS: "bound",
    s.EFFICIENCY: "eff", s.DUR_NS: "time", s.TRANSFER_NS: "transfer", s.RULE_ID: "rule",
    s.NOTIFY_NS: NOTIFY_HEADER,
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
    optional: tuple[str, ...] = ()  # columns a narrow terminal drops first (never eff)

    def header(self, column: str) -> str:
        """The heading of ``column``: a time column (``*_ns``) drops the suffix, since its
        cells carry their unit."""
        if column in self.headers:
            return self.headers[column]
        return column[:-3] if column.endswith("_ns") else column


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
    totals = frames.phase_run_totals(analysis)
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
            ("wait for peers", _wait_line(totals[s.WAIT_NS], cov)
             + _notify_part(totals.get(s.NOTIFY_NS))),
            ("efficiency (bound / transfer)", _efficiency_line(analysis, totals, cov)),
        ]
    return lines + _counts_lines(analysis)


def _n(value: object) -> int:
    return 0 if fmt._missing(value) else int(float(str(value)))


def _c(value: object) -> str:
    """A count, or "unknown" when the figure is missing (never 0 for unknown)."""
    return UNKNOWN if fmt._missing(value) else fmt.count(value)


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
    n = _c(cov[s.COUNT])
    replays = cov[s.GRAPH_REPLAYS]
    # CUDA-graph replays are only worth a word when there were any
    graph = (f", {_c(cov[s.IN_GRAPH])} in CUDA-graph replays ({_c(replays)} graph launches)"
             if not fmt._missing(replays) and _n(replays) else "")
    lines.append(("evidence", f"of {n} collectives: {_c(cov[s.WITH_BYTES])} with bytes, "
                  f"{_c(cov[s.WITH_COMM_META])} with communicator metadata, "
                  f"{_c(cov[s.WITH_CALL_SITE])} with a call site, {_c(cov[s.MATCHED])} "
                  f"matched across ranks{graph}"))
    clock = str(cov[s.CLOCKS] or UNKNOWN)
    spread = cov[s.CLOCK_SPREAD_NS]
    if not fmt._missing(spread) and clock != s.Clocks.SINGLE_RANK:
        clock += f" (collective ends spread {fmt.ns(spread)}, median)"
    lines.append(("clocks", clock))
    return lines


def _notify_part(notify: object) -> str:
    if fmt._missing(notify) or not float(str(notify)):
        return ""
    return f"; includes {fmt.ns(notify)} of DeepEP notify (sync) kernels, wait not transfer"


def _wait_line(wait: object, cov: dict[str, object] | None) -> str:
    if cov is None:
        return fmt.ns(wait)
    n, known = _n(cov[s.COUNT]), _n(cov[s.WITH_TRANSFER])
    if not known or fmt._missing(wait):
        return (f"{UNKNOWN}: none of {n} collectives was seen on enough members of its "
                "communicator to separate wait from transfer")
    return f"{fmt.ns(wait)} over {known} of {n} collectives with transfer and wait separated"


def _with_notify(columns: tuple[str, ...], notify: bool) -> tuple[str, ...]:
    """``columns`` with the notify column after the wait where the run has notify time."""
    if not notify:
        return columns
    at = columns.index(s.WAIT_NS) + 1
    return (*columns[:at], s.NOTIFY_NS, *columns[at:])


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


# --- the terminal report's first screen (tracekit.reports.text) ---

HEADLINE_ROWS = 5  # rows of each first-screen table
SKIPPED_SHOWN = 5  # skipped rank files named in the headline
SMALL_RUN_RANKS = 8  # runs up to this many ranks show per-rank tables without --verbose
HEAD_PHASE_COLUMNS = (s.PHASE, s.COUNT, frames.N_EFF, s.EFFICIENCY, s.COMM_NS, s.EXPOSED_NS,
                      s.WAIT_NS, s.BOUND_NS)
HEAD_PATH_COLUMNS = (s.PATH, s.GROUP, s.OP, s.COUNT, frames.N_EFF, s.EFFICIENCY, s.DUR_NS,
                     s.WAIT_NS, s.BOUND_NS)
HEAD_FINDING_COLUMNS = (s.SEVERITY, s.RULE_ID, s.RANKS, s.MESSAGE)
EFF_NOTE = ("eff = alpha-beta bound / transfer, over the 'n eff' of the 'n' collectives "
            "that have a size, a bound and a transfer; '-' = unknown")


def headline(analysis: Analysis) -> list[tuple[str, str]]:
    """The first lines of the terminal report: coverage, exposure, wait, efficiency,
    attribution and findings, each in one sentence."""
    phases = frames.phase_totals(analysis)
    totals = frames.phase_run_totals(analysis)
    ranks = frames.ranks(analysis)
    count = frames.n_events(analysis)  # from the report digest on a cache hit
    n_events = f", {fmt.count(count)} events" if count else ""
    lines = [("ranks", f"{len(ranks)}" + (f" ({ranks[0]}..{ranks[-1]})" if ranks else "")
              + n_events)]
    cov = frames.coverage_run(analysis)
    lines += coverage_lines(analysis, cov)
    if len(phases):
        busy = totals[frames.BUSY_NS]
        lines += [
            ("exposed comm", f"{fmt.duration(totals[s.EXPOSED_NS])} of "
             f"{fmt.duration(busy)} busy time "
             f"({fmt.pct(totals[frames.EXPOSED_COMM_PCT])}), sum over ranks"),
            ("wait for peers", _wait_line(totals[s.WAIT_NS], cov)
             + _notify_part(totals.get(s.NOTIFY_NS))),
            ("efficiency", _efficiency_line(analysis, totals, cov)),
        ]
    return lines + _counts_lines(analysis)


def _counts_lines(analysis: Analysis) -> list[tuple[str, str]]:
    """Collectives by status, findings by severity, and the rank files skipped and why."""
    lines: list[tuple[str, str]] = []
    counts = frames.attribution_counts(analysis)
    if sum(counts.values()):
        lines.append(("collectives", ", ".join(f"{n} {k}" for k, n in counts.items())))
    found = frames.findings(analysis)
    if analysis.findings_table is not None:
        by_sev = found[s.SEVERITY].fillna("?").value_counts().sort_index()
        lines.append(("findings", ", ".join(f"{n} {k}" for k, n in by_sev.items()) or "none"))
    skipped = analysis.run.skipped
    for file, reason in skipped[:SKIPPED_SHOWN]:  # --on-error skip: which file, and why
        lines.append(("skipped", reason if reason.startswith(str(file)) else f"{file}: {reason}"))
    if len(skipped) > SKIPPED_SHOWN:
        lines.append(("skipped", f"... and {len(skipped) - SKIPPED_SHOWN} more files "
                      "(--json lists them all)"))
    return lines


def phase_table(analysis: Analysis) -> pd.DataFrame:
    """phase_totals with the 'n eff' of each phase (from path_totals: one source per count)."""
    phases = frames.phase_totals(analysis)
    paths = frames.path_totals(analysis)
    if len(paths):
        key = paths[s.PHASE].replace("", s.Phase.OTHER)
        n_eff = paths[frames.N_EFF].groupby(key).sum()
        phases[frames.N_EFF] = phases[s.PHASE].map(n_eff).fillna(0).astype("int64")
    else:
        phases[frames.N_EFF] = pd.Series([None] * len(phases), dtype=object)
    return phases


def _slowest(frame: pd.DataFrame, by: list[str], rows: int) -> pd.DataFrame:
    time = sum((frame[c].astype(float).fillna(0) for c in by), pd.Series(0.0, frame.index))
    order = np.argsort(-time.to_numpy(), kind="stable")
    return frame.iloc[order[:rows]].reset_index(drop=True)


def _of(shown: int, total: int) -> str:
    return f"all {total}" if shown == total else f"top {shown} of {total}"


def first_screen(analysis: Analysis, rows: int = HEADLINE_ROWS) -> list[Section]:
    """The slowest phases and paths against their bounds, and the first findings."""
    out: list[Section] = []
    phases = phase_table(analysis)
    if len(phases):
        top = _slowest(phases, [s.COMM_NS, s.FUSED_NS], rows)
        notify = frames.has_notify(phases)
        out.append(Section("head-phases", "Time per phase, slowest first "
                           f"({_of(len(top), len(phases))}, sum over ranks)", top,
                           _with_notify(HEAD_PHASE_COLUMNS, notify),
                           note=NOTIFY_NOTE if notify else ""))
    paths = frames.path_totals(analysis)
    if len(paths):
        top = _slowest(paths, [s.DUR_NS], rows)
        out.append(Section("head-paths", f"Collectives per path and group, slowest first "
                           f"({_of(len(top), len(paths))})", top, HEAD_PATH_COLUMNS,
                           note=EFF_NOTE, optional=(s.WAIT_NS,)))
    found = frames.findings(analysis)
    if len(found):
        top = found.iloc[:rows]
        out.append(Section("head-findings", f"Findings ({_of(len(top), len(found))}, most "
                           "severe first)", top, HEAD_FINDING_COLUMNS))
    return out


def detail(analysis: Analysis, *, verbose: bool = False, extra_rows: int | None = EXTRA_ROWS,
           rows: int = HEADLINE_ROWS) -> tuple[list[Section], list[str]]:
    """What follows the first screen: full tables the first screen cut short, coverage per
    communicator, and the extra tables; per-rank tables only when ``verbose`` or on a small
    run. Returns the sections and the names of the per-rank tables left out."""
    ranks = frames.ranks(analysis)
    per_rank = verbose or len(ranks) <= SMALL_RUN_RANKS
    out: list[Section] = []
    left_out: list[str] = []
    for section in sections(analysis, extra_rows=extra_rows):
        n = len(section.frame)
        if section.key in ("phases", "findings") and n <= rows and not verbose:
            continue  # the first screen showed every row
        if section.key == "phases":
            table = phase_table(analysis)
            notify = frames.has_notify(table)
            section = Section(section.key, section.title, table,
                              _with_notify((*HEAD_PHASE_COLUMNS[:4], *PHASE_COLUMNS[2:-1]),
                                           notify), note=NOTIFY_NOTE if notify else "")
        elif section.key == "paths":
            if n <= rows and not verbose:
                continue
            notify = frames.has_notify(section.frame)
            section = Section(section.key, section.title, section.frame,
                              _with_notify((*HEAD_PATH_COLUMNS[:6], s.DUR_NS, s.MSG_BYTES,
                                            s.TRANSFER_NS, s.WAIT_NS, s.BOUND_NS), notify),
                              note=EFF_NOTE + (f"; {NOTIFY_NOTE}" if notify else ""))
        by_rank = {s.RANK, s.SRC_RANK, s.DST_RANK} & set(section.frame.columns)
        if by_rank and section.key != "coverage" and not per_rank:
            left_out.append(section.title.removeprefix("Table "))
            continue
        out.append(section)
    return out, left_out


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
        notify = frames.has_notify(phases)
        out.append(Section("phases", "Time per phase (sum over ranks)", phases,
                           _with_notify(PHASE_COLUMNS, notify),
                           note=NOTIFY_NOTE if notify else ""))
    paths = frames.path_totals(analysis)
    if len(paths):
        notify = frames.has_notify(paths)
        out.append(Section("paths", "Collectives per path and group", paths,
                           _with_notify(PATH_COLUMNS, notify),
                           note="eff = alpha-beta bound / transfer time, over the 'n eff' "
                           "collectives with both; '-' = unknown"
                           + (f"; {NOTIFY_NOTE}" if notify else "")))
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
    for name in sorted(analysis.extra_tables):
        table = analysis.extra_tables[name]
        if name == frames.COVERAGE_TABLE or not frames.has_rows(table):
            continue
        shown = table if extra_rows is None else table.slice(0, extra_rows)
        note = "" if shown.num_rows == table.num_rows else (
            f"first {shown.num_rows} of {table.num_rows} rows (all rows in the JSON report)")
        df = frames.to_frame(shown)
        out.append(Section(f"table-{name}", f"Table {name}", df, tuple(df.columns), note=note,
                           headers={}))
    return out
