"""Byte level reading of a Kineto Chrome-trace: open (.json / .json.gz), and split the
``traceEvents`` array into pieces at event boundaries without parsing it.

The split is a guess (a ``}`` followed by ``,`` and ``{``) that the decoder checks: a piece cut
at a false boundary cannot decode (its last object is unclosed), and is then merged with the next
piece. Anything the splitter cannot resolve raises :class:`SplitError`: the file is then not a
trace it can read, and kineto_diagnose words why.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tracekit.errors import BadInputError
from tracekit.limits import (
    MAX_DECOMPRESSED,
    MAX_EVENT,
    MAX_HEAD,
    MAX_RATIO,
    MB,
    RATIO_AFTER,
    LimitExceeded,
    regular_file,
)

CHUNK_BYTES = 8 << 20  # measured: same speed as 16 MB, lower peak memory
# what one call of the decompressor fills of a block: below sparse_columns.LARGE_BLOCK, so
# that its output object comes from the heap (BoundedGzip.readinto)
INFLATE_PIECE = 512 << 10
_GZIP_MAGIC = b"\x1f\x8b"
_EVENTS_KEY = b'"traceEvents"'
_WS = b" \t\r\n"


class SplitError(Exception):
    """The splitter could not find the event array's structure (kineto_diagnose says why)."""


def open_trace(path: Path) -> BinaryIO:
    """A binary stream of the uncompressed JSON (ISA-L for gzip when installed). Only a
    regular file is opened (a FIFO blocks, a device never ends); a gzip stream is bounded
    by MAX_DECOMPRESSED and MAX_RATIO (see :class:`BoundedGzip`)."""
    try:
        regular_file(path)
    except BadInputError as exc:
        if "is a directory" in exc.message:
            raise BadInputError("is a directory, expected a trace file", path) from None
        raise
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise BadInputError(f"cannot open: {exc.strerror}", path) from None
    magic = raw.read(2)
    raw.seek(0)
    if magic != _GZIP_MAGIC:
        return raw
    try:
        from isal import igzip

        inner: BinaryIO = igzip.IGzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    except ImportError:  # pragma: no cover - isal is a soft dependency
        inner = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    return BoundedGzip(inner, raw, path)  # type: ignore[return-value]


class BoundedGzip(io.BufferedIOBase):
    """A decompressing stream that counts what comes out: past MAX_DECOMPRESSED bytes, or
    past RATIO_AFTER bytes at more than MAX_RATIO times the compressed bytes read, it raises
    LimitExceeded (a decompression bomb is stopped before it fills the memory)."""

    def __init__(self, inner: BinaryIO, raw: BinaryIO, path: Path) -> None:
        self.inner, self.raw, self.path = inner, raw, path
        self.out = 0
        self.max_out = MAX_DECOMPRESSED.bytes()
        self.ratio = MAX_RATIO.value()

    def _count(self, n: int) -> None:
        self.out += n
        if self.out > self.max_out:
            raise LimitExceeded(
                f"gzip data decompresses to more than {MAX_DECOMPRESSED.says()};"
                f" {MAX_DECOMPRESSED.hint()}", self.path)
        if self.out > RATIO_AFTER:
            packed = max(1, self.raw.tell())
            if self.out > self.ratio * packed:
                raise LimitExceeded(
                    f"gzip data decompresses {self.out / packed:.0f}x (a decompression bomb?"
                    f" {self.out / MB:.0f} MiB out of {packed / MB:.2f} MiB);"
                    f" {MAX_RATIO.hint()}", self.path)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while block := self.read(CHUNK_BYTES):
                parts.append(block)
            return b"".join(parts)
        data = self.inner.read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: object) -> int:
        """Fill ``buffer`` (up to its end or the stream's) in pieces of at most
        ``INFLATE_PIECE``: the decompressor hands out each piece as a fresh bytes object
        before it is copied in, and a piece that size comes from glibc's heap and is reused
        by the next one, where one object the size of the buffer (CHUNK_BYTES) got pages of
        its own (``sparse_columns.lean_memory``) that faulted in afresh for every block."""
        view = memoryview(buffer).cast("B")  # type: ignore[arg-type]
        done = 0
        while done < len(view):
            n = self.inner.readinto(view[done:done + INFLATE_PIECE])  # type: ignore[attr-defined]
            if not n:
                break
            self._count(n)
            done += n
        return done

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.raw.close()
            super().close()


