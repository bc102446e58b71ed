"""CI checks over the JSON report: one result per check and scope; thresholds both ways."""

from __future__ import annotations

import copy

from tracekit.reports import checks
from tracekit.reports import json as json_report


def _by(results, check, scope="total"):
    return next(r for r in results if r.check == check and r.scope == scope)


def test_default_checks_only_fail_on_error_findings(analysis):
    # GIVEN a run with one error finding WHEN checked without options
    results = checks.evaluate(json_report.build(analysis))
    # THEN only the error-findings check runs, failing for the run and the phase it is in
    assert {r.check for r in results} == {"error-findings"}
    failed = {r.scope for r in checks.failed(results)}
    assert failed == {"total", "attention_reduce"}


def test_one_result_per_check_and_phase(analysis):
    # GIVEN every check enabled WHEN evaluated THEN each check has total + one per phase
    report = json_report.build(analysis)
    t = checks.Thresholds(max_exposed_comm_pct=50, min_efficiency=0.1, no_findings=True,
                          max_regression_pct=5, baseline=report)
    results = checks.evaluate(report, t)
    scopes = ["total", *(p["phase"] for p in report["phases"])]
    for check in ("findings", "exposed-comm", "efficiency", "regression"):
        assert [r.scope for r in results if r.check == check] == scopes


def test_exposed_comm_threshold_passes_and_fails(analysis):
    # GIVEN exposure of about 28% of busy time
    report = json_report.build(analysis)
    pct = report["totals"]["exposed_comm_pct"]
    # WHEN the limit is above / below it THEN the total check passes / fails with the value
    assert _by(checks.evaluate(report, checks.Thresholds(max_exposed_comm_pct=pct + 1)),
               "exposed-comm").passed
    low = _by(checks.evaluate(report, checks.Thresholds(max_exposed_comm_pct=pct - 1)),
              "exposed-comm")
    assert not low.passed and abs(low.value - pct) < 1e-5


def test_min_efficiency_fails_on_the_slow_phase_only(analysis):
    # GIVEN phases with efficiencies around 0.58 and 0.67 and a limit between them
    report = json_report.build(analysis)
    results = checks.evaluate(report, checks.Thresholds(min_efficiency=0.6))
    # THEN the phases under it fail, the "other" phase (0.67) and the compute-only phase pass
    assert not _by(results, "efficiency", "dispatch").passed
    assert _by(results, "efficiency", "other").passed
    assert _by(results, "efficiency", "experts").passed  # no collective: nothing to bound


def test_regression_against_a_baseline(analysis):
    # GIVEN a baseline whose combine phase took half the time
    report = json_report.build(analysis)
    baseline = copy.deepcopy(report)
    for row in baseline["phases"]:
        if row["phase"] == "combine":
            row["comm_ns"] //= 2
    results = checks.evaluate(report, checks.Thresholds(max_regression_pct=10,
                                                        baseline=baseline))
    # WHEN compared THEN combine regressed by ~100% and fails, dispatch is unchanged
    combine = _by(results, "regression", "combine")
    assert not combine.passed and 99 < combine.value < 101
    assert _by(results, "regression", "dispatch").passed
    assert not _by(results, "regression").passed


def test_no_findings_includes_warnings_but_not_info(analysis):
    # GIVEN one error, one warning, one info WHEN --no-findings THEN 2 count, info does not
    results = checks.evaluate(json_report.build(analysis), checks.Thresholds(no_findings=True))
    assert _by(results, "findings").value == 2
    assert _by(results, "findings", "other").passed  # the info finding's phase


def test_events_only_efficiency_cannot_pass(events_only):
    # GIVEN no measurement WHEN a minimum efficiency is required THEN the total check fails
    results = checks.evaluate(json_report.build(events_only), checks.Thresholds(min_efficiency=0.5))
    assert not _by(results, "efficiency").passed
    assert "no efficiency" in _by(results, "efficiency").message


def _phase_report(**phase_rows):
    """A minimal report: totals plus phase rows given as name -> columns."""
    phases = [{"phase": name, **row} for name, row in phase_rows.items()]
    busy = sum(r.get("compute_ns", 0) + r.get("exposed_ns", 0) for r in phases)
    totals = {"exposed_ns": sum(r.get("exposed_ns", 0) for r in phases), "busy_ns": busy,
              "comm_ns": sum(r.get("comm_ns", 0) for r in phases),
              "wait_ns": sum(r.get("wait_ns") or 0 for r in phases)}
    return {"totals": totals, "phases": phases, "findings": []}


def test_phase_exposure_is_over_that_phase_not_the_run():
    # GIVEN a small phase half exposed (50 of 100 ns busy) inside a run of 10,100 ns busy
    report = _phase_report(
        dispatch={"compute_ns": 50, "exposed_ns": 50, "comm_ns": 60},
        experts={"compute_ns": 10_000, "exposed_ns": 0, "comm_ns": 0})
    results = checks.evaluate(report, checks.Thresholds(max_exposed_comm_pct=10))
    # THEN the phase's share is 50% and fails at 10%, though the run's (0.5%) passes
    dispatch = _by(results, "exposed-comm", "dispatch")
    assert dispatch.value == 50.0 and not dispatch.passed
    assert _by(results, "exposed-comm").passed


def test_wait_gate_skips_phases_without_a_wait_figure():
    # GIVEN a barrier phase whose wait is unknown and a phase waiting 80 of 100 ns
    report = _phase_report(other={"comm_ns": 1_000_000, "wait_ns": None},
                           combine={"comm_ns": 100, "wait_ns": 80})
    results = checks.evaluate(report, checks.Thresholds(max_wait_pct=50))
    # THEN the barrier's phase is skipped (listed, passing), combine fails at 80%
    other = _by(results, "wait", "other")
    assert other.skipped and other.passed and other.value is None
    combine = _by(results, "wait", "combine")
    assert not combine.passed and combine.value == 80.0
    assert "1 skipped" in checks.summary_line(results)


def test_wait_gate_fails_a_run_whose_wait_is_unknown():
    # GIVEN a run where no collective had its wait separated (a lone rank of its group)
    report = _phase_report(combine={"comm_ns": 100, "wait_ns": None})
    report["totals"]["wait_ns"] = None
    # WHEN gated on wait THEN the run's check fails and says why; the phase is skipped
    results = checks.evaluate(report, checks.Thresholds(max_wait_pct=50))
    total = _by(results, "wait", checks.TOTAL)
    assert not total.passed and not total.skipped and "unknown" in total.message
    assert _by(results, "wait", "combine").skipped
