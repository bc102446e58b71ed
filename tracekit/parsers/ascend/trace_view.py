"""trace_view.json -> EVENTS columns of one rank (TRACE_FORMATS.md B.7).

Facts this reader rests on:

* the file is a bare JSON array of chrome-trace events (not ``{"traceEvents": ...}``);
* ``ts`` is a string with ns precision, ``dur`` a float in microseconds: both are read from
  their JSON text, so the nanoseconds are exact;
* processes are known by their ``M process_name`` event, never by the pid value: ``Python``
  (cpu_op, python_function, enqueue/dequeue), ``CANN`` (AscendCL@, Node@launch, Hccl@),
  ``Ascend Hardware`` (device tasks, thread "Stream N", ``args.Task Type``), ``HCCL`` (one
  ``hcom_*`` big op per collective on "Group N Communication", plane tasks on "Plane N"),
  ``Overlap Analysis`` and counters;
* ``args.connection_id`` links a CANN launch, its hardware tasks and its HCCL op; the
  ``async_npu`` flows (``torch_to_npu``) link the launching cpu_op to the device event.

Counter (``C``), metadata and flow events are not rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend.io import read_bytes, text_to_ns
from tracekit.parsers.ascend.links import call_sites, launch_links
from tracekit.schema import Kind

PROC_PYTHON = "Python"
PROC_CANN = "CANN"
PROC_HW = "Ascend Hardware"
PROC_HCCL = "HCCL"
DEVICE_PROCS = (PROC_HW, PROC_HCCL, "Overlap Analysis")
_PY_KINDS = {
    "cpu_op": Kind.CPU_OP,
    "python_function": Kind.PYTHON,
    "enqueue": Kind.RUNTIME,
    "dequeue": Kind.RUNTIME,
    "user_annotation": Kind.ANNOTATION,
}
# torch_npu writes the profiler step as a cpu_op (B.7); Kineto as an annotation: normalised
STEP_PREFIX = "ProfilerStep#"
_MEMCPY_TASKS = ("PCIE_DMA_SQE", "SDMA_SQE", "MEMCPY_ASYNC", "ASYNC_MEMCPY")
_KERNEL_TASK_RE = r"^(AI_|MIX_|KERNEL_|DSA|FFTS)"


class _Event(msgspec.Struct):
    ph: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")
    cat: str | None = None
    id: int | str | None = None
    args: dict[str, Any] | None = None


@dataclass
class TraceView:
    """The rank's events as EVENTS columns, plus what the file says about its processes."""

    columns: dict[str, pa.Array]
    host_pid: int | None
    device: int | None


def _decode(path: Path) -> list[_Event]:
    data = read_bytes(path)
    if not data.strip():
        raise BadInputError("empty file, expected a JSON array of trace events", path)
    try:
        return msgspec.json.decode(data, type=list[_Event])
    except msgspec.ValidationError as exc:
        text = str(exc)
        if text.startswith("Expected `array`, got `object`"):
            text = "expected a JSON array of trace events, got a JSON object"
        raise BadInputError(f"not an Ascend trace_view: {text}", path) from None
    except msgspec.DecodeError as exc:
        raise BadInputError(f"invalid JSON ({exc})", path) from None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _raw_text(raw: msgspec.Raw) -> str | None:
    text = bytes(raw).decode()
    return None if text == "null" else text


def read_trace_view(path: Path) -> TraceView:
    events = _decode(path)
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in events:
        if e.ph == "M" and e.args:
            if e.name == "process_name":
                procs[e.pid] = str(e.args.get("name", ""))
            elif e.name == "thread_name":
                threads[(e.pid, e.tid)] = str(e.args.get("name", ""))
    xs = [e for e in events if e.ph == "X"]
    flows = [e for e in events if e.ph in ("s", "f") and e.cat == "async_npu"]
    host_pid = next((_int_or_none(p) for p, n in procs.items() if n == PROC_PYTHON), None)
    device = _device_from_pids(procs, host_pid)
    cols = _columns(xs, procs, threads, device, path)
    cols[S.EXTERNAL_ID] = launch_links(cols, _flow_table(flows))
    cols[S.CALL_SITE] = call_sites(cols)
    return TraceView(cols, host_pid, device)


