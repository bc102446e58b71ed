"""Parse one Kineto file into raw columns.

One reader: the native accumulator (kineto_whole: the whole file in one pass, columns built
in C), which hands each block it declines to msgspec (kineto_msgspec). When the extension is
not built, ``TRACEKIT_NATIVE=0``, or the accumulator cannot settle the file (see kineto_whole),
msgspec reads the whole file: a streaming pass over 8 MB pieces (kineto_pool), and the whole
document at once when the streaming pass cannot resolve the file's structure (which also
words the error of a broken file precisely). Both give the same columns; ``RawTrace.reader``
says which read the file.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import BadInputError
from tracekit.limits import TOO_DEEP
from tracekit.parsers.kineto import read as R
from tracekit.parsers.kineto.msgspec_reader import decode_buffer
from tracekit.parsers.kineto.native import accumulator
from tracekit.parsers.kineto.pool import PieceDecoder, usable_jobs
from tracekit.parsers.kineto.raw import MSGSPEC, RawTrace
from tracekit.parsers.kineto.spread import release_memory
from tracekit.parsers.kineto.table import concat_pieces
from tracekit.parsers.kineto.whole import read_whole

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


def parse_file(path: Path, jobs: int = 1) -> RawTrace:
    """Parse one file; ``jobs`` > 1 lets msgspec, when it reads the whole file, decode the
    pieces of a big file in worker processes (the native reader runs in this process: a
    block costs it less than sending the block to a worker and its columns back)."""
    with no_gc():
        raw = read_whole(path, _meta)
        if raw is None:
            try:
                raw = _fast(path, usable_jobs(1 if accumulator() else jobs))
            except R.SplitError:
                raw = _safe(path)
    _validate(raw, path)
    release_memory(raw.raw.num_rows)
    return raw


# ------------------------------------------------------------------ msgspec, streaming


def _fast(path: Path, jobs: int) -> RawTrace:
    layout = R.Layout()
    decoder = PieceDecoder(path)
    with R.open_trace(path) as stream:
        layout.head, rest = R.find_head(stream, path)
        decoder.run(R.iter_pieces(stream, path, rest, layout), jobs)
    final = layout.final
    if decoder.pending:
        final = decoder.pending[1:-1] + final  # final starts with its own separator
    for events, tail in R.tail_candidates(final):
        try:
            meta = _meta(layout.head + b"[]" + tail)
            piece = (decode_buffer(b"[" + events + b"]", decoder.count, path)
                     if events.strip() else None)
        except (msgspec.DecodeError, ValueError):
            continue
        pieces = decoder.pieces + ([piece] if piece is not None else [])
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


# ------------------------------------------------------------------ msgspec, whole document


class _Doc(msgspec.Struct):
    traceEvents: Any = None


def _safe(path: Path) -> RawTrace:
    data = R.read_all(path)
    stripped = data.lstrip(b" \t\r\n")
    if not stripped:
        raise BadInputError("empty file", path)
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise BadInputError(_json_message(exc, data), path) from None
    except RecursionError:
        raise BadInputError(TOO_DEEP, path) from None
    if isinstance(doc, list):
        raise BadInputError(
            "a bare JSON array is not a Kineto trace; this looks like an Ascend trace_view.json:"
            " pass its *_ascend_pt directory", path)
    if not isinstance(doc, dict):
        raise BadInputError(f"JSON {type(doc).__name__} is not a Kineto trace", path)
    events = doc.get("traceEvents")
    if events is None:
        raise BadInputError("JSON object has no traceEvents: not a Kineto trace", path)
    if not isinstance(events, list):
        raise BadInputError(f"traceEvents is a {type(events).__name__}, expected a list", path)
    body = msgspec.json.encode(events)
    piece = decode_buffer(body, 0, path) if events else None
    doc["traceEvents"] = []
    return RawTrace(*concat_pieces([piece] if piece else []), doc, MSGSPEC)


_NAN = re.compile(rb"-?(NaN|Infinity)")


def _json_message(exc: msgspec.DecodeError, data: bytes) -> str:
    text = str(exc)
    m = re.search(r"byte (\d+)", text)
    if m:
        pos = int(m.group(1))
        if _NAN.match(data, pos):
            return f"invalid JSON: NaN or Infinity is not a JSON number (byte {pos})"
        if "truncated" in text or pos >= len(data.rstrip()):
            return f"invalid JSON: the document ends early (byte {pos}); truncated file?"
    return f"invalid JSON: {text}"


# ------------------------------------------------------------------ checks


def _validate(trace: RawTrace, path: Path) -> None:
    """Whole-file checks (each event was checked with its piece)."""
    if trace.n_events == 0:
        raise BadInputError("traceEvents is empty", path)
    if trace.raw.num_rows == 0:
        raise BadInputError("traceEvents has no timed (X or i) events", path)
