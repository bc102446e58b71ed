"""Parquet of the result tables: one file per table, identical tables read back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracekit import reports
from tracekit import schema as s
from tracekit.errors import ConfigError


def test_folder_holds_every_result_table(tmp_path: Path, analysis):
    # GIVEN a full analysis WHEN written as Parquet THEN each table reads back equal
    out = reports.write("parquet", analysis, tmp_path / "tables")
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(f"{n}.parquet" for n in (
        "attributed", "measured", "phases", "findings", "a2a", "a2a_matrix", "fits",
        "stragglers"))
    measured = pq.read_table(out / "measured.parquet")
    assert measured.equals(analysis.measured)
    assert measured.schema.metadata[b"table"] == b"MEASURED"
    assert pq.read_table(out / "attributed.parquet").num_rows == analysis.attributed.num_rows


def test_render_gives_one_table_as_bytes(analysis):
    # GIVEN an analysis WHEN one table is rendered THEN its bytes are a Parquet file of it
    data = reports.render("parquet", analysis, table="attributed")
    table = pq.read_table(pa.BufferReader(data))
    assert table.schema.names == s.ATTRIBUTED.names


def test_missing_table_and_file_target_are_config_errors(tmp_path: Path, events_only):
    # GIVEN EVENTS only WHEN MEASURED is asked for THEN ConfigError; a file target too
    with pytest.raises(ConfigError, match="no table 'measured'"):
        reports.render("parquet", events_only, table="measured")
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ConfigError, match="folder"):
        reports.write("parquet", events_only, target)
