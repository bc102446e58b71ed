"""The JSON report: documented, versioned keys and byte-identical output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tracekit import reports
from tracekit.errors import BadInputError
from tracekit.reports import json as json_report

DOC = Path(__file__).resolve().parents[2] / "docs" / "json-report.md"


def test_same_input_gives_the_same_bytes(make_analysis):
    # GIVEN two analyses built independently from the same tables
    # WHEN both are rendered THEN the JSON is byte-identical
    first = reports.render("json", make_analysis())
    second = reports.render("json", make_analysis())
    assert first == second
    assert first.endswith("\n")


def test_different_input_gives_different_bytes(make_analysis):
    # GIVEN two runs that differ (another seed) WHEN rendered THEN the JSON differs
    assert reports.render("json", make_analysis()) != reports.render("json", make_analysis(seed=3))


def test_report_is_versioned_and_carries_the_figures(analysis):
    # GIVEN a full analysis WHEN built THEN it names its format/version and has the figures
    data = json.loads(reports.render("json", analysis))
    assert data["format"] == "tracekit-report"
    assert data["report_version"] == json_report.REPORT_VERSION
    assert data["run"]["ranks"] == list(range(8))
    assert data["totals"]["n_ranks"] == 8
    assert 0 < data["totals"]["efficiency"] < 1
    assert isinstance(data["totals"]["comm_ns"], int)
    assert {p["path"] for p in data["paths"]} >= {"attn_reduce.attn_tp", "deepep.normal.dispatch"}
    assert [f["severity"] for f in data["findings"]] == ["error", "warning", "info"]
    assert set(data["tables"]) == {"a2a", "a2a_matrix", "fits", "stragglers"}
    assert data["tables"]["a2a_matrix"]["total_rows"] == 192


def _documented_keys() -> set[str]:
    return set(re.findall(r"`([a-z_0-9]+)`", DOC.read_text()))


def test_every_key_is_documented(analysis):
    # GIVEN the report and docs/json-report.md WHEN keys are collected THEN each is documented
    data = json.loads(reports.render("json", analysis))
    keys = set(data) | set(data["run"]) | set(data["totals"]) | set(data["attribution"])
    keys |= set(data["phases"][0]) | set(data["paths"][0]) | set(data["findings"][0])
    keys |= set(data["events"]) | set(data["events"]["per_rank"][0])
    keys |= set(data["events"]["communication"][0])
    keys |= set(data["tables"]["fits"])
    missing = keys - _documented_keys()
    assert not missing, f"undocumented keys: {sorted(missing)}"


def test_events_only_run_still_reports(events_only):
    # GIVEN EVENTS only WHEN rendered THEN the run and communication kernels are there
    data = json.loads(reports.render("json", events_only))
    assert data["phases"] == [] and data["paths"] == [] and data["findings"] == []
    assert data["totals"]["comm_ns"] is None
    assert {c["op"] for c in data["events"]["communication"]} == {
        "all_gather", "all_reduce", "dispatch", "combine"}


def test_read_round_trips_and_rejects_other_json(tmp_path: Path, analysis):
    # GIVEN a written report and an unrelated JSON file
    good, other = tmp_path / "r.json", tmp_path / "o.json"
    reports.write("json", analysis, good)
    other.write_text('{"traceEvents": []}')
    # WHEN read THEN the report loads and the other file is a BadInputError naming it
    assert json_report.read(good) == json.loads(good.read_text())
    with pytest.raises(BadInputError, match=r"o\.json"):
        json_report.read(other)


def test_newer_report_version_is_refused(tmp_path: Path, analysis):
    # GIVEN a report from a future tracekit WHEN read THEN it is refused, not misread
    data = json_report.build(analysis)
    data["report_version"] = json_report.REPORT_VERSION + 1
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInputError, match="newer"):
        json_report.read(path)


def test_extra_table_rows_from_arrow_equal_those_of_the_pandas_frame():
    import pyarrow as pa

    from tracekit.reports import frames

    # GIVEN a table with each kind of column the result tables have, nulls in all of them
    table = pa.table({
        "count": pa.array([1, None, 3], pa.int64()),  # an integer key: integral floats as ints
        "instance": pa.array([7, None, 9], pa.int32()),  # another: floats in pandas
        "rank": pa.array([0, 1, 2], pa.int32()),
        "share": pa.array([0.25, float("nan"), None], pa.float64()),
        "narrow": pa.array([0.1, 2.5, None], pa.float32()),
        "flag": pa.array([True, None, False]),
        "op": pa.array(["all_reduce", None, "<b>x</b>"]).dictionary_encode(),
        "reason": pa.array(["a", "", None], pa.large_string()),
        "members": pa.array([[0, 1], None, []], pa.list_(pa.int32())),
    })
    # WHEN its rows are read from Arrow THEN as the pandas frame's records give them
    want = [list(r.values()) for r in json_report.records(frames.to_frame(table))]
    got = json_report._arrow_rows(table)
    assert json.dumps(got) == json.dumps(want)  # as written: 7.0 is not 7
    assert "7.0" in json.dumps(got)
    assert json_report._arrow_rows(table.slice(0, 0)) == []
    # AND a column whose pandas values could differ is left to the frame
    inner_null = pa.table({"members": pa.array([[0, None]], pa.list_(pa.int32()))})
    when = pa.table({"ts": pa.array([0], pa.timestamp("ns"))})
    assert json_report._arrow_rows(inner_null) is None and json_report._arrow_rows(when) is None
