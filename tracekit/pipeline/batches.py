"""The tasks of a partitioned run: which rank files one worker takes through the per-rank
stages together, and what it sends back.

A task takes one large file, or a batch of small consecutive ones (:func:`plan_batches`):
the rules engine and the measures are table programs whose fixed cost per call dominates a
small rank, so a batch pays it once. Each rank of a batch is still attributed as if it were
alone (tracekit.pipeline.per_rank), so its partition is the same whichever batch it falls in.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.model import AnalyzeOptions

# a batch holds at most this many files and this much JSON (a .gz file counts its
# uncompressed size): less than one rank of the 64 x 50 MB benchmark run; larger files run alone
BATCH_FILES = 64
BATCH_BYTES = 32 << 20


@dataclass(frozen=True)
class BatchTask:
    """Trace files to take through the per-rank stages in one task (picklable)."""

    paths: tuple[str, ...]
    out_dir: str
    rank: int | None = None  # forced rank (a single file only)
    options: AnalyzeOptions = field(default_factory=AnalyzeOptions)
    on_error: str = "stop"
    keep_events: bool = True
    attribute: bool = True  # False: no rules; kernel classes from the parser's op column


@dataclass(frozen=True)
class RankDone:
    """What a worker sends back: small, whatever the size of the rank."""

    source: str
    rank: int | None
    events: int
    comm_rows: int
    seconds: float
    reused: bool = False
    error: str | None = None


def json_bytes(path: Path) -> int:
    """Size of the JSON in ``path``: a gzip member's trailer holds it (mod 4 GiB), else the
    file size; 0 for a file that cannot be read (it fails later, with its own message)."""
    try:
        size = path.stat().st_size
        if path.suffix != ".gz" or size < 18:
            return size
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(f.read(4), "little"))
    except OSError:
        return 0


def disk_bytes(paths: tuple[str, ...]) -> int:
    """Bytes the files of a task take on disk (0 for one that cannot be read): what
    tracekit.engine.INLINE_MAX_BYTES is measured in."""
    total = 0
    for p in paths:
        with contextlib.suppress(OSError):
            total += os.stat(p).st_size
    return total


def plan_batches(files: list[Path], jobs: int, *, max_files: int = BATCH_FILES,
                 max_bytes: int = BATCH_BYTES) -> list[list[Path]]:
    """Consecutive runs of ``files`` (order kept) under both limits (``max_bytes`` of JSON, see
    :func:`json_bytes`), and at least ``jobs`` batches when there are that many files, so that
    every worker gets work."""
    per_batch = max(1, min(max_files, -(-len(files) // max(1, jobs))))
    batches: list[list[Path]] = []
    size = 0
    for f in files:
        nbytes = json_bytes(f)
        if not batches or len(batches[-1]) >= per_batch or size + nbytes > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(f)
        size += nbytes
    return batches
