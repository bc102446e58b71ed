"""Two runs side by side: per phase and per path, what changed and by how much.

``compare(a, b)`` takes two JSON reports (``tracekit.reports.json.build`` or ``read``) and
returns frames; ``render_text`` / ``render_markdown`` / ``to_data`` present them. Times are per
rank (sums divided by the run's rank count) so runs of different sizes compare fairly. A path
present in one run only (baseline AllReduce combine against ReduceScatterV, say) shows as
added or removed; findings are matched by (rule, severity, group, path, layer).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tracekit import schema as s
from tracekit.reports import fmt
from tracekit.reports import json as json_report
from tracekit.reports import markdown as md

A, B = "a", "b"
DELTA_NS = "delta_ns"
DELTA_PCT = "delta_pct"
CHANGE = "change"  # added / removed / changed / same
TIME_NS = "time_ns"  # communication + fused per rank (phases), duration per rank (paths)
EFF_A, EFF_B = "efficiency_a", "efficiency_b"
COUNT_A, COUNT_B = "count_a", "count_b"
TIME_A, TIME_B = "time_ns_a", "time_ns_b"
EXPOSED_A, EXPOSED_B = "exposed_ns_a", "exposed_ns_b"
PATH_KEYS = [s.PATH, s.GROUP, s.OP]
FINDING_KEYS = [s.RULE_ID, s.SEVERITY, s.GROUP, s.PATH, s.LAYER]
SIDE = "side"  # merge indicator: left_only, right_only, both
SAME_PCT = 1.0  # |change| under this percentage counts as "same"


@dataclass(frozen=True)
class Diff:
    labels: tuple[str, str]
    phases: pd.DataFrame
    paths: pd.DataFrame
    appeared: pd.DataFrame  # findings only in b
    vanished: pd.DataFrame  # findings only in a
    totals: dict[str, Any]


def _n(report: dict[str, Any]) -> int:
    return int(report.get("totals", {}).get(s.N_RANKS) or 1)


def _phase_frame(report: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(report.get("phases", []),
                      columns=[s.PHASE, s.COMM_NS, s.FUSED_NS, s.EXPOSED_NS, s.EFFICIENCY])
    n = _n(report)
    return pd.DataFrame({
        s.PHASE: df[s.PHASE],
        TIME_NS: (df[s.COMM_NS].fillna(0) + df[s.FUSED_NS].fillna(0)) / n,
        s.EXPOSED_NS: df[s.EXPOSED_NS].astype(float) / n,
        s.EFFICIENCY: df[s.EFFICIENCY].astype(float),
    })


def _path_frame(report: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(report.get("paths", []),
                      columns=[*PATH_KEYS, s.PHASE, s.COUNT, s.DUR_NS, s.EFFICIENCY])
    df[TIME_NS] = df[s.DUR_NS].astype(float) / _n(report)
    df[s.COUNT] = df[s.COUNT].astype(float) / _n(report)
    return df.drop(columns=[s.DUR_NS])


def _change(before: pd.Series, after: pd.Series) -> tuple[pd.Series, pd.Series, pd.Series]:
    delta = after.fillna(0) - before.fillna(0)
    pct = 100.0 * delta / before.where(before > 0)
    label = np.select(
        [before.isna(), after.isna(), pct.abs().fillna(0) < SAME_PCT],
        ["added", "removed", "same"], default="changed")
    return delta, pct, pd.Series(label, index=before.index)


def _side_by_side(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    both = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"), sort=True)
    delta, pct, label = _change(both[TIME_A], both[TIME_B])
    return both.assign(**{DELTA_NS: delta, DELTA_PCT: pct, CHANGE: label})


def _findings(report: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(report.get("findings", []), columns=[*FINDING_KEYS, s.MESSAGE])
    df[s.LAYER] = df[s.LAYER].astype("Int64")
    return df.astype(object).where(df.notna(), None)


def compare(a: dict[str, Any], b: dict[str, Any], labels: tuple[str, str] = (A, B)) -> Diff:
    """Differences from run ``a`` (before) to run ``b`` (after)."""
    phases = _side_by_side(_phase_frame(a), _phase_frame(b), [s.PHASE])
    order = {p: i for i, p in enumerate(s.Phase.ALL)}
    phases = phases.iloc[np.argsort(phases[s.PHASE].map(lambda p: order.get(p, 99)).to_numpy(),
                                    kind="stable")].reset_index(drop=True)
    pa_, pb = _path_frame(a), _path_frame(b)
    paths = _side_by_side(pa_.drop(columns=[s.PHASE]), pb.drop(columns=[s.PHASE]), PATH_KEYS)
    fa, fb = _findings(a), _findings(b)
    key = [*FINDING_KEYS]
    merged = fa.merge(fb, on=key, how="outer", indicator=SIDE, suffixes=("", "_b"))
    vanished = merged[merged[SIDE] == "left_only"][[*key, s.MESSAGE]]
    appeared = merged[merged[SIDE] == "right_only"][[*key, f"{s.MESSAGE}_b"]]
    appeared = appeared.rename(columns={f"{s.MESSAGE}_b": s.MESSAGE})
    ta, tb = a.get("totals", {}), b.get("totals", {})
    time_a = phases[TIME_A].sum()
    time_b = phases[TIME_B].sum()
    totals = {
        TIME_A: time_a, TIME_B: time_b, DELTA_NS: time_b - time_a,
        DELTA_PCT: 100.0 * (time_b - time_a) / time_a if time_a else None,
        EFF_A: ta.get(s.EFFICIENCY), EFF_B: tb.get(s.EFFICIENCY),
    }
    return Diff(labels, phases, paths, appeared.reset_index(drop=True),
                vanished.reset_index(drop=True), totals)


def _rows(d: Diff, which: str) -> tuple[list[str], list[list[str]]]:
    la, lb = d.labels
    if which == "phases":
        df, keys = d.phases, [s.PHASE]
    else:
        df, keys = d.paths, PATH_KEYS
    head = [*keys, f"time/rank {la}", f"time/rank {lb}", "delta", "%", f"eff {la}", f"eff {lb}",
            "change"]
    rows = [[*(fmt.text(r[k]) for k in keys), fmt.ns(r[TIME_A]), fmt.ns(r[TIME_B]),
             ("+" if (r[DELTA_NS] or 0) > 0 else "") + fmt.ns(r[DELTA_NS]),
             fmt.pct(r[DELTA_PCT]), fmt.ratio(r[EFF_A]), fmt.ratio(r[EFF_B]), r[CHANGE]]
            for r in df.to_dict("records")]
    return head, rows


def _finding_rows(df: pd.DataFrame) -> list[list[str]]:
    return [[fmt.text(r[k]) for k in (s.SEVERITY, s.RULE_ID, s.GROUP, s.PATH, s.LAYER,
                                      s.MESSAGE)] for r in df.to_dict("records")]


FINDING_HEAD = ["severity", "rule", "group", "path", "layer", "message"]


def _headline(d: Diff) -> str:
    t = d.totals
    return (f"communication per rank: {fmt.ns(t[TIME_A])} -> {fmt.ns(t[TIME_B])} "
            f"({fmt.pct(t[DELTA_PCT])}); efficiency {fmt.ratio(t[EFF_A])} -> "
            f"{fmt.ratio(t[EFF_B])}; findings +{len(d.appeared)} / -{len(d.vanished)}")


def render_text(d: Diff, *, color: bool = False, width: int | None = None) -> str:
    """The diff as text at ``width`` columns (None: the terminal's, 80 when not a TTY): cells
    wrap, none is cut short."""
    from tracekit.reports.text import terminal_width

    width = width or terminal_width()
    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=color, no_color=not color,
                  color_system="standard" if color else None, highlight=False, emoji=False)
    la, lb = d.labels
    con.print(Text(f"tracekit diff: a = {la}, b = {lb}"))
    con.print(Text(_headline(d)))
    tables = [("Per phase", *_rows(d, "phases")), ("Per path", *_rows(d, "paths")),
              ("Findings that appeared in b", FINDING_HEAD, _finding_rows(d.appeared)),
              ("Findings that vanished from a", FINDING_HEAD, _finding_rows(d.vanished))]
    for title, head, rows in tables:
        if not rows:
            continue
        table = Table(title=escape(title), title_justify="left", box=box.ASCII2)
        for h in head:
            table.add_column(Text(h), overflow="fold")
        for row in rows:
            table.add_row(*(Text(c) for c in row))
        con.print()
        con.print(table)
    return buf.getvalue()


def render_markdown(d: Diff) -> str:
    la, lb = d.labels
    lines = [f"## tracekit diff: {md.escape(la)} -> {md.escape(lb)}", "", md.escape(_headline(d))]
    for title, (head, rows) in (("Per phase", _rows(d, "phases")),
                                ("Per path", _rows(d, "paths"))):
        lines += ["", f"### {title}", "",
                  *md.table([md.escape(h) for h in head], [[md.escape(c) for c in r]
                                                           for r in rows])]
    for title, df in (("Findings that appeared", d.appeared), ("Findings that vanished",
                                                               d.vanished)):
        if len(df):
            lines += ["", f"### {title}", "", *md.table(
                FINDING_HEAD, [[md.escape(c) for c in r] for r in _finding_rows(df)])]
    return "\n".join(lines) + "\n"


def to_data(d: Diff) -> dict[str, Any]:
    """The diff as JSON data (keys sorted on output)."""
    return {
        "format": "tracekit-diff", "diff_version": 1, "labels": list(d.labels),
        "totals": json_report.jsonable(d.totals),
        "phases": json_report.records(d.phases),
        "paths": json_report.records(d.paths),
        "findings_appeared": json_report.records(d.appeared),
        "findings_vanished": json_report.records(d.vanished),
    }