def _device_from_pids(procs: dict[Any, str], host_pid: int | None) -> int | None:
    """Device id from pids encoded ``(host_pid << 10) | (sort_index << 5) | device_id``.

    Used only when every device process pid carries the Python process pid in its high bits
    (TRACE_FORMATS.md B.7: observed, not guaranteed), else unknown.
    """
    pids = [_int_or_none(p) for p, n in procs.items() if n in DEVICE_PROCS]
    if host_pid is None or not pids or any(p is None or (p >> 10) != host_pid for p in pids):
        return None
    ids = {p & 0x1F for p in pids if p is not None}
    return ids.pop() if len(ids) == 1 else None


def _columns(
    xs: list[_Event],
    procs: dict[Any, str],
    threads: dict[tuple[Any, Any], str],
    device: int | None,
    path: Path,
) -> dict[str, pa.Array]:
    args = [e.args or {} for e in xs]
    proc = pa.array([procs.get(e.pid, "") for e in xs], pa.string())
    ts = text_to_ns(pa.array([_raw_text(e.ts) for e in xs], pa.string()))
    dur_text = pa.array([_raw_text(e.dur) for e in xs], pa.string())
    dur = text_to_ns(dur_text)
    if ts.null_count:
        bad = pc.index(pc.is_null(ts), True).as_py()
        raise BadInputError(f"X event {bad} ({xs[bad].name!r}) has no readable ts", path)
    unreadable = pc.and_(pc.is_valid(dur_text), pc.is_null(dur))
    if pc.any(unreadable).as_py():
        bad = pc.index(unreadable, True).as_py()
        raise BadInputError(f"X event {bad} ({xs[bad].name!r}) has no readable dur", path)
    names = pa.array([e.name for e in xs], pa.string())
    cat_in = pa.array([e.cat for e in xs], pa.string())
    task = pa.array([_str_or_none(a.get("Task Type") or a.get("task type")) for a in args],
                    pa.string())
    conn = pa.array([_int_or_none(a.get("connection_id")) for a in args], pa.int64())
    is_hccl = pc.equal(proc, PROC_HCCL)
    is_op = pc.and_(is_hccl, pc.starts_with(names, "hcom_"))
    kind = _kinds(proc, cat_in, names, task, conn, is_op)
    on_device = pc.is_in(proc, value_set=pa.array(DEVICE_PROCS))
    tid = pa.array([_int_or_none(e.tid) for e in xs], pa.int64())
    plane_stream = pa.array([_int_or_none(a.get("stream id")) for a in args], pa.int64())
    stream = pc.if_else(pc.equal(proc, PROC_HW), tid,
                        pc.if_else(is_hccl, plane_stream, pa.scalar(None, pa.int64())))
    stream = _op_streams(stream, conn, is_op, pc.equal(proc, PROC_HW))
    # one pid per device, as in Kineto: the device index, else the Ascend Hardware pid
    raw_pid = pa.array([_int_or_none(e.pid) for e in xs], pa.int64())
    hw_pid = next((_int_or_none(p) for p, n in procs.items() if n == PROC_HW), None)
    dev_key = device if device is not None else hw_pid
    pid = pc.if_else(on_device, pa.scalar(dev_key, pa.int64()), raw_pid)
    return {
        "_raw_pid": raw_pid,
        "_raw_tid": tid,
        S.PID: pid,
        S.TID: pc.if_else(is_hccl, stream, tid),
        S.DEVICE: pc.if_else(on_device, pa.scalar(device, pa.int32()),
                             pa.scalar(None, pa.int32())),
        S.STREAM: stream,
        S.THREAD: pa.array([threads.get((e.pid, e.tid)) for e in xs], pa.string()),
        S.TS_NS: ts,
        S.DUR_NS: pc.fill_null(dur, 0),
        S.NAME: names,
        S.CATEGORY: pc.coalesce(cat_in, proc),
        S.KIND: kind,
        # connection_id only: the task queue's own correlation_id (enqueue -> dequeue) is
        # another id space and would collide with it
        S.CORRELATION: conn,
        S.PY_ID: pa.array([_int_or_none(a.get("Python id")) for a in args], pa.int64()),
        S.PY_PARENT_ID: pa.array([_int_or_none(a.get("Python parent id")) for a in args],
                                 pa.int64()),
        "_call_stack": pa.array([_str_or_none(a.get("Call stack")) for a in args], pa.string()),
        "_is_op": is_op,
        S.DTYPE: pc.if_else(is_op, pa.array([_str_or_none(a.get("data_type")) for a in args],
                                            pa.string()), pa.scalar(None, pa.string())),
        "_count": pc.if_else(is_op, pa.array([_int_or_none(a.get("count")) for a in args],
                                             pa.int64()), pa.scalar(None, pa.int64())),
    }


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _kinds(
    proc: pa.Array, cat: pa.Array, names: pa.Array, task: pa.Array, conn: pa.Array,
    is_op: pa.Array,
) -> pa.Array:
    n = len(proc)
    py = pc.take(pa.array(list(_PY_KINDS.values())),
                 pc.index_in(cat, value_set=pa.array(list(_PY_KINDS))))
    py = pc.fill_null(py, Kind.OTHER)
    step = pc.and_(pc.equal(py, Kind.CPU_OP), pc.starts_with(names, STEP_PREFIX))
    py = pc.if_else(step, Kind.ANNOTATION, py)
    task_or_name = pc.coalesce(task, names)
    memcpy = pc.or_(pc.is_in(task_or_name, value_set=pa.array(_MEMCPY_TASKS)),
                    pc.match_substring(pc.utf8_upper(names), "MEMCPY"))
    kernel = pc.fill_null(pc.match_substring_regex(task, _KERNEL_TASK_RE), False)
    # hardware tasks of an HCCL op (SDMA, Notify Wait, Write Value...) are part of that op
    op_conns = pc.filter(conn, is_op)
    of_op = pc.fill_null(pc.is_in(conn, value_set=op_conns), False)
    hw = pc.if_else(of_op, Kind.OTHER,
                    pc.if_else(memcpy, Kind.MEMCPY, pc.if_else(kernel, Kind.KERNEL, Kind.OTHER)))
    out = pa.array([Kind.OTHER] * n, pa.string())
    out = pc.if_else(pc.equal(proc, PROC_PYTHON), py, out)
    out = pc.if_else(pc.equal(proc, PROC_CANN), Kind.RUNTIME, out)
    out = pc.if_else(pc.equal(proc, PROC_HW), hw, out)
    return pc.if_else(is_op, Kind.KERNEL, out)


def _op_streams(stream: pa.Array, conn: pa.Array, is_op: pa.Array, is_hw: pa.Array) -> pa.Array:
    """An HCCL op's stream: the stream of the hardware tasks that share its connection_id."""
    hw = pa.table({"c": pc.filter(conn, is_hw), "s": pc.filter(stream, is_hw)}).drop_null()
    hw = hw.group_by("c").aggregate([("s", "min")])
    keys = pc.if_else(is_op, conn, pa.scalar(None, pa.int64()))
    picked = pc.take(hw["s_min"], pc.index_in(keys, value_set=hw["c"]))
    return pc.coalesce(picked, stream)


def _flow_table(flows: list[_Event]) -> pa.Table:
    return pa.table({
        "id": pa.array([str(e.id) for e in flows], pa.string()),
        "ph": pa.array([e.ph for e in flows], pa.string()),
        S.PID: pa.array([_int_or_none(e.pid) for e in flows], pa.int64()),
        S.TID: pa.array([_int_or_none(e.tid) for e in flows], pa.int64()),
        S.TS_NS: text_to_ns(pa.array([_raw_text(e.ts) for e in flows], pa.string())),
    })
