"""Reading Ascend export files: JSON documents, exact decimal times, one-line errors.

Ascend writes times as decimal text in microseconds (trace_view ``ts`` strings with ns
precision, kernel_details ``Start Time(us)`` with a trailing TAB) or as JSON numbers in
milliseconds (communication.json). They are converted from the *text*, never through a float,
so that a timestamp of 1.7e15 us keeps its nanoseconds (TRACE_FORMATS.md B.5, B.7, B.8).
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import BadInputError
from tracekit.limits import MAX_ASCEND_JSON, TOO_DEEP, read_limited

# at most 15 integer digits take the vectorised path (1e15 us = 1e18 ns fits int64); longer
# text goes through number_to_ns, which gives None beyond int64
_DECIMAL_RE = r"^(?P<int>[0-9]{1,15})(?:\.(?P<frac>[0-9]*))?$"
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes (a FIFO or device is refused before it is opened), at most
    MAX_ASCEND_JSON."""
    try:
        return read_limited(path, MAX_ASCEND_JSON, "export file")
    except FileNotFoundError:
        raise BadInputError("no such file", path) from None
    except IsADirectoryError:
        raise BadInputError("is a directory, expected a file", path) from None
    except OSError as exc:
        raise BadInputError(f"cannot read: {exc.strerror}", path) from None


def load_json(path: Path, expect: type, what: str) -> Any:
    """Parse a small JSON document with exact decimals (``Decimal``); check its top-level type."""
    data = read_bytes(path)
    if not data.strip():
        raise BadInputError(f"empty file, expected {what}", path)
    try:
        doc = json.loads(data, parse_float=Decimal)
    except UnicodeDecodeError:
        raise BadInputError(f"not UTF-8 text, expected {what}", path) from None
    except RecursionError:
        raise BadInputError(f"{TOO_DEEP}, expected {what}", path) from None
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}), expected {what}",
            path,
        ) from None
    if not isinstance(doc, expect):
        raise BadInputError(f"expected {what}, got a JSON {_json_kind(doc)}", path)
    return doc


def _json_kind(doc: Any) -> str:
    if isinstance(doc, dict):
        return "object"
    if isinstance(doc, list):
        return "array"
    if isinstance(doc, str):
        return "string"
    return "number" if isinstance(doc, int | Decimal) else "value"


def number_to_ns(value: Any, unit_ns: int) -> int | None:
    """An exact JSON number (int / Decimal / numeric text) in a unit of ``unit_ns`` -> int ns."""
    if value is None or isinstance(value, bool):
        return None
    try:
        dec = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not dec.is_finite() or abs(dec.adjusted()) > 30:
        return None
    ns = int((dec * unit_ns).to_integral_value(rounding="ROUND_HALF_EVEN"))
    return ns if _I64_MIN <= ns <= _I64_MAX else None  # beyond int64: null, as unreadable


def text_to_ns(text: pa.Array, unit_ns: int = 1000) -> pa.Array:
    """Decimal text column (``"1736408883732241.564"``, ``"12.5\\t"``) -> int64 ns, exactly.

    ``unit_ns`` is the size of one unit of the text in ns (1000 for microseconds). Blank or
    ``N/A`` cells become null; exponent notation goes through Decimal (rare, slow path).
    """
    s = pc.utf8_trim_whitespace(pc.cast(text, pa.string()))
    s = pc.utf8_trim(s, characters='"')
    digits = len(str(unit_ns)) - 1  # decimals that still count whole ns
    parts = pc.extract_regex(s, _DECIMAL_RE)
    ok = pc.fill_null(pc.is_valid(parts), False)
    whole = pc.cast(pc.if_else(ok, parts.field("int"), pa.scalar(None, pa.string())), pa.int64())
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(parts.field("frac"), digits + 1, "0"), 0,
                                   digits + 1)
    frac_n = pc.cast(pc.if_else(ok, frac, pa.scalar(None, pa.string())), pa.int64())
    # round half up on the first dropped digit
    ns = pc.add(pc.multiply(whole, unit_ns), pc.divide(pc.add(frac_n, 5), 10))
    if pc.all(pc.or_(ok, pc.or_(pc.is_null(s), pc.equal(s, "")))).as_py() is not False:
        return ns
    slow = [
        number_to_ns(t, unit_ns) if (t and t.upper() != "N/A") else None
        for t in pc.if_else(ok, pa.scalar(None, pa.string()), s).to_pylist()
    ]
    return pc.if_else(ok, ns, pa.array(slow, pa.int64()))


def ms_to_ns(value: Any) -> int | None:
    return number_to_ns(value, 1_000_000)


def us_to_ns(value: Any) -> int | None:
    return number_to_ns(value, 1000)


def mb_to_bytes(value: Any) -> int | None:
    """Transit Size(MB): decimal MB (1e6 bytes, TRACE_FORMATS.md B.5)."""
    return number_to_ns(value, 1_000_000)


def as_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
