"""Parquet of the result tables, so a run is parsed once and analysed or rendered many times.

``render(analysis, table="measured")`` gives one table as Parquet bytes; ``write`` writes every
present table to ``<folder>/<name>.parquet`` (attributed, measured, phases, findings and the
extra tables), each through a temporary file and a rename. Column metadata (doc, unit) and the
schema version travel with the Arrow schema.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracekit import io
from tracekit.api import Analysis
from tracekit.errors import ConfigError

RESULT_TABLES = ("attributed", "measured", "phases", "findings")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def tables(analysis: Analysis) -> dict[str, pa.Table]:
    """Every result table present, by file stem (extra tables keep their names)."""
    out = {name: getattr(analysis, name) for name in RESULT_TABLES}
    for name, table in sorted(analysis.tables.items()):
        if not _SAFE_NAME.match(name) or name in RESULT_TABLES:
            raise ConfigError(f"result table name {name!r} cannot be a file name")
        out[name] = table
    return {k: v for k, v in out.items() if v is not None}


def to_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def render(analysis: Analysis, *, table: str = "measured", **_options: Any) -> bytes:
    """One result table as Parquet bytes."""
    present = tables(analysis)
    if table not in present:
        raise ConfigError(f"no table {table!r} in this analysis; present: {', '.join(present)}")
    return to_bytes(present[table])


def write(analysis: Analysis, folder: Path, *, outputs: io.Outputs | None = None,
          **_options: Any) -> Path:
    """Write every present result table to ``folder/<name>.parquet``; returns the folder.

    With ``outputs`` the files are staged there (put in place when it commits); without,
    they are written together here."""
    if outputs is None:
        with io.Outputs() as own:
            return write(analysis, folder, outputs=own)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"Parquet output must be a folder, {folder} is a file")
    outputs.folder(folder)
    for name, table in tables(analysis).items():
        with outputs.stream(folder / f"{name}.parquet") as fh:
            pq.write_table(table, fh, compression="zstd")
    return folder
