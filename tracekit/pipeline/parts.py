"""The Parquet dataset of a partitioned run: where each rank's parts live, how they are written
and read back, and the record that says a rank is done.

    OUT/events/rank=R/part-0.parquet     ATTRIBUTED rows of rank R
    OUT/comm/rank=R/part-0.parquet       the communication subset: one row per collective
                                         instance with its exposed time (a few % of events)
    OUT/classes/rank=R/part-0.parquet    TIME_CLASSES of rank R
    OUT/units/rank=R/part-0.parquet      COLLECTIVE_UNITS of rank R (what the lints read)
    OUT/groups/rank=R/..., OUT/info/rank=R/...   PROCESS_GROUPS, RANK_INFO
    OUT/sources/<file>.json              which file made which rank, with the file's key

Every file is written under a dot-name and renamed into place (dataset readers skip dot-files),
and a rank's ``sources`` record is written last: a run interrupted with Ctrl-C leaves no
half-written entry, and the next run skips the ranks already done (same file size and mtime).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracekit import io
from tracekit import schema as S

PARTS = ("events", "comm", "classes", "units", "groups", "info")
SOURCES = "sources"
# 5: the comm part's own text columns (run.OWN_TEXT) are dictionary-encoded; 4: ATTRIBUTED.reason
# is dictionary-encoded; 3: the comm part flags the call site
PIPELINE_VERSION = "5"

# below this size a part is written plain: compression, statistics and dictionary pages
# cost more time than the bytes they save (a small rank writes six parts)
SMALL_PART_BYTES = 1 << 20


def part_path(out: Path, part: str, rank: int) -> Path:
    return out / part / f"rank={rank}" / "part-0.parquet"


def source_key(path: Path) -> dict[str, Any]:
    """What makes a rank file's parts current: the file's identity and the format versions."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "schema": S.SCHEMA_VERSION, "pipeline": PIPELINE_VERSION}


def source_record(out: Path, path: Path) -> Path:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    return out / SOURCES / f"{path.name}.{digest}.json"


def write_parquet(table: pa.Table, path: Path) -> None:
    """``table`` to ``path`` through a dot-named temporary (plain when small, else lz4).

    Statistics are kept for the number columns only (min / max of text and lists cost about
    a tenth of a rank's events write and no reader of the dataset filters on them), and
    dictionary pages for the other columns only: ids and timestamps are nearly all distinct,
    so a dictionary of them is built and then thrown away. On a 50 MB rank's events (170k
    rows, CPU time): 176 ms with zstd and every column's dictionary, 93 ms with zstd and the
    text columns' (1.3 MB), 77 ms with lz4 (3.5 MB), 73 ms uncompressed (18 MB)."""
    with io.atomic_path(path, make_parents=True) as tmp:
        if table.nbytes < SMALL_PART_BYTES:
            pq.write_table(table, tmp, compression="none", write_statistics=False,
                           use_dictionary=False)
        else:
            numbers = _number_columns(table.schema)
            others = [f.name for f in table.schema if not _is_number(f.type)]
            pq.write_table(table, tmp, compression="lz4", write_statistics=numbers,
                           use_dictionary=others)


def _number_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if _is_number(f.type)]


def _is_number(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or
            pa.types.is_timestamp(t))


def write_record(out: Path, path: Path, record: dict[str, Any]) -> None:
    """The ``sources`` record of the rank file ``path``: written last, so it marks a rank done."""
    with io.atomic_path(source_record(out, path), make_parents=True) as tmp:
        tmp.write_text(json.dumps(record))


def read_record(out: Path, path: Path) -> dict[str, Any] | None:
    """The ``sources`` record of ``path``, or None (absent or unreadable: the rank is redone)."""
    record = source_record(out, path)
    if not record.is_file():
        return None
    try:
        saved = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return saved if isinstance(saved, dict) else None


def read_part(out: Path, part: str, ranks: list[int],
              columns: Sequence[str] | None = None, *, text_dictionaries: bool = False
              ) -> pa.Table:
    """The ``part`` tables of ``ranks``, concatenated in rank order; only the ``columns``
    a part has, when given (the others are never read from disk); ``text_dictionaries``:
    text columns read as dictionaries (each distinct string once a rank)."""
    # ParquetFile.read: a plain file read, without read_table's dataset discovery (5x less
    # time a file, which counts when thousands of ranks each have a small file)
    tables = [_read(part_path(out, part, r), columns, text_dictionaries) for r in ranks]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def _read(path: Path, columns: Sequence[str] | None, text_dictionaries: bool) -> pa.Table:
    f = pq.ParquetFile(path)
    names = f.schema_arrow.names if columns is None else [
        c for c in columns if c in set(f.schema_arrow.names)]
    if text_dictionaries:
        text = [fl.name for fl in f.schema_arrow if fl.name in names and (
            pa.types.is_string(fl.type) or pa.types.is_large_string(fl.type))]
        f = pq.ParquetFile(path, read_dictionary=text)
    return f.read(columns=names)


def ranks_written(out: Path) -> list[int]:
    """The ranks the dataset in ``out`` has a RANK_INFO part of."""
    return sorted(int(p.name.split("=", 1)[1]) for p in (out / "info").glob("rank=*"))


def remove_stale_temporaries(out: Path) -> int:
    """Delete the temporaries of writers that no longer run (a worker killed by Ctrl-C or
    ``terminate`` cannot clean up after itself); returns how many were removed."""
    removed = 0
    for tmp in out.glob("*/**/.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # that writer still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed += 1
    return removed
