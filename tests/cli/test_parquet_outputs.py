"""`analyze --parquet` and `export --parquet` write the same result tables (docs/outputs.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tracekit import schema as S
from tracekit.cli import cli, main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "tp4_full_tp"
RESULTS = {"attributed", "measured", "phases", "findings", "coverage"}


def _tables(folder: Path) -> dict[str, object]:
    return {p.stem: pq.read_table(p) for p in sorted(folder.glob("*.parquet"))}


def test_analyze_and_export_write_the_same_tables(tmp_path: Path) -> None:
    # GIVEN the same sample analysed by both commands into Parquet folders
    runner = CliRunner()
    a = runner.invoke(cli, ["analyze", str(SAMPLE), "--parquet", str(tmp_path / "a")])
    e = runner.invoke(cli, ["export", str(SAMPLE), "--parquet", str(tmp_path / "e")])
    assert a.exit_code == 0, a.output
    assert e.exit_code == 0, e.output
    # THEN both hold the result tables (no raw events unless asked), table for table equal
    ta, te = _tables(tmp_path / "a"), _tables(tmp_path / "e")
    assert set(ta) >= RESULTS
    assert "events" not in ta
    assert set(ta) == set(te)
    for name in ta:
        assert ta[name].equals(te[name]), name
    S.validate(ta["measured"], S.MEASURED)
    # the sample's sidecar: 5 collectives on each of its 4 ranks
    assert ta["measured"].num_rows == 20


def test_events_only_when_asked(tmp_path: Path) -> None:
    # GIVEN --parquet-events WHEN analysed THEN events.parquet is an EVENTS table beside them
    res = CliRunner().invoke(cli, ["analyze", str(SAMPLE), "--parquet", str(tmp_path / "p"),
                                   "--parquet-events"])
    assert res.exit_code == 0, res.output
    tables = _tables(tmp_path / "p")
    assert set(tables) >= RESULTS
    S.validate(tables["events"], S.EVENTS)
    assert set(tables["events"].column(S.RANK).to_pylist()) == {0, 1, 2, 3}


def test_events_flag_without_a_folder_is_one_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN --parquet-events without --parquet WHEN run THEN exit 2, one line, nothing written
    with pytest.raises(SystemExit) as exc:
        main(["export", str(SAMPLE), "--json", str(tmp_path / "r.json"), "--parquet-events"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "tracekit: error: --parquet-events needs --parquet DIR\n"
    assert not (tmp_path / "r.json").exists()
