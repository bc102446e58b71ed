"""What the per-rank driver (tracekit.parsers) hands a format and gets back from it, and
the parts of a parse-cache key.

A format finds the ranks of a path as RankInputs (a Kineto rank file, an Ascend rank
directory); each is parsed on its own, in a worker process or here, and comes back as the
format's parsed rank or as a RankFailure (bad input: stopped at or skipped, by the
``on_error`` policy). Both cross process boundaries, so both are plain picklable data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RankInput:
    """One rank's input: the path the format reads it from, the rank forced on it (``--rank``
    on a single file or rank directory; None: read from the files) and the bytes it reads (a
    run below tracekit.engine.INLINE_MAX_BYTES is parsed in this process)."""

    path: str
    rank: int | None = None
    size: int = 0


@dataclass(frozen=True)
class RankFailure:
    """A rank that is bad input: the file the problem is in, and the problem."""

    file: str
    message: str

    def one_line(self) -> str:
        return f"{self.file}: {' '.join(self.message.split())}"


def file_identity(paths: Iterable[Path]) -> list[str]:
    """Resolved path, size and modification time of each file (OSError when one is gone):
    the part of a cache key that changes when a file the rank reads changes."""
    out: list[str] = []
    for path in paths:
        st = path.stat()
        out += [str(path.resolve()), str(st.st_size), str(st.st_mtime_ns)]
    return out


def entry_key(parts: Iterable[str]) -> str:
    """A parse-cache key (tracekit.parsers.cache) from the strings that identify an entry."""
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
