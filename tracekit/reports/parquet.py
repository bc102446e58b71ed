"""Parquet of the result tables, so a run is parsed once and analysed or rendered many times.

``render(analysis, table="measured")`` gives one table as Parquet bytes; ``write`` writes every
present table to ``<folder>/<name>.parquet`` (attributed, measured, phases, findings and the
extra tables, ``Analysis.tables``; the raw EVENTS only with ``events=True``), each through a
temporary file and a rename. ``analyze --parquet`` and ``export --parquet`` both come here.
Column metadata (doc, unit) and the schema version travel with the Arrow schema.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracekit import io
from tracekit.errors import ConfigError
from tracekit.model import Analysis

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


EVENTS_TABLE = "events"  # file stem of the EVENTS table, written only when asked


def tables(analysis: Analysis, *, events: bool = False) -> dict[str, pa.Table]:
    """Every result table present, by file stem (``Analysis.tables``), and with ``events``
    the run's EVENTS table as ``events``."""
    out = dict(analysis.tables)
    if events:
        if EVENTS_TABLE in out:
            raise ConfigError(f"result table name {EVENTS_TABLE!r} clashes with EVENTS")
        out[EVENTS_TABLE] = analysis.run.events
    for name in out:
        if not _SAFE_NAME.match(name):
            raise ConfigError(f"result table name {name!r} cannot be a file name")
    return out


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
          events: bool = False, **_options: Any) -> Path:
    """Write every present result table to ``folder/<name>.parquet`` (and with ``events``
    the EVENTS table to ``folder/events.parquet``); returns the folder.

    With ``outputs`` the files are staged there (put in place when it commits); without,
    they are written together here."""
    if outputs is None:
        with io.Outputs() as own:
            return write(analysis, folder, outputs=own, events=events)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"Parquet output must be a folder, {folder} is a file")
    outputs.folder(folder)
    for name, table in tables(analysis, events=events).items():
        with outputs.stream(folder / f"{name}.parquet") as fh:
            pq.write_table(table, fh, compression="zstd")
    return folder
