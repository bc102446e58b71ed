"""Decode pieces of a Kineto ``traceEvents`` array into Arrow columns.

Only the fields tracekit needs are decoded; every other key is skipped by msgspec without
building objects. Communication and shape arguments stay raw (``msgspec.Raw``) and are decoded
only for the few events that need them (collectives, ``M`` metadata), right away, so that no
reference to the piece's buffer outlives it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_R = msgspec.Raw
# index of the event in traceEvents, in the side tables of communication args
RAW_IDX = "idx"
_NO = msgspec.Raw()  # an absent raw field (empty, falsy)


class Args(msgspec.Struct, gc=False):
    external_id: int | None = msgspec.field(default=None, name="External id")
    correlation: int | None = None
    py_id: int | None = msgspec.field(default=None, name="Python id")
    py_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    # communication metadata (record_param_comms, and kernels kineto enriched)
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    dtype: str | None = None
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    in_size: int | None = msgspec.field(default=None, name="In msg size")
    out_size: int | None = msgspec.field(default=None, name="Out msg size")
    in_split: str | list[int] | None = msgspec.field(default=None, name="In split size")
    out_split: str | list[int] | None = msgspec.field(default=None, name="Out split size")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    pg_id: int | str | None = msgspec.field(default=None, name="Process Group ID")
    pg_ranks: str | list[int] | None = msgspec.field(default=None, name="Process Group Ranks")
    rank: int | None = msgspec.field(default=None, name="Rank")
    src_rank: int | None = msgspec.field(default=None, name="Src Rank")
    dst_rank: int | None = msgspec.field(default=None, name="Dst Rank")
    seq: int | None = msgspec.field(default=None, name="Seq")
    comms_id: int | None = msgspec.field(default=None, name="Comms Id")
    rank_start: int | None = msgspec.field(default=None, name="Global rank start")
    rank_stride: int | None = msgspec.field(default=None, name="Global rank stride")
    # record_shapes (c10d / gloo ops) and M metadata: raw, decoded for the few that need them
    concrete: _R = msgspec.field(default=_NO, name="Concrete Inputs")
    input_type: _R = msgspec.field(default=_NO, name="Input type")
    input_dims: _R = msgspec.field(default=_NO, name="Input Dims")
    label: _R = msgspec.field(default=_NO, name="name")


COMM_FIELDS = Args.__struct_fields__[4:-4]
RAW_FIELDS = Args.__struct_fields__[-4:]


class LenientArgs(Args, gc=False):
    """Args whose communication fields accept any JSON type (coerced later)."""

    coll_name: Any = msgspec.field(default=None, name="Collective name")
    dtype: Any = None
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    in_size: Any = msgspec.field(default=None, name="In msg size")
    out_size: Any = msgspec.field(default=None, name="Out msg size")
    in_split: Any = msgspec.field(default=None, name="In split size")
    out_split: Any = msgspec.field(default=None, name="Out split size")
    group_size: Any = msgspec.field(default=None, name="Group size")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_id: Any = msgspec.field(default=None, name="Process Group ID")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    rank: Any = msgspec.field(default=None, name="Rank")
    src_rank: Any = msgspec.field(default=None, name="Src Rank")
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")
    seq: Any = msgspec.field(default=None, name="Seq")
    comms_id: Any = msgspec.field(default=None, name="Comms Id")
    rank_start: Any = msgspec.field(default=None, name="Global rank start")
    rank_stride: Any = msgspec.field(default=None, name="Global rank stride")


# names whose shape arguments are kept (gloo / c10d / functional collectives)
SHAPE_PREFIXES = ("c10d::", "gloo:", "_c10d_functional::", "c10d_functional::")

_Num = int | float | None
_Id = int | str | None


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    pid: _Id = None
    tid: _Id = None
    ts: _Num = None
    dur: _Num = None
    args: Args = msgspec.field(default_factory=Args)


class ExactEvent(Event, gc=False):
    """The exact, lenient variant (kineto_msgspec's second try on a block): ts/dur untyped
    so that a float_hook hands over the decimal text (a float time beyond 2**43 us, or with
    more than three decimals, keeps its nanoseconds: see exact_ns), and communication args
    of any type."""

    ts: Any = None
    dur: Any = None
    args: LenientArgs | None = msgspec.field(default_factory=LenientArgs)  # type: ignore[assignment]


DECODER = msgspec.json.Decoder(list[Event])
EXACT_DECODER = msgspec.json.Decoder(list[ExactEvent], float_hook=str)

# 2**43 us: below it a float with three decimals converts exactly (see exact_ns)
_EXACT_LIMIT = float(1 << 43)


def exact_ns(values: Sequence[Any]) -> pa.Array:
    """Microseconds -> exact integer nanoseconds.

    Ints are exact. A float ``x`` below 2**43 us that was written with at most three decimals
    (Kineto writes ``%.3f``) lies within 2**-11 of its decimal, so ``floor(x)`` is the
    decimal's integer part, ``x - floor(x)`` is exact, and ``round(1000 * (x - floor(x)))``
    recovers the three decimals exactly. Other floats raise :class:`InexactTime` so that the
    caller re-decodes the text with ``EXACT_DECODER``, whose floats arrive as decimal text.
    """
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        _check_numbers(values)
        arr = pa.array([v if v is None or type(v) is str else str(v) for v in values],
                       pa.string())
    if pa.types.is_integer(arr.type) or pa.types.is_null(arr.type):
        return pc.multiply_checked(arr.cast(pa.int64()), 1000)
    if pa.types.is_string(arr.type):
        return text_ns(arr, values)
    if not pa.types.is_floating(arr.type):
        _check_numbers(values)
    x = arr.to_numpy(zero_copy_only=False)
    return float_ns(x, np.isnan(x))  # nulls come back as NaN


def float_ns(x: np.ndarray, mask: np.ndarray) -> pa.Array:
    """The float rule of ``exact_ns`` on float microseconds ``x`` (``mask``: nulls)."""
    if np.any(np.abs(x[~mask]) >= _EXACT_LIMIT):
        raise InexactTime("timestamps beyond 2**43 us")
    x = np.where(mask, 0.0, x)
    whole = np.floor(x)
    ns = whole.astype(np.int64) * 1000 + np.rint((x - whole) * 1000.0).astype(np.int64)
    return pa.array(ns, mask=mask if mask.any() else None, type=pa.int64())


class InexactTime(Exception):
    """Float timestamps that cannot be converted exactly: re-decode the text."""


class NotATime(Exception):
    """A timestamp that is not a number (bad input); ``index`` within the piece."""

    def __init__(self, index: int, value: Any) -> None:
        self.index = index
        super().__init__(f"is a {type(value).__name__} ({value!r:.40}), expected a number")


def _check_numbers(values: Sequence[Any]) -> None:
    """Raise NotATime at the first value that is no number (decimal text counts)."""
    for i, v in enumerate(values):
        if isinstance(v, bool) or not (v is None or isinstance(v, int | float | str)):
            raise NotATime(i, v)
        if isinstance(v, str) and _NUMBER.match(v) is None:
            raise NotATime(i, v)


_NUMBER = re.compile(r"^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
_PLAIN = r"^-?\d+(\.\d*)?$"


def text_ns(arr: pa.Array, values: Sequence[Any]) -> pa.Array:
    """Decimal microsecond text (``"1712195495520871.123"``) -> exact int ns, vectorised;
    digits below the nanosecond round half up; exponent forms go through Decimal."""
    plain = pc.match_substring_regex(arr, _PLAIN)
    if not pc.all(pc.fill_null(plain, True)).as_py():
        _check_numbers(values)
        return pa.array([_decimal_ns(v) for v in values], type=pa.int64())
    neg = pc.fill_null(pc.starts_with(arr, "-"), False)
    body = pc.utf8_ltrim(arr, "-")
    parts = pc.split_pattern(body, ".", max_splits=1)
    whole = pc.list_element(parts, 0).cast(pa.int64())
    has_frac = pc.greater(pc.list_value_length(parts), 1)
    frac = pc.if_else(has_frac, pc.list_element(pc.if_else(has_frac, parts, pa.scalar(
        ["", ""], pa.list_(pa.string()))), 1), "")
    padded = pc.utf8_rpad(frac, 4, "0")
    milli = pc.utf8_slice_codeunits(padded, 0, 3).cast(pa.int64())
    up = pc.greater_equal(pc.utf8_slice_codeunits(padded, 3, 4), "5").cast(pa.int64())
    ns = pc.add(pc.add(pc.multiply_checked(whole, 1000), milli), up)
    return pc.if_else(neg, pc.negate(ns), ns)


_NS_MIN, _NS_MAX = -(1 << 63), (1 << 63) - 1


def first_out_of_range(values: Sequence[Any]) -> int:
    """Index of the first microsecond value whose nanoseconds do not fit in int64 (ints
    beyond 64 bits, 1e400, 1000-digit numbers, 9.3e15 us), or -1."""
    for i, v in enumerate(values):
        if v is None or isinstance(v, bool):
            continue
        try:
            dec = Decimal(v) if isinstance(v, int | str) else Decimal(repr(float(v)))
        except (ArithmeticError, ValueError, TypeError):
            return i
        if not dec.is_finite() or not _NS_MIN <= dec * 1000 <= _NS_MAX:
            return i
    return -1


def _decimal_ns(v: Any) -> int | None:
    """Exact ns of an int or decimal-text microsecond value (sub-ns digits round half up)."""
    if v is None:
        return None
    if isinstance(v, int):
        return v * 1000
    return int((Decimal(v) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


