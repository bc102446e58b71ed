"""Parse one Kineto file into raw columns.

First the native accumulator (kineto_whole: the whole file in one pass, columns built in C).
When it gives the file up (unusual text, bad input, no C compiler, ``TRACEKIT_NATIVE=0``), the
piece path: a streaming pass over 8 MB pieces, each through the native piece scanner
(kineto_fast) or msgspec (kineto_piece), and a safe whole-document path used when the
streaming pass cannot resolve the file's structure (and to word the error of a broken file
precisely). All of them give the same columns.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from tracekit.errors import BadInputError
from tracekit.limits import TOO_DEEP
from tracekit.parsers import kineto_read as R
from tracekit.parsers.kineto_decode import DECODER, EXACT_DECODER, InexactTime
from tracekit.parsers.kineto_fast import native_piece
from tracekit.parsers.kineto_native import available as native_available
from tracekit.parsers.kineto_native import release_scratch
from tracekit.parsers.kineto_ops import ShapeOps
from tracekit.parsers.kineto_piece import BadEvent, Piece, decode_piece
from tracekit.parsers.kineto_pool import PieceDecoder, usable_jobs
from tracekit.parsers.kineto_spread import release_memory
from tracekit.parsers.kineto_table import concat_pieces
from tracekit.parsers.kineto_whole import read_whole


@dataclass
class RawTrace:
    """Columns of the timed events, the side data of the few that need more, the number of
    events of every phase, and the top-level keys other than traceEvents."""

    raw: pa.Table  # timed events: EVENT_ID and the raw columns
    comm: pa.Table | None
    extra: ShapeOps
    threads: list[tuple[Any, Any, str]]
    n_events: int
    meta: dict[str, Any]

    def detach_side(self) -> list[Any]:
        """[comm, extra], handed over like ``detach_raw``."""
        side = [self.comm, self.extra]
        self.comm, self.extra = None, ShapeOps()
        return side

    def detach_raw(self) -> pa.Table:
        """The timed-event table, handed over: this object lets go of it, so that columns the
        caller does not keep can be freed early."""
        raw, self.raw = self.raw, pa.table({})
        return raw


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
    """Parse one file; ``jobs`` > 1 decodes the pieces of a big file in worker processes,
    unless the native scanner is available: then a piece costs less than sending it to a
    worker and its columns back (measured on a 400 MB rank, 2 cores: 4.6-7.1 s wall serial,
    8.0-8.8 s with 2 workers), and the pieces are decoded in this process."""
    if native_available():
        jobs = 1
    with no_gc():
        raw = read_whole(path, _meta)
        if raw is None:
            try:
                raw = _fast(path, usable_jobs(jobs))
            except R.SplitError:
                raw = _safe(path)
    release_scratch()
    _validate(raw, path)
    release_memory(raw.raw.num_rows)
    return raw


# ------------------------------------------------------------------ fast, streaming path


def decode_buffer(doc: bytes, start: int, path: Path) -> Piece:
    """Decode a JSON array of events; the first has index ``start``.

    Raises msgspec.DecodeError when the text is not JSON (a false boundary), BadInputError
    when it is JSON but not valid events."""
    piece = native_piece(doc, start)
    if piece is not None:
        return piece
    try:
        return decode_piece(DECODER.decode(doc), start)
    except (msgspec.ValidationError, InexactTime):
        pass  # unusual arg types or huge float timestamps: the exact, lenient decoder
    except BadEvent as exc:
        raise BadInputError(str(exc), path) from None
    except RecursionError:
        raise BadInputError(f"{TOO_DEEP} in traceEvents (from event {start} on)",
                            path) from None
    try:
        return decode_piece(EXACT_DECODER.decode(doc), start)
    except msgspec.ValidationError as exc:
        raise BadInputError(_validation_message(exc, start), path) from None
    except (BadEvent, InexactTime) as exc:
        raise BadInputError(str(exc), path) from None
    except RecursionError:  # pragma: no cover - the first decoder recursed as deep
        raise BadInputError(f"{TOO_DEEP} in traceEvents (from event {start} on)",
                            path) from None


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
        return RawTrace(*concat_pieces(pieces), meta)
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


# ------------------------------------------------------------------ safe path


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
    return RawTrace(*concat_pieces([piece] if piece else []), doc)


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


_PATH = re.compile(r"`\$\[(\d+)\]\.?([^`]*)`")


def _validation_message(exc: msgspec.ValidationError, start: int) -> str:
    text = str(exc)
    m = _PATH.search(text)
    if m is None:
        return f"wrong type in traceEvents: {text}"
    where = f"event {start + int(m.group(1))}"
    fld = m.group(2).replace("args.", "args ").strip(".")
    what = text[: m.start()].removesuffix(" - at ").replace("`", "")
    what = what[:1].lower() + what[1:]
    return f"{where}: {fld}: {what}" if fld else f"{where}: {what}"


# ------------------------------------------------------------------ checks


def _validate(trace: RawTrace, path: Path) -> None:
    """Whole-file checks (each event was checked with its piece)."""
    if trace.n_events == 0:
        raise BadInputError("traceEvents is empty", path)
    if trace.raw.num_rows == 0:
        raise BadInputError("traceEvents has no timed (X or i) events", path)
