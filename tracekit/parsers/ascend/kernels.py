"""kernel_details.csv -> EVENTS columns of one rank's device tasks (TRACE_FORMATS.md B.8).

Used when the export has no trace_view.json and no database (the 2023 layout). Facts:

* headers are verbatim English (``Name, Type, Accelerator Core, Start Time(us),
  Duration(us), Stream ID, Task ID``...; ``Device_id`` and ``Step Id`` only in some versions);
* ``Start Time(us)`` carries a trailing TAB (``"1736408883704643.212\\t"``);
* HCCL rows: ``Accelerator Core = HCCL``, ``Type = hcom_allReduce_``, ``Task ID`` and
  ``Stream ID`` = ``N/A`` and N/A in the metric columns;
* shapes are quoted and may hold newlines; rows may be one metric column short (2023 files),
  but a last row cut short without a final newline means the file was truncated.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend.io import read_bytes, text_to_ns
from tracekit.schema import Kind

NAME = "Name"
TYPE = "Type"
CORE = "Accelerator Core"
START = "Start Time(us)"
DURATION = "Duration(us)"
STREAM = "Stream ID"
DEVICE = "Device_id"
REQUIRED = (NAME, TYPE, CORE, START, DURATION)
_KERNEL_CORES = r"^(AI_|MIX_|DSA|AI_CPU)"


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInputError("not UTF-8 text, expected kernel_details CSV", path) from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise BadInputError(f"malformed CSV ({exc})", path) from None
    if not rows:
        raise BadInputError("empty file, expected a kernel_details CSV header", path)
    header = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise BadInputError(f"not a kernel_details CSV: no column(s) {', '.join(missing)}", path)
    body = [r for r in rows[1:] if r]
    need = max(header.index(c) for c in REQUIRED) + 1
    for i, r in enumerate(body):
        # real exports have rows one metric short; a row cut before the times is not usable
        if len(r) > len(header) or len(r) < need:
            raise BadInputError(
                f"row {i + 2} has {len(r)} fields, the header has {len(header)}"
                " (truncated file?)", path)
    if body and len(body[-1]) < len(header) and not text.endswith(("\n", "\r")):
        raise BadInputError(
            f"row {len(body) + 1} is cut short and the file ends without a newline"
            " (truncated file)", path)
    body = [r + [""] * (len(header) - len(r)) for r in body]
    return header, body


def read_kernel_details(path: Path) -> dict[str, pa.Array]:
    header, body = _rows(path)
    col = {h: pa.array([r[i] for r in body], pa.string()) for i, h in enumerate(header)}

    def na(arr: pa.Array) -> pa.Array:
        trimmed = pc.utf8_trim_whitespace(arr)
        bad = pc.or_(pc.equal(trimmed, "N/A"), pc.equal(trimmed, ""))
        return pc.if_else(bad, pa.scalar(None, pa.string()), trimmed)

    ts = text_to_ns(na(col[START]))
    dur = text_to_ns(na(col[DURATION]))
    if ts.null_count or dur.null_count:
        bad = pc.index(pc.or_(pc.is_null(ts), pc.is_null(dur)), True).as_py()
        raise BadInputError(f"row {bad + 2}: no readable {START} / {DURATION}", path)
    core = na(col[CORE])
    names = na(col[NAME])
    is_op = pc.fill_null(pc.and_(pc.equal(core, "HCCL"), pc.starts_with(names, "hcom_")), False)
    kernel = pc.fill_null(pc.match_substring_regex(core, _KERNEL_CORES), False)
    memcpy = pc.fill_null(pc.match_substring(pc.utf8_upper(names), "MEMCPY"), False)
    kind = pc.if_else(is_op, Kind.KERNEL, pc.if_else(
        memcpy, Kind.MEMCPY, pc.if_else(kernel, Kind.KERNEL, Kind.OTHER)))
    stream = pc.cast(na(col[STREAM]), pa.int64())
    n = len(ts)
    device = (pc.cast(na(col[DEVICE]), pa.int32()) if DEVICE in col
              else pa.nulls(n, pa.int32()))
    return {
        S.PID: pc.cast(device, pa.int64()),
        S.TID: stream,
        S.DEVICE: device,
        S.STREAM: stream,
        S.THREAD: pc.binary_join_element_wise("Stream ", pc.cast(stream, pa.string()), ""),
        S.TS_NS: ts,
        S.DUR_NS: dur,
        S.NAME: names,
        S.CATEGORY: pa.array(["kernel_details"] * n, pa.string()),
        S.KIND: kind,
        "_op_type": na(col[TYPE]),
        "_is_op": is_op,
    }
