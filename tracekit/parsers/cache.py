"""Parquet cache of parsed ranks, for every format the per-rank driver reads.

One entry per rank, keyed by the format (``cache_key`` of its module: the files the rank
reads, with their resolved paths, sizes and modification times, the EVENTS schema version and
the format's parser version): a changed file, or a new tracekit that parses differently, is
re-read. An entry is a directory of ``<part>.parquet`` tables (the format's ``to_entry``); it
is written under a temporary name and renamed into place, so a crashed or concurrent writer
never leaves a half-written entry behind. An entry that cannot be read back is parsed again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tracekit.parsers.rank_input import RankInput

if TYPE_CHECKING:
    import pyarrow as pa


def cache_key(path: Path, forced_rank: int | None = None) -> str:
    """The key of one Kineto rank file (also the derived cache's identity of an input file)."""
    from tracekit.parsers import kineto

    return kineto.cache_key(RankInput(str(path), forced_rank))


def read_entry(entry: Path) -> dict[str, pa.Table] | None:
    """The tables of a complete entry, or None."""
    import pyarrow.parquet as pq

    if not entry.is_dir():
        return None
    try:
        return {p.name.removesuffix(".parquet"): pq.read_table(p)
                for p in sorted(entry.glob("*.parquet"))}
    except Exception:  # an unreadable entry is simply re-parsed
        return None


def write_entry(cache_dir: Path, key: str, tables: Mapping[str, pa.Table]) -> None:
    import pyarrow.parquet as pq

    from tracekit import io

    # a temporary folder renamed into place; when another process won the race its entry
    # is kept (it is as good as ours)
    with io.atomic_folder(cache_dir / key) as tmp:
        for part, table in tables.items():
            pq.write_table(table, tmp / f"{part}.parquet", compression="zstd")


def cached_rank(fmt: ModuleType, item: RankInput, cache_dir: Path | None) -> Any:
    """``fmt.parse_rank(item)``, through the cache when ``cache_dir`` is given."""
    if cache_dir is None:
        return fmt.parse_rank(item)
    try:
        key = fmt.cache_key(item)
    except OSError:
        return fmt.parse_rank(item)  # the parser words the error
    tables = read_entry(cache_dir / key)
    if tables is not None:
        try:
            return fmt.from_entry(tables)
        except Exception:  # an outdated or partial entry is simply re-parsed
            pass
    parsed = fmt.parse_rank(item)
    write_entry(cache_dir, key, fmt.to_entry(parsed))
    return parsed