def read_block(stream: BinaryIO, path: Path, size: int | None = None) -> bytes:
    """Read up to ``size`` bytes (default CHUNK_BYTES; -1: all), turning decompression
    failures into BadInputError."""
    try:
        return stream.read(CHUNK_BYTES if size is None else size)
    except LimitExceeded:
        raise
    except MemoryError:
        raise BadInputError("out of memory while reading", path) from None
    except EOFError:
        raise BadInputError("truncated gzip file (compressed stream ended early)", path) from None
    except Exception as exc:  # zlib.error, gzip.BadGzipFile, isal's IsalError, OSError...
        raise BadInputError(f"corrupt gzip data: {exc}", path) from None


@dataclass
class Layout:
    """The document split as ``head`` + ``[`` events ``]`` + ``tail``."""

    head: bytes = b""  # up to and including the ``:`` after "traceEvents"
    final: bytes = b""  # the last events, the closing ``]`` and the tail, not yet split


def _last_boundary(buf: bytes | bytearray, start: int) -> int:
    """Index of the ``}`` of the last ``} , {`` in ``buf[start:]``, or -1."""
    end = len(buf)
    while True:
        pos = buf.rfind(b"}", start, end)
        if pos < 0:
            return -1
        j = pos + 1
        n = len(buf)
        while j < n and buf[j] in _WS:
            j += 1
        if j < n and buf[j] == 0x2C:  # ','
            j += 1
            while j < n and buf[j] in _WS:
                j += 1
            if j < n and buf[j] == 0x7B:  # '{'
                return pos
        end = pos


def _strip_comma(buf: bytes) -> bytes:
    s = buf.lstrip(_WS)
    return s[1:] if s[:1] == b"," else s


def _first_byte(stream: BinaryIO, path: Path, buf: bytearray) -> tuple[bytes, bool]:
    """The first byte that is not whitespace (read on while there is only whitespace, up to
    MAX_HEAD), and whether the whole file is in ``buf``."""
    want = min(CHUNK_BYTES, MB)
    more = read_block(stream, path, want)
    buf += more
    complete = len(more) < want
    while not complete and not buf.lstrip(_WS):
        if len(buf) > MAX_HEAD.bytes():
            raise LimitExceeded(f"more than {MAX_HEAD.says()} of whitespace before the JSON"
                                f" text; {MAX_HEAD.hint()}", path)
        more = read_block(stream, path)
        buf += more
        complete = len(more) < CHUNK_BYTES
    return bytes(buf.lstrip(_WS)[:1]), complete


def _find_key(buf: bytearray, start: int) -> tuple[int, int]:
    """(end of the ``"traceEvents" : [`` found from ``start``, or -1; where the next search
    must begin). Linear: each byte is searched once, a key cut by the end of ``buf`` is
    searched again when more text came."""
    n = len(buf)
    pos = start
    while True:
        hit = buf.find(_EVENTS_KEY, pos)
        if hit < 0:
            return -1, max(start, n - len(_EVENTS_KEY) + 1)
        j = hit + len(_EVENTS_KEY)
        for want in (0x3A, 0x5B):  # ':' then '['
            while j < n and buf[j] in _WS:
                j += 1
            if j >= n:
                return -1, hit  # cut by the end of the buffer: look again with more text
            if buf[j] != want:
                break
            j += 1
        else:
            return j, j
        pos = hit + 1


