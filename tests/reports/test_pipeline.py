"""Reporters on the real pipeline: tracekit.api.analyze over the bundled sample traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracekit import api, reports
from tracekit import schema as s
from tracekit.reports import checks, diff
from tracekit.reports import json as json_report
from tracekit.rules.labels import PathLabel

GATHERV = "tp4_dp4_gatherv_rsv"
FULL_TP = "tp4_full_tp"


@pytest.fixture(scope="module")
def sample_analysis(sample_traces: Path) -> Any:
    return api.analyze(sample_traces / GATHERV)


def test_every_reporter_renders_a_sample_run(sample_analysis):
    # GIVEN the analysis of a real 4-rank gloo run WHEN each reporter renders it
    for name in reports.names():
        out = reports.render(name, sample_analysis)
        # THEN each gives output, and the text names the run's paths
        assert len(out) > 100, name
    text = reports.render("text", sample_analysis, color=False)
    assert PathLabel.GATHER_V in text and PathLabel.COMBINE_B in text


def test_json_and_text_are_identical_across_two_analyses(sample_traces: Path, sample_analysis):
    # GIVEN the same trace folder analysed twice from scratch
    again = api.analyze(sample_traces / GATHERV)
    # WHEN rendered THEN the JSON and text reports are byte-identical
    assert reports.render("json", again) == reports.render("json", sample_analysis)
    assert (reports.render("text", again, color=False)
            == reports.render("text", sample_analysis, color=False))


def test_report_figures_match_the_measured_table(sample_analysis):
    # GIVEN MEASURED WHEN the JSON report is built THEN its path counts add up to MEASURED
    data = json.loads(reports.render("json", sample_analysis))
    assert sum(p["count"] for p in data["paths"]) == sample_analysis.measured.num_rows
    assert data["run"]["ranks"] == [0, 1, 2, 3]
    assert {p["path"] for p in data["paths"]} >= {PathLabel.GATHER_V, PathLabel.COMBINE_B}


def test_diff_full_tp_against_gatherv(sample_traces: Path, sample_analysis):
    # GIVEN a full-TP run and a DP-attention gatherv + reduce_scatterv run
    full = json_report.build(api.analyze(sample_traces / FULL_TP))
    d = diff.compare(full, json_report.build(sample_analysis), ("full_tp", "gatherv_rsv"))
    change = dict(zip(d.paths[s.PATH], d.paths[diff.CHANGE], strict=True))
    # WHEN compared THEN the gatherv and RSV paths appear, the full-TP AllReduce vanishes
    assert change[PathLabel.GATHER_V] == "added"
    assert change[PathLabel.COMBINE_B] == "added"
    assert change[PathLabel.ATTN_FULL_TP] == "removed"


def test_perfetto_export_of_a_sample_run(sample_analysis):
    # GIVEN a real run WHEN exported THEN every event is there and collectives carry paths
    data = json.loads(reports.render("perfetto", sample_analysis))
    xs = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] != "tracekit.phase"]
    assert len(xs) == sample_analysis.run.events.num_rows
    paths = {e["args"].get("path") for e in xs if "instance" in e["args"]}
    assert {PathLabel.GATHER_V, PathLabel.COMBINE_B} <= paths


def test_checks_on_a_sample_run(sample_analysis):
    # GIVEN a run with no findings WHEN checked for findings and exposure THEN findings pass
    results = checks.evaluate(json_report.build(sample_analysis),
                              checks.Thresholds(no_findings=True, max_exposed_comm_pct=100))
    assert all(r.passed for r in results if r.check == "findings")
    assert all(r.passed for r in results if r.check == "exposed-comm")
