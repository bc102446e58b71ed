"""Parse one Kineto file into raw columns.

One reader: the native accumulator (kineto_native_reader: the file in blocks, columns built in C),
which hands each block it declines to msgspec (kineto_msgspec). When the extension is not
built, ``TRACEKIT_NATIVE=0``, or the accumulator cannot settle the file (see kineto_native_reader),
msgspec reads the same blocks alone, in this process (``_blocks_by_msgspec``). Both give the
same columns; ``RawTrace.reader`` says which read the file.

A file whose structure the block splitter cannot follow (not a JSON object, no
``traceEvents`` array, no end of it: a truncated or broken file) is never read another way:
kineto_diagnose words why it is not a trace.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import BadInputError
from tracekit.limits import MAX_EVENT
from tracekit.parsers.kineto import read as R
from tracekit.parsers.kineto.block_columns import Piece
from tracekit.parsers.kineto.diagnose import unreadable
from tracekit.parsers.kineto.msgspec_reader import decode_buffer
from tracekit.parsers.kineto.native_reader import read_whole
from tracekit.parsers.kineto.raw_trace import MSGSPEC, RawTrace
from tracekit.parsers.kineto.sparse_columns import release_memory

__all__ = ["MSGSPEC", "RawTrace", "decode_buffer", "no_gc", "parse_file", "release_memory"]


@contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused (the parse builds no cycles; a collection would
    walk every object it decoded)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_file(path: Path, beside: Iterator[None] | None = None) -> RawTrace:
    """Parse one file (natively, or with msgspec when the native reader gives it up).
    ``beside``: steps of one-off work the caller needs later, done by this thread while
    the native scan runs in the worker (see kineto_native_reader)."""
    with no_gc():
        raw = read_whole(path, _meta, beside)
        if raw is None:
            try:
                raw = _blocks_by_msgspec(path)
            except R.SplitError as exc:
                raise unreadable(path, str(exc)) from None
    _validate(raw, path)
    release_memory(raw.raw.num_rows)
    return raw


# ------------------------------------------------------------------ msgspec, block by block


class _Pieces:
    """Blocks decoded in order; a block that is no JSON (cut at a false event boundary) is
    merged with the next one, and ``pending`` keeps what the last block left undecoded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pieces: list[Piece] = []
        self.count = 0  # events decoded so far: the index of the next block's first event
        self.pending = b""
        self.done = 0  # bytes of the blocks decoded so far (for the message of a long event)

    def add(self, buf: bytes, sep: bytes) -> None:
        data = R.join_arrays(self.pending, sep, buf) if self.pending else buf
        try:
            piece = decode_buffer(data, self.count, self.path)
        except msgspec.DecodeError:
            self.pending = data  # merge with the next block
            if len(data) > MAX_EVENT.bytes() + 2 * R.CHUNK_BYTES:
                raise R.event_too_large(self.path, self.done) from None
            return
        self.pending = b""
        self.done += len(data)
        self.pieces.append(piece)
        self.count += piece.n_events


def _blocks_by_msgspec(path: Path) -> RawTrace:
    from tracekit.parsers.kineto.events_table import concat_pieces

    layout = R.Layout()
    decoded = _Pieces(path)
    with R.open_trace(path) as stream:
        layout.head, rest = R.find_head(stream, path)
        for buf, sep in R.iter_pieces(stream, path, rest, layout):
            decoded.add(buf, sep)
    final = layout.final
    if decoded.pending:
        final = decoded.pending[1:-1] + final  # final starts with its own separator
    for events, tail in R.tail_candidates(final):
        try:
            meta = _meta(layout.head + b"[]" + tail)
            piece = (decode_buffer(b"[" + events + b"]", decoded.count, path)
                     if events.strip() else None)
        except (msgspec.DecodeError, ValueError):
            continue
        pieces = decoded.pieces + ([piece] if piece is not None else [])
        return RawTrace(*concat_pieces(pieces), meta, MSGSPEC)
    raise R.SplitError("could not find the end of traceEvents")


def _meta(doc: bytes) -> dict[str, Any]:
    """Top-level keys (traceEvents emptied); a second distributedInfo is kept apart."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out and k == "distributedInfo":
                out.setdefault("_distributedInfo_more", []).append(v)
            else:
                out[k] = v
        return out

    value: Any = None
    if doc.count(b'"distributedInfo"') <= 1:
        # no key to keep apart: msgspec gives the same dict faster (its pg_config rank lists
        # dominate a small file's header); anything it refuses goes to json below
        try:
            value = msgspec.json.decode(doc)
        except (msgspec.DecodeError, RecursionError):
            value = None
    if value is None:
        try:
            value = json.loads(doc, object_pairs_hook=pairs)
        except RecursionError:
            raise ValueError("nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


# ------------------------------------------------------------------ checks


def _validate(trace: RawTrace, path: Path) -> None:
    """Whole-file checks (each event was checked with its piece)."""
    if trace.n_events == 0:
        raise BadInputError("traceEvents is empty", path)
    if trace.raw.num_rows == 0:
        raise BadInputError("traceEvents has no timed (X or i) events", path)
