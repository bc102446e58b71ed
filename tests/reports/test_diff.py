"""`diff`: per phase and path, what changed and by how much; findings that came and went."""

from __future__ import annotations

import copy
import json

import pytest

from tracekit.reports import diff
from tracekit.reports import json as json_report


@pytest.fixture
def pair(analysis):
    """A baseline report and an 'after' report where combine moved from DeepEP to RSV."""
    before = json_report.build(analysis)
    after = copy.deepcopy(before)
    for row in after["paths"]:
        if row["path"] == "deepep.normal.combine":
            row.update(path="combine.b_reduce_scatterv", group="TP", op="reduce_scatterv")
            row["dur_ns"] //= 4
    for row in after["phases"]:
        if row["phase"] == "combine":
            row["comm_ns"] //= 4
    after["findings"] = [f for f in after["findings"] if f["rule_id"] != "a2a-imbalance"]
    after["findings"].append({"severity": "error", "rule_id": "double-reduction", "layer": 2,
                              "group": "TP", "path": "combine.b_reduce_scatterv",
                              "phase": "combine", "ranks": [0], "message": "sum counted twice",
                              "evidence": "x"})
    return before, after


def test_paths_that_appear_and_vanish(pair):
    # GIVEN a baseline and an RSV run WHEN compared
    d = diff.compare(*pair, labels=("base", "rsv"))
    change = {p: c for p, c in zip(d.paths["path"], d.paths[diff.CHANGE], strict=True)}
    # THEN the DeepEP combine is removed, the RSV combine added, the rest unchanged
    assert change["deepep.normal.combine"] == "removed"
    assert change["combine.b_reduce_scatterv"] == "added"
    assert change["attn_reduce.attn_tp"] == "same"


def test_phase_change_by_how_much(pair):
    # GIVEN combine time divided by 4 WHEN compared THEN -75% on combine, per rank
    d = diff.compare(*pair)
    row = d.phases[d.phases["phase"] == "combine"].iloc[0]
    assert row[diff.DELTA_PCT] == pytest.approx(-75, abs=0.01)
    n = pair[0]["totals"]["n_ranks"]
    assert row[diff.TIME_A] == pytest.approx(pair[0]["phases"][3]["comm_ns"] / n)
    assert d.totals[diff.DELTA_NS] < 0


def test_findings_appeared_and_vanished(pair):
    # GIVEN one finding dropped and one added WHEN compared THEN each list has exactly it
    d = diff.compare(*pair)
    assert list(d.appeared["rule_id"]) == ["double-reduction"]
    assert list(d.vanished["rule_id"]) == ["a2a-imbalance"]


def test_identical_runs_show_no_change(analysis):
    # GIVEN the same report twice WHEN compared THEN every row is "same", no finding moves
    r = json_report.build(analysis)
    d = diff.compare(r, r)
    assert set(d.phases[diff.CHANGE]) == {"same"} and set(d.paths[diff.CHANGE]) == {"same"}
    assert d.appeared.empty and d.vanished.empty


def test_renderings_name_the_runs_and_escape(pair):
    # GIVEN labels with markup WHEN rendered as text, Markdown and JSON
    before, after = pair
    after["findings"][-1]["message"] = "<script>alert(1)</script> [bold]x[/bold]"
    d = diff.compare(before, after, labels=("base", "rsv"))
    text = diff.render_text(d, width=200)
    md = diff.render_markdown(d)
    data = json.loads(json_report.dumps(diff.to_data(d)))
    # THEN each shows both labels, markup stays literal, Markdown has no raw tag
    assert "a = base, b = rsv" in text and "[bold]x[/bold]" in text
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert data["labels"] == ["base", "rsv"]
    assert data["findings_appeared"][0]["rule_id"] == "double-reduction"


def test_text_fits_80_columns_without_cutting_a_cell(pair):
    # GIVEN two runs' reports WHEN the diff is rendered at 80 columns
    before, after = pair
    text = diff.render_text(diff.compare(before, after, labels=("base", "rsv")), width=80)
    # THEN no line is wider and no cell is cut short with an ellipsis
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
