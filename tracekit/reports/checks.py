"""CI checks over a JSON report: pass / fail per check, for the whole run and for each phase.

Checks read the report built by ``tracekit.reports.json.build`` (and a baseline report of the
same format), never the traces. Every enabled check yields one result for ``total`` and one per
phase, so JUnit shows one testcase per check and phase.

* ``error-findings`` (always on): no finding of severity ``error``.
* ``findings`` (``--no-findings``): no finding of severity ``error`` or ``warning``.
* ``exposed-comm`` (``--max-exposed-comm PCT``): exposed communication as a percentage of the
  busy time (compute + fused + memcpy + exposed communication); a phase's share is over that
  phase's own busy time. A phase without busy time is skipped.
* ``efficiency`` (``--min-efficiency X``): bound / transfer time, over the run and per phase;
  a phase with no bound (a barrier) is skipped and listed, not failed.
* ``wait`` (``--max-wait PCT``): wait for peers as a percentage of the communication time
  (communication + fused) of the run and of each phase: what a straggler arriving late at a
  phase's collectives costs its peers. A phase whose wait is unknown (a barrier; collectives
  seen on too few members to separate wait from transfer) is skipped and listed.
* ``regression`` (``--baseline OLD.json --max-regression PCT``): communication plus fused time
  per rank, against the baseline, may grow by at most PCT percent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit import schema as s
from tracekit.reports import frames

TOTAL = "total"
FAILING_SEVERITIES = {"error-findings": ("error",), "findings": ("error", "warning")}


@dataclass(frozen=True)
class Thresholds:
    max_exposed_comm_pct: float | None = None
    min_efficiency: float | None = None
    no_findings: bool = False
    max_regression_pct: float | None = None
    max_wait_pct: float | None = None
    baseline: dict[str, Any] | None = None  # a JSON report (tracekit.reports.json.read)


@dataclass(frozen=True)
class CheckResult:
    check: str
    scope: str  # TOTAL or a phase
    passed: bool
    value: float | None
    limit: float | None
    message: str
    skipped: bool = False  # no figure to gate (listed, never failed)


def _phase_rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row[s.PHASE]: row for row in report.get("phases", [])}


def _findings(report: dict[str, Any], check: str) -> list[CheckResult]:
    severities = FAILING_SEVERITIES[check]
    bad = [f for f in report.get("findings", []) if f.get(s.SEVERITY) in severities]
    scopes = [TOTAL, *_phase_rows(report)]
    out = []
    for scope in scopes:
        hits = bad if scope == TOTAL else [f for f in bad if f.get(s.PHASE) == scope]
        rules = sorted({str(f.get(s.RULE_ID)) for f in hits})
        msg = (f"{len(hits)} finding(s) of severity {'/'.join(severities)}: {', '.join(rules)}"
               if hits else f"no finding of severity {'/'.join(severities)}")
        out.append(CheckResult(check, scope, not hits, float(len(hits)), 0.0, msg))
    return out


def _busy(row: dict[str, Any]) -> float:
    """compute + fused + memcpy + exposed communication of one phase row (frames.BUSY_NS)."""
    return float(sum(row.get(c) or 0 for c in (s.COMPUTE_NS, s.FUSED_NS, s.MEMCPY_NS,
                                               s.EXPOSED_NS)))


def _exposed(report: dict[str, Any], limit: float) -> list[CheckResult]:
    totals = report.get("totals", {})
    out = []
    # a phase's share is over that phase's own busy time, not the whole run's
    for scope, exposed, busy in [(TOTAL, totals.get(s.EXPOSED_NS), totals.get(frames.BUSY_NS))] + [
        (p, row.get(s.EXPOSED_NS), _busy(row)) for p, row in _phase_rows(report).items()
    ]:
        share = frames.ratio(exposed or 0.0, busy or 0.0)
        if share is None:
            skip = scope != TOTAL  # a phase without busy time has nothing to gate
            out.append(CheckResult("exposed-comm", scope, skip, None, limit,
                                   "skipped: no busy time in this phase" if skip
                                   else "no busy time measured: cannot check exposure",
                                   skipped=skip))
            continue
        pct = 100.0 * share
        ok = pct <= limit
        out.append(CheckResult("exposed-comm", scope, ok, pct, limit,
                               f"exposed communication {pct:.1f}% of busy time "
                               f"({'<=' if ok else '>'} {limit:g}%)"))
    return out


def _efficiency(report: dict[str, Any], limit: float) -> list[CheckResult]:
    out = []
    total = report.get("totals", {}).get(s.EFFICIENCY)
    scopes = [(TOTAL, total)] + [(p, r.get(s.EFFICIENCY)) for p, r in _phase_rows(report).items()]
    rows = _phase_rows(report)
    for scope, eff in scopes:
        bound = rows[scope].get(s.BOUND_NS) if scope != TOTAL else 1
        if eff is None or not bound:
            # no bound (a barrier, a phase without collectives): no figure to gate
            ok = scope != TOTAL
            out.append(CheckResult("efficiency", scope, ok, None, limit,
                                   "skipped: no collective with a bound" if ok
                                   else "no efficiency measured", skipped=ok))
            continue
        ok = eff >= limit
        out.append(CheckResult("efficiency", scope, ok, eff, limit,
                               f"efficiency {eff:.2f} ({'>=' if ok else '<'} {limit:g})"))
    return out


def _wait(report: dict[str, Any], limit: float) -> list[CheckResult]:
    totals = report.get("totals", {})
    rows = [(TOTAL, totals), *_phase_rows(report).items()]
    out = []
    for scope, row in rows:
        wait = row.get(s.WAIT_NS)
        comm = float((row.get(s.COMM_NS) or 0) + (row.get(s.FUSED_NS) or 0))
        share = None if wait is None else frames.ratio(float(wait), comm)
        if share is None:
            # a phase without a wait figure (a barrier) is skipped; the run without one fails,
            # as efficiency and exposure do: a gate asked for must not pass on no evidence
            skip = scope != TOTAL
            out.append(CheckResult("wait", scope, skip, None, limit,
                                   "skipped: wait for peers unknown (no collective with "
                                   "transfer and wait separated)" if skip else
                                   "wait for peers unknown: no collective was seen on enough "
                                   "members to separate it from transfer", skipped=skip))
            continue
        pct = 100.0 * share
        ok = pct <= limit
        out.append(CheckResult("wait", scope, ok, pct, limit,
                               f"wait for peers {pct:.1f}% of communication time "
                               f"({'<=' if ok else '>'} {limit:g}%)"))
    return out


def _comm_per_rank(report: dict[str, Any]) -> dict[str, float]:
    n = report.get("totals", {}).get(s.N_RANKS) or 1
    out = {p: ((r.get(s.COMM_NS) or 0) + (r.get(s.FUSED_NS) or 0)) / n
           for p, r in _phase_rows(report).items()}
    out[TOTAL] = sum(out.values())
    return out


def _regression(
    report: dict[str, Any], baseline: dict[str, Any], limit: float
) -> list[CheckResult]:
    new, old = _comm_per_rank(report), _comm_per_rank(baseline)
    out = []
    for scope in [TOTAL, *(p for p in new if p != TOTAL)]:
        before, after = old.get(scope), new[scope]
        if not before:
            out.append(CheckResult("regression", scope, True, None, limit,
                                   "skipped: no communication in the baseline for this phase",
                                   skipped=True))
            continue
        change = 100.0 * (after - before) / before
        ok = change <= limit
        out.append(CheckResult(
            "regression", scope, ok, change, limit,
            f"communication per rank {before / 1e3:.1f} -> {after / 1e3:.1f} µs "
            f"({change:+.1f}%, {'<=' if ok else '>'} +{limit:g}%)"))
    return out


def evaluate(report: dict[str, Any], thresholds: Thresholds | None = None) -> list[CheckResult]:
    """All enabled checks over ``report`` (a JSON report as data)."""
    t = thresholds or Thresholds()
    results = _findings(report, "findings" if t.no_findings else "error-findings")
    if t.max_exposed_comm_pct is not None:
        results += _exposed(report, t.max_exposed_comm_pct)
    if t.min_efficiency is not None:
        results += _efficiency(report, t.min_efficiency)
    if t.max_wait_pct is not None:
        results += _wait(report, t.max_wait_pct)
    if t.baseline is not None and t.max_regression_pct is not None:
        results += _regression(report, t.baseline, t.max_regression_pct)
    return results


def failed(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if not r.passed]


def summary_line(results: list[CheckResult]) -> str:
    bad = failed(results)
    skipped = [r for r in results if r.skipped]
    tail = f", {len(skipped)} skipped (no figure)" if skipped else ""
    if not bad:
        return f"all {len(results)} checks passed{tail}"
    return f"{len(bad)} of {len(results)} checks failed{tail}"
