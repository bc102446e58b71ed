"""Parquet cache of parsed rank files.

One entry per trace file, keyed by its resolved path, size, modification time, the EVENTS schema
version and the parser version: a changed file (or a new tracekit that parses differently) is
re-read. An entry is a directory holding ``events.parquet``, ``process_groups.parquet`` and
``rank_info.parquet``; it is written under a temporary name and renamed into place, so a
crashed or concurrent writer never leaves a half-written entry behind.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit import schema as S
from tracekit.parsers.kineto.comm import kernel_rules_digest

if TYPE_CHECKING:
    from tracekit.parsers.kineto import RankTables

PARSER_VERSION = "kineto-1"
_PARTS = ("events", "process_groups", "rank_info")


def cache_key(path: Path, forced_rank: int | None = None) -> str:
    st = path.stat()
    text = "|".join([
        str(path.resolve()), str(st.st_size), str(st.st_mtime_ns), S.SCHEMA_VERSION,
        PARSER_VERSION, kernel_rules_digest(), "" if forced_rank is None else str(forced_rank),
    ])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read_entry(entry: Path) -> RankTables | None:
    import pyarrow.parquet as pq

    from tracekit.parsers.kineto import RankTables

    if not all((entry / f"{p}.parquet").is_file() for p in _PARTS):
        return None
    try:
        events, groups, info = (pq.read_table(entry / f"{p}.parquet") for p in _PARTS)
        S.validate(events, S.EVENTS)
    except Exception:  # an unreadable or outdated entry is simply re-parsed
        return None
    return RankTables(int(info.column(S.RANK)[0].as_py()), events, groups, info)


def write_entry(cache_dir: Path, key: str, tables: RankTables) -> None:
    import pyarrow.parquet as pq

    from tracekit import io

    # a temporary folder renamed into place; when another process won the race its entry
    # is kept (it is as good as ours)
    with io.atomic_folder(cache_dir / key) as tmp:
        for part, table in zip(
            _PARTS, (tables.events, tables.process_groups, tables.rank_info), strict=True
        ):
            pq.write_table(table, tmp / f"{part}.parquet", compression="zstd")


def cached_rank(
    path: Path, forced_rank: int | None, cache_dir: Path | None, jobs: int = 1
) -> RankTables:
    """Parse one Kineto file, through the cache when ``cache_dir`` is given."""
    from tracekit.parsers import kineto

    if cache_dir is None:
        return kineto.load_kineto_file(path, forced_rank, jobs)
    try:
        key = cache_key(path, forced_rank)
    except OSError:
        return kineto.load_kineto_file(path, forced_rank, jobs)  # the parser words the error
    hit = read_entry(cache_dir / key)
    if hit is not None:
        return hit
    tables = kineto.load_kineto_file(path, forced_rank, jobs)
    write_entry(cache_dir, key, tables)
    return tables
