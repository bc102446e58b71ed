"""A piece of ``traceEvents`` -> Piece through the native scanner, with the same result as
``decode_piece(DECODER.decode(doc))`` (kineto_piece) but without one Python object per event.

Only the events whose args carry communication or record_shapes keys are decoded by msgspec
(their args spans, joined into one array). Whenever the result could differ from the msgspec
path (the scanner declines, a flagged args object fails strict validation, a timestamp needs
the exact decimal path, a bad event whose error the msgspec path words, a string pid on a
thread name) this returns None and the caller takes the msgspec path for the piece.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.parsers import kineto_native as N
from tracekit.parsers import kineto_scan_c as C
from tracekit.parsers.kineto_decode import Args, InexactTime, float_ns
from tracekit.parsers.kineto_piece import (
    _EMPTY_ARGS,
    TIMED,
    BadEvent,
    Piece,
    _any_prefix,
    _check,
    _codes_matching,
    _decode_raw,
    _one_of,
    _threads,
    comm_table,
)

_ARGS = msgspec.json.Decoder(list[Args])
_COL = {name: i for i, name in enumerate(C.INT_COLUMNS)}
_NO_COMM = (None, None, None)


class _Decline(Exception):
    """The native result might differ from the msgspec path's: use that path."""


class _Values:
    """``values[i]`` of a dictionary column (only read for a few rows)."""

    def __init__(self, col: pa.DictionaryArray) -> None:
        self.col = col
        self.values: list[Any] | None = None

    def __getitem__(self, i: int) -> Any:
        if self.values is None:
            self.values = [*self.col.dictionary.to_pylist(), None]
            self.codes = np.asarray(self.col.indices.fill_null(-1), dtype=np.int64)
        return self.values[self.codes[i]]


class _Ids:
    """``ids[i]`` as the msgspec path has it: an int or None (a string declines)."""

    def __init__(self, values: np.ndarray, state: np.ndarray) -> None:
        self.values, self.state = values, state

    def __getitem__(self, i: int) -> int | None:
        if self.state[i] == C.STRING:
            raise _Decline
        return int(self.values[i]) if self.state[i] == C.INT else None


def native_piece(doc: bytes, start: int) -> Piece | None:
    """The Piece of ``doc`` (a JSON array of events, the first at index ``start``), or None
    when the msgspec path must decide."""
    s = N.scan(doc)
    if s is None:
        return None
    try:
        return _build(s, doc, start)
    except (_Decline, InexactTime, BadEvent, msgspec.ValidationError, msgspec.DecodeError):
        return None


def _ints(s: N.Scanned, col: str) -> pa.Array:
    c = _COL[col]  # a copy: pyarrow would keep the whole scratch block alive
    return pa.array(s.ival[c].copy(), mask=s.state[c] != C.INT, type=pa.int64())


def _times(s: N.Scanned, col: str) -> pa.Array:
    """As exact_ns: all ints (or nulls) -> exact; any float -> the float rule."""
    c = _COL[col]
    state = s.state[c]
    if not (state == C.FLOAT).any():
        return pa.array(s.ival[c] * 1000, mask=state != C.INT, type=pa.int64())
    return float_ns(s.dval[C.FLOAT_COLUMNS.index(col)], state == C.NULL)


def _flagged_args(s: N.Scanned, doc: bytes) -> tuple[np.ndarray, list[Args]]:
    rows = np.flatnonzero(s.arg_len)
    if not rows.size:
        return rows, []
    view = memoryview(doc)
    spans = [view[a : a + n] for a, n in zip(s.arg_start[rows].tolist(),
                                             s.arg_len[rows].tolist(), strict=True)]
    return rows, _ARGS.decode(b"".join((b"[", b",".join(spans), b"]")))


def _build(s: N.Scanned, doc: bytes, start: int) -> Piece:
    n = s.n
    ph_col = s.strings[0].dictionary_encode()
    name_col = s.strings[1].dictionary_encode()
    ts_col, dur_col = _times(s, "ts"), _times(s, "dur")
    _check(ph_col, ts_col, dur_col, _Values(name_col), start)
    table = pa.table({
        S.EVENT_ID: pa.array(np.arange(n, dtype=np.int64) + start),
        S.NAME: name_col,
        S.CATEGORY: s.strings[2].dictionary_encode(),
        S.PID: _ints(s, "pid"),
        S.TID: _ints(s, "tid"),
        S.TS_NS: ts_col,
        S.DUR_NS: dur_col,
        S.EXTERNAL_ID: _ints(s, "external_id"),
        S.CORRELATION: _ints(s, "correlation"),
        S.PY_ID: _ints(s, "py_id"),
        S.PY_PARENT_ID: _ints(s, "py_parent_id"),
    })
    rows, decoded = _flagged_args(s, doc)
    args: list[Args] = [_EMPTY_ARGS] * n
    for i, a in zip(rows.tolist(), decoded, strict=True):
        args[i] = a
    timed = _codes_matching(ph_col, _one_of(TIMED))
    meta = _codes_matching(ph_col, _one_of(("M",)))
    shapes = _codes_matching(name_col, _any_prefix) & timed
    comm_rows = [i for i in rows.tolist() if timed[i] and
                 (args[i].coll_name, args[i].in_nelems, args[i].in_size) != _NO_COMM]
    names = _Values(name_col)
    threads = _threads(meta, names, _Ids(s.ival[_COL["pid"]], s.state[_COL["pid"]]),
                       _Ids(s.ival[_COL["tid"]], s.state[_COL["tid"]]), args)
    if not timed.all():
        table = table.filter(pa.array(timed))
    return Piece(
        start, n, table,
        comm=comm_table(args, comm_rows, start),
        extra=[(start + i, names[i], _decode_raw(args[i]))
               for i in np.flatnonzero(shapes).tolist()],
        threads=threads,
    )
