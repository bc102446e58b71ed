"""The reporter registry: lookup by name, and atomic writes that never lose a user's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit import reports
from tracekit.errors import ConfigError
from tracekit.io import OutputError


def test_every_registered_reporter_renders_a_full_analysis(analysis):
    # GIVEN a full analysis WHEN each reporter renders it THEN each returns non-empty output
    for name in reports.names():
        out = reports.render(name, analysis)
        assert isinstance(out, str | bytes) and len(out) > 100, name


def test_unknown_reporter_is_a_config_error(analysis):
    # GIVEN a misspelt format WHEN rendered THEN ConfigError lists the known ones
    with pytest.raises(ConfigError, match=r"known: .*json"):
        reports.render("jsno", analysis)


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path, analysis):
    # GIVEN an existing file WHEN a report is written over it THEN it holds the report and no
    # temporary file remains beside it
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    reports.write("json", analysis, target)
    assert target.read_text().startswith("{")
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_failed_render_keeps_the_old_file(tmp_path: Path, analysis, monkeypatch):
    # GIVEN an existing file and a reporter that fails half-way
    target = tmp_path / "report.json"
    target.write_text("precious")

    def boom(_analysis, **_kw):
        raise RuntimeError("render failed")

    monkeypatch.setitem(reports.REPORTERS, "json", "json")
    monkeypatch.setattr("tracekit.reports.json.render", boom)
    # WHEN it is written THEN the error surfaces and the old content is intact, no temp left
    with pytest.raises(RuntimeError):
        reports.write("json", analysis, target)
    assert target.read_text() == "precious"
    assert len(list(tmp_path.iterdir())) == 1


def test_write_atomic_cleans_up_when_the_write_fails(tmp_path: Path, monkeypatch):
    # GIVEN a rename that fails (disk full, permissions) WHEN writing THEN the temporary is gone
    target = tmp_path / "x.txt"
    target.write_text("keep")

    def fail(*_a, **_k):
        raise OSError("no space")

    monkeypatch.setattr("tracekit.io.os.replace", fail)
    with pytest.raises(OutputError, match="cannot write: no space"):
        reports.write_atomic(target, "new")
    assert target.read_text() == "keep"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]
