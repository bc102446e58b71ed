"""`tracekit check`, `diff` and `export`: exit codes, files written, one-line errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tracekit.cli import main
from tracekit.reports import json as json_report


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


@pytest.fixture
def run_dir(tmp_path: Path, analysis, monkeypatch) -> Path:
    """A run folder whose analysis is the fixture (the pipeline's stages are stubbed)."""
    folder = tmp_path / "run"
    folder.mkdir()
    calls = []

    def fake_analyze(execution, **_):
        calls.append(Path(execution.source))
        return analysis

    monkeypatch.setattr("tracekit.pipeline.stages.analyze", fake_analyze)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return folder


@pytest.fixture
def clean_report(tmp_path: Path, analysis) -> Path:
    """A JSON report of the fixture run without its error finding."""
    data = json_report.build(analysis)
    data["findings"] = [f for f in data["findings"] if f["severity"] != "error"]
    path = tmp_path / "clean.json"
    path.write_text(json_report.dumps(data))
    return path


def test_check_passes_with_exit_0(clean_report: Path, capsys):
    # GIVEN a report without error findings WHEN checked with lenient thresholds THEN exit 0
    # (a phase's exposed share is over its own busy time: comm-only phases are at 100%)
    code = _run(["check", str(clean_report), "--max-exposed-comm", "100", "--min-efficiency",
                 "0.3"])
    assert code == 0
    assert "checks passed" in capsys.readouterr().out.strip().splitlines()[-1]


def test_check_fails_with_exit_1_listing_the_failures(run_dir: Path, tmp_path: Path, capsys):
    # GIVEN a run (exposure ~28%) WHEN the limit is 10% THEN exit 1, failures listed on stdout
    # and one error line on stderr naming the run
    junit, md = tmp_path / "j.xml", tmp_path / "r.md"
    code = _run(["check", str(run_dir), "--max-exposed-comm", "10", "--junit", str(junit),
                 "--markdown", str(md)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "FAIL exposed-comm [total]" in out
    assert err.startswith(f"tracekit: error: {run_dir}: ") and err.count("\n") == 1
    cases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert len(cases) == 2 * 6
    assert "### Checks:" in md.read_text() and "### Time per phase" in md.read_text()


def test_check_appends_to_the_github_step_summary(run_dir: Path, tmp_path: Path, monkeypatch):
    # GIVEN $GITHUB_STEP_SUMMARY with earlier content WHEN check runs THEN it is appended to
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _run(["check", str(run_dir)])
    text = summary.read_text()
    assert text.startswith("# earlier step\n") and "### Checks:" in text


def test_check_against_a_baseline(run_dir: Path, tmp_path: Path, analysis, capsys):
    # GIVEN a baseline where every phase took half the time
    base = json_report.build(analysis)
    for row in base["phases"]:
        row["comm_ns"] //= 2
    baseline = tmp_path / "old.json"
    baseline.write_text(json_report.dumps(base))
    # WHEN checked with a 10% regression budget THEN it fails on regression
    code = _run(["check", str(run_dir), "--baseline", str(baseline), "--max-regression", "10"])
    assert code == 1 and "FAIL regression [total]" in capsys.readouterr().out


def test_baseline_needs_max_regression(clean_report: Path, capsys):
    # GIVEN --baseline alone WHEN run THEN a usage error (exit 2), one line
    code = _run(["check", str(clean_report), "--baseline", str(clean_report)])
    assert code == 2 and "go together" in capsys.readouterr().err


def test_check_json_output_is_a_usable_baseline(run_dir: Path, tmp_path: Path):
    # GIVEN check --json WHEN that file is the baseline of the same run THEN no regression
    out = tmp_path / "base.json"
    _run(["check", str(run_dir), "--json", str(out)])
    assert json_report.read(out)["report_version"] == json_report.REPORT_VERSION
    junit = tmp_path / "j.xml"
    _run(["check", str(run_dir), "--baseline", str(out), "--max-regression", "0",
          "--junit", str(junit)])
    regress = [c for c in ET.parse(junit).getroot().iter("testcase")
               if c.get("classname", "").endswith("regression")]
    assert regress and all(c.find("failure") is None for c in regress)


def test_diff_two_reports(tmp_path: Path, analysis, capsys):
    # GIVEN two JSON reports where run B's combine is twice as slow
    a = json_report.build(analysis)
    b = json.loads(json.dumps(a))
    for row in b["phases"]:
        if row["phase"] == "combine":
            row["comm_ns"] *= 2
    pa_, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa_.write_text(json_report.dumps(a))
    pb.write_text(json_report.dumps(b))
    out_json = tmp_path / "d.json"
    # WHEN diffed THEN exit 0, the text names the change and the JSON has +100% on combine
    assert _run(["diff", str(pa_), str(pb), "--json", str(out_json), "--label-a", "base",
                 "--label-b", "slow"]) == 0
    assert "a = base, b = slow" in capsys.readouterr().out
    phases = {p["phase"]: p for p in json.loads(out_json.read_text())["phases"]}
    assert phases["combine"]["delta_pct"] == pytest.approx(100.0)


def test_export_writes_every_requested_format(run_dir: Path, tmp_path: Path, capsys):
    # GIVEN a run WHEN exported to Perfetto, HTML, JSON, Markdown and Parquet
    out = tmp_path / "out"
    code = _run(["export", str(run_dir), "--perfetto", str(out / "t.json"), "--json",
                 str(out / "r.json"), "--markdown", str(out / "r.md"), "--parquet",
                 str(out / "pq"), "--html", str(out / "r.html")])
    # THEN each file exists and is what it claims
    assert code == 0
    assert json.loads((out / "t.json").read_text())["traceEvents"]
    assert json_report.read(out / "r.json")
    assert (out / "pq" / "measured.parquet").is_file()
    assert (out / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert capsys.readouterr().out.count("wrote ") == 5


def test_export_without_a_format_is_an_error(run_dir: Path, capsys):
    # GIVEN no output option WHEN exporting THEN exit 2 with a one-line reason
    assert _run(["export", str(run_dir)]) == 2
    assert "nothing to export" in capsys.readouterr().err


def test_trace_json_that_is_not_a_report_goes_to_the_pipeline(run_dir: Path, tmp_path: Path):
    # GIVEN a Kineto-style .json trace (not a report) WHEN checked THEN it is analysed
    trace = tmp_path / "rank0.trace.json"
    trace.write_text('{"traceEvents": [], "distributedInfo": {"rank": 0}}')
    assert _run(["check", str(trace), "--max-exposed-comm", "90"]) == 1  # fixture's error


def test_diff_a_run_folder_against_a_report(run_dir: Path, clean_report: Path, capsys,
                                            monkeypatch):
    # GIVEN a run folder (analysed) and a JSON report of the same run minus its error finding
    # WHEN diffed (on a wide terminal: cells wrap at 80) THEN exit 0, no time change, and the
    # error finding shows as appeared in b
    monkeypatch.setenv("COLUMNS", "200")
    assert _run(["diff", str(clean_report), str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "(0.0%)" in out and "findings +1 / -0" in out
    assert "Findings that appeared in b" in out and "unattributed-comm" in out
