"""torch c10d Flight Recorder dumps: find them, read them safely, build the FR table.

    load_dumps(path) -> FR table of every rank's dump under ``path`` (a file or a folder)

A folder's dumps are the files whose name says so: ``*fr_trace*`` (what ``tracekit capture
--flight-recorder`` writes: ``rank{r}.fr_trace.pkl``), ``*nccl_trace*`` (torch's default
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix ``nccl_trace_rank_``) or ``*flight_recorder*``.
When a rank has two dumps (a watchdog dump and capture's own), the one whose newest entry is
the latest is read and the other is named in ``skipped``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.flight_recorder.read import read_dump
from tracekit.parsers.flight_recorder.table import (
    GROUPS_SUFFIX,
    concat,
    fr_table,
    rank_of,
    read_groups_file,
)

DUMP_NAME = re.compile(r"fr_trace|nccl_trace|flight_recorder", re.IGNORECASE)


@dataclass
class Dumps:
    """The FR table of a run and what was left out."""

    table: pa.Table
    files: dict[int, Path] = field(default_factory=dict)  # rank -> dump read
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)


def is_dump_name(path: Path) -> bool:
    name = path.name
    return (DUMP_NAME.search(name) is not None and not name.startswith(".")
            and not name.endswith((".tmp", GROUPS_SUFFIX)))


def find_dumps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and is_dump_name(p))


def _groups_for(dump: Path, rank: int) -> dict[tuple[str, str], list[int]] | None:
    side = dump.parent / f"rank{rank}{GROUPS_SUFFIX}"
    return read_groups_file(side) if side.is_file() else None


def load_dumps(path: Path) -> Dumps:
    """Read every dump under ``path``; BadInputError (one line, naming the file) on bad input."""
    path = Path(path)
    if path.is_dir():
        files = find_dumps(path)
        if not files:
            raise BadInputError("no Flight Recorder dumps here (files named *fr_trace*, "
                                "*nccl_trace* or *flight_recorder*)", path)
    elif path.is_file():
        files = [path]
    else:
        raise BadInputError("no such file or folder", path)
    by_rank: dict[int, tuple[Path, pa.Table]] = {}
    skipped: list[tuple[str, str]] = []
    for f in files:
        rank = rank_of(f)
        table = fr_table(rank, f, read_dump(f), _groups_for(f, rank))
        if rank in by_rank:
            old_path, old = by_rank[rank]
            newest = (_newest(table), table.num_rows) > (_newest(old), old.num_rows)
            keep, drop = ((f, table), old_path) if newest else ((old_path, old), f)
            by_rank[rank] = keep
            skipped.append((str(drop), f"a second dump of rank {rank}; read {keep[0].name}"))
        else:
            by_rank[rank] = (f, table)
    ranks = sorted(by_rank)
    return Dumps(concat(by_rank[r][1] for r in ranks), {r: by_rank[r][0] for r in ranks},
                 skipped)


def _newest(table: pa.Table) -> int:
    if not table.num_rows:
        return -1
    value = pc.max(table.column(S.TS_NS)).as_py()
    return int(value) if value is not None else -1


__all__ = ["Dumps", "find_dumps", "is_dump_name", "load_dumps", "read_dump"]
