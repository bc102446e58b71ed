"""One decoded piece of ``traceEvents`` -> Arrow columns of its timed (``X`` / ``i``) events.

Per piece: the events are checked (ph, ts, dur present and numeric), the columns built and
filtered to the timed events, and the few things that need more than columns are pulled out
as small side data: communication args (``comm``), record_shapes args of c10d / gloo ops
(``extra``) and thread names from ``M`` events (``threads``). Event indices are relative to
``start``; ``shift_piece`` moves a piece decoded in a worker process into place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from operator import attrgetter
from typing import Any, Protocol

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.decode import (
    COMM_FIELDS,
    RAW_FIELDS,
    RAW_IDX,
    SHAPE_PREFIXES,
    Args,
    Event,
    NotATime,
    exact_ns,
    first_out_of_range,
)
from tracekit.parsers.kineto.dict_codes import masked

TIMED = ("X", "i")
_NEEDS_TS = ("X", "i", "s", "f")  # not M: Chrome trace format makes its ts optional
# every field decode_piece reads: the event's, its ids and the keys that mark comm args
_ALL_FIELDS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "args.external_id",
               "args.correlation", "args.py_id", "args.py_parent_id", "args.coll_name",
               "args.in_nelems", "args.in_size")
_GET_ALL = attrgetter(*_ALL_FIELDS)
_NO_COMM = (None, None, None)
_FIELD_GETTERS = {f: attrgetter(f) for f in COMM_FIELDS}
_EMPTY_ARGS = Args()
COMM_TYPES: dict[str, pa.DataType] = {
    f: (pa.string() if f in ("coll_name", "dtype", "in_split", "out_split", "pg_name",
                             "pg_desc", "pg_id", "pg_ranks")
        else pa.uint64() if f == "comms_id" else pa.int64())
    for f in COMM_FIELDS
}


class Indexed(Protocol):
    """What is read of a column for a few rows: ``values[i]``."""

    def __getitem__(self, i: int) -> Any: ...


class BadEvent(ValueError):
    """An event that is not a valid trace event; the message names it."""


@dataclass
class Piece:
    """Timed events of one piece (with EVENT_ID), plus side data; see the module doc."""

    start: int  # index of the piece's first event in traceEvents
    n_events: int  # events in the piece, all phases
    columns: pa.Table
    comm: pa.Table | None = None  # RAW_IDX + COMM_FIELDS
    extra: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    threads: list[tuple[Any, Any, str]] = field(default_factory=list)


def shift_piece(piece: Piece, offset: int) -> Piece:
    """The same piece with its event indices moved by ``offset`` (decoded at index 0)."""
    if offset == 0:
        return piece
    cols = piece.columns
    i = cols.schema.get_field_index(S.EVENT_ID)
    cols = cols.set_column(i, S.EVENT_ID, pc.add(cols.column(S.EVENT_ID), offset))
    comm = piece.comm
    if comm is not None:
        j = comm.schema.get_field_index(RAW_IDX)
        comm = comm.set_column(j, RAW_IDX, pc.add(comm.column(RAW_IDX), offset))
    extra = [(idx + offset, name, args) for idx, name, args in piece.extra]
    return Piece(piece.start + offset, piece.n_events, cols, comm, extra, piece.threads)


def _columns(events: Sequence[Event]) -> list[Sequence[Any]]:
    """The values of _ALL_FIELDS, one sequence per field, read in one pass over the events
    (measured: much faster than one pass per field, which reloads every event's memory)."""
    if not events:
        return [()] * len(_ALL_FIELDS)
    try:
        return list(zip(*map(_GET_ALL, events), strict=True))
    except AttributeError:  # "args": null (accepted by the lenient decoder only)
        fixed = [e if e.args is not None else msgspec.structs.replace(e, args=_EMPTY_ARGS)
                 for e in events]
        return list(zip(*map(_GET_ALL, fixed), strict=True))


def _strings(values: Sequence[str | None]) -> pa.DictionaryArray:
    """Dictionary-encoded strings: a plain string array encoded in C++ (measured about 6x
    faster than building a dictionary array from Python strings)."""
    return pa.array(values, pa.string()).dictionary_encode()


def _ids(values: Sequence[Any]) -> pa.Array:
    """int64 ids; values that are no int64 (strings, ints beyond 64 bits) become null."""
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([v if type(v) is int and _I64_MIN <= v <= _I64_MAX else None
                         for v in values], type=pa.int64())


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _times(values: Sequence[Any], key: str, start: int) -> pa.Array:
    try:
        return exact_ns(values)
    except NotATime as exc:
        raise BadEvent(f"event {start + exc.index}: {key} {exc}") from None
    except (OverflowError, pa.ArrowInvalid, ArithmeticError):
        i = max(0, first_out_of_range(values))
        raise BadEvent(
            f"event {start + i}: {key} {str(values[i])[:40]} us is out of range (its"
            " nanoseconds do not fit in 64 bits)") from None


def _codes_matching(col: pa.DictionaryArray, pred: Callable[[pa.Array], Any]) -> np.ndarray:
    """Boolean mask of the rows whose dictionary value satisfies ``pred`` (evaluated once per
    distinct value)."""
    hit = V.numpy(V.fill_null(pred(col.dictionary), False))
    codes = np.flatnonzero(hit)
    if not codes.size:
        return np.zeros(len(col), dtype=bool)
    return np.isin(V.numpy(V.fill_null(col.indices, -1)), codes)


def _one_of(values: Sequence[str]) -> Callable[[pa.Array], Any]:
    return lambda d: pc.is_in(d, V.strings(values))


def _any_prefix(dictionary: pa.Array) -> pa.Array:
    result = pc.starts_with(dictionary, SHAPE_PREFIXES[0])
    for p in SHAPE_PREFIXES[1:]:
        result = pc.or_(result, pc.starts_with(dictionary, p))
    return result


def _check(ph: pa.DictionaryArray, ts: pa.Array, dur: pa.Array, names: Indexed,
           start: int) -> None:
    """ph on every event, ts on timed / metadata / flow events, dur on X events."""
    if ph.null_count:
        raise BadEvent(f"event {start + int(pc.index(pc.is_null(ph), True).as_py())} has no ph")
    for col, key, phases in ((ts, "ts", _NEEDS_TS), (dur, "dur", ("X",))):
        bad = _codes_matching(ph, _one_of(phases)) & V.numpy(col.is_null())
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise BadEvent(f"event {start + i} ({names[i]!r}, ph {ph[i].as_py()}) has no {key}")


def decode_piece(events: Sequence[Event], start: int) -> Piece:
    """Columns of the timed events of one decoded piece (from DECODER or EXACT_DECODER)."""
    (ph, name, cat, pid, tid, ts, dur, args, ext, corr, py_id, py_parent,
     *comm_keys) = _columns(events)
    ph_col = _strings(ph)
    ts_col, dur_col = _times(ts, "ts", start), _times(dur, "dur", start)
    _check(ph_col, ts_col, dur_col, name, start)
    table = pa.table({
        S.EVENT_ID: pa.array(np.arange(len(events), dtype=np.int64) + start),
        S.NAME: _strings(name),
        S.CATEGORY: _strings(cat),
        S.PID: _ids(pid),
        S.TID: _ids(tid),
        S.TS_NS: ts_col,
        S.DUR_NS: dur_col,
        S.EXTERNAL_ID: _ids(ext),
        S.CORRELATION: _ids(corr),
        S.PY_ID: _ids(py_id),
        S.PY_PARENT_ID: _ids(py_parent),
    })
    timed = _codes_matching(ph_col, _one_of(TIMED))
    meta = _codes_matching(ph_col, _one_of(("M",)))
    shapes = _codes_matching(table.column(S.NAME).chunk(0), _any_prefix) & timed
    if not timed.all():
        table = table.filter(pa.array(timed))
    return Piece(
        start, len(events), table,
        comm=_comm_args(args, comm_keys, timed, start),
        extra=[(start + i, name[i], _decode_raw(args[i])) for i in np.flatnonzero(shapes).tolist()],
        threads=_threads(meta, name, pid, tid, args),
    )


def _threads(meta: np.ndarray, name: Indexed, pid: Indexed, tid: Indexed,
             args: Sequence[Args]) -> list[tuple[Any, Any, str]]:
    out = []
    for i in np.flatnonzero(meta).tolist():
        if name[i] == "thread_name" and args[i].label:
            label = _decode_raw(args[i]).get("label")
            if isinstance(label, str):
                out.append((pid[i], tid[i], label.strip()))
    return out


def _comm_args(args: Sequence[Args], keys: Sequence[Sequence[Any]], timed: np.ndarray,
               start: int) -> pa.Table | None:
    """Raw communication fields of the timed events that have them (RAW_IDX + COMM_FIELDS);
    ``keys``: the collective name, In msg nelems and In msg size of every event."""
    has = map(_NO_COMM.__ne__, zip(*keys, strict=True))
    rows = [i for i in compress(range(len(args)), has) if timed[i]]
    return comm_table(args, rows, start)


def comm_table(args: Sequence[Args], rows: Sequence[int], start: int) -> pa.Table | None:
    """COMM_FIELDS of ``args`` at ``rows`` (RAW_IDX: the rows shifted by ``start``)."""
    if not rows:
        return None
    picked = args if rows == range(len(args)) else [args[i] for i in rows]
    cols: dict[str, Any] = {RAW_IDX: masked(np.asarray(rows, dtype=np.int64) + start, None,
                                            pa.int64())}
    for f, getter in _FIELD_GETTERS.items():
        # one pass per field: cheaper than transposing one tuple per event
        values = list(map(getter, picked))
        kind = COMM_TYPES[f]
        try:
            cols[f] = pa.array(values, type=kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            cols[f] = pa.array([_coerce(v, kind) for v in values], type=kind)
    return pa.table(cols)


def _coerce(value: Any, kind: pa.DataType) -> Any:
    """A lenient-decoder value as the column's type (None when it cannot be)."""
    if value is None:
        return None
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, int):
        lo, hi = ((0, 1 << kind.bit_width) if pa.types.is_unsigned_integer(kind)
                  else (-(1 << (kind.bit_width - 1)), 1 << (kind.bit_width - 1)))
        return value if lo <= value < hi else None  # beyond the column's type: no value
    return None


def _decode_raw(a: Args) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in RAW_FIELDS:
        raw = getattr(a, f)
        if raw:
            out[f] = _decode_value(bytes(raw))
    return out


@lru_cache(maxsize=4096)
def _decode_value(raw: bytes) -> Any:
    """A raw argument's value (None when it is not JSON); memoised: shape arguments repeat.
    Callers must not modify the result."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