def find_head(stream: BinaryIO, path: Path) -> tuple[bytes, bytes]:
    """Read until the ``"traceEvents": [`` key; return (head, rest of the buffer). The
    search is linear and stops after MAX_HEAD bytes; a file whose first byte is not ``{``
    is decided by that byte when it is larger than the first read."""
    buf = bytearray()
    first, complete = _first_byte(stream, path, buf)
    if not first:
        raise BadInputError("empty file", path)
    if first not in (b"{", b"[") and not complete:
        raise BadInputError(
            f"invalid JSON: a Kineto trace is a JSON object, and this file starts with"
            f" {first!r}", path)
    if first == b"[":
        raise BadInputError(
            "a bare JSON array is not a Kineto trace; this looks like an Ascend trace_view.json:"
            " pass its *_ascend_pt directory",
            path,
        )
    if first != b"{":
        raise SplitError("not a JSON object")
    limit = MAX_HEAD.bytes()
    scan = 0
    while True:
        end, scan = _find_key(buf, scan)
        if end >= 0:
            return bytes(buf[: end - 1]), bytes(buf[end:])
        if len(buf) > limit:
            raise LimitExceeded(
                f"no traceEvents array in the first {MAX_HEAD.says()}; {MAX_HEAD.hint()}",
                path)
        more = read_block(stream, path)
        if not more:
            raise SplitError("no traceEvents key")
        buf += more


def _events_start(buf: bytearray) -> int:
    """Index after the whitespace and the comma that separate pieces."""
    i, n = 0, len(buf)
    while i < n and buf[i] in _WS:
        i += 1
    return i + 1 if i < n and buf[i] == 0x2C else i


def iter_pieces(
    stream: BinaryIO, path: Path, rest: bytes, layout: Layout
) -> Iterator[tuple[bytes, bytes]]:
    """Yield (JSON array of whole events ``[{..},{..}]``, the separator text that preceded
    them); one copy each. The rest of the text stays in ``layout.final``. Joining the
    separators and the arrays' insides gives back the original text exactly."""
    buf = bytearray(rest)
    scan_from = 0
    limit = MAX_EVENT.bytes() + CHUNK_BYTES
    done = 0  # bytes of the array already yielded
    while True:
        more = read_block(stream, path)
        if not more:
            break
        buf += more
        if len(buf) < CHUNK_BYTES:
            continue
        cut = _last_boundary(buf, scan_from)
        if cut < 0:
            if len(buf) > limit:
                raise event_too_large(path, done)
            scan_from = max(0, len(buf) - 1)
            continue
        done += cut + 1
        start = _events_start(buf)
        if start <= cut:
            with memoryview(buf) as view:
                piece = b"".join((b"[", view[start : cut + 1], b"]"))
            yield piece, bytes(buf[:start])
        del buf[: cut + 1]
        scan_from = 0
    layout.final = bytes(buf)


def event_too_large(path: Path, offset: int) -> LimitExceeded:
    """The error of an event (or the text between two events) longer than MAX_EVENT."""
    return LimitExceeded(
        f"an event of traceEvents (or the text between two events) is longer than"
        f" {MAX_EVENT.says()}, after byte {offset} of the array; {MAX_EVENT.hint()}", path)


def join_arrays(first: bytes, sep: bytes, second: bytes) -> bytes:
    """Two adjacent pieces as one array, with the original text between them."""
    return b"".join((first[:-1], sep, second[1:]))


def tail_candidates(buf: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Possible splits of the last buffer into (events, text after the array's ``]``).

    Candidates for the closing ``]`` come from the end: the right one has nothing, or the
    ``}`` of the last event, before it and a tail that goes on closing the top-level object.
    The caller decodes both parts to confirm one.
    """
    end = len(buf)
    while True:
        pos = buf.rfind(b"]", 0, end)
        if pos < 0:
            return
        before = _strip_comma(buf[:pos]).rstrip(_WS)
        tail = buf[pos + 1 :]
        if (not before or before.endswith(b"}")) and tail.strip(_WS)[:1] in (b",", b"}"):
            yield before, tail
        end = pos
