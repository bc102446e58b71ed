"""ascend_pytorch_profiler_{rank}.db (SQLite) -> EVENTS columns of one rank.

Facts (TRACE_FORMATS.md B.9): every text column is an id into ``STRING_IDS(id, value)``;
enums live in ``ENUM_*`` tables; times are integer ns (PYTORCH_API keeps them as TEXT).

* ``COMMUNICATION_OP``: one row per HCCL op: opName, startNs, endNs, connectionId, groupName
  (the *raw* HCCL communicator name), dataType (ENUM_HCCL_DATA_TYPE), count, opType;
* ``TASK`` (+ ``COMPUTE_TASK_INFO`` name/opType, + ``COMMUNICATION_TASK_INFO`` for an HCCL op's
  own tasks): device tasks; ``taskType`` is a string id;
* ``PYTORCH_API``: cpu ops (type op), task-queue events (queue), python frames (trace);
  ``connectionId`` -> ``CONNECTION_IDS(id, connectionId)`` links an op to the device work it
  launched; ``callchainId`` -> ``PYTORCH_CALLCHAINS(id, stack, stackDepth)``;
* ``CANN_API``: AscendCL / node / HCCL host calls; ``globalTid`` = pid << 32 | tid;
* ``META_DATA(name, value)``: ``parallel_group_info`` (JSON), ``RANK_DEVICE_MAP(rankId, deviceId)``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend.comm import connect_readonly
from tracekit.parsers.ascend.links import user_frames
from tracekit.parsers.ascend.trace_view import STEP_PREFIX
from tracekit.schema import Kind

REQUIRED = ("STRING_IDS",)
EVENT_TABLES = ("COMMUNICATION_OP", "TASK")  # at least one: HCCL ops or device tasks
_API_KIND = {"op": Kind.CPU_OP, "queue": Kind.RUNTIME, "trace": Kind.PYTHON,
             "mstx": Kind.ANNOTATION}
_KERNEL_PREFIX = ("KERNEL_", "AI_", "MIX_", "DSA", "FFTS")
_MEMCPY = ("MEMCPY_ASYNC", "PCIE_DMA_SQE", "SDMA_SQE")


@dataclass
class DbRank:
    columns: dict[str, pa.Array]
    rank: int | None
    device: int | None
    group_info: dict[str, Any] | None
    group_names: list[str]  # raw HCCL comm names of the op rows (aligned with "_is_op" rows)
    model: str | None = None  # NPU_INFO name ("Ascend910B")
    host: str | None = None  # HOST_INFO hostName


def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = connect_readonly(path)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise BadInputError(f"not a readable SQLite database ({exc})", path) from None
    missing = [t for t in REQUIRED if t not in tables]
    if not any(t in tables for t in EVENT_TABLES):
        missing.append(" or ".join(EVENT_TABLES))
    if missing:
        con.close()
        raise BadInputError(f"profiler database without table(s) {', '.join(missing)}", path)
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _sql(con: sqlite3.Connection, query: str, path: Path) -> pd.DataFrame:
    try:
        df = pd.read_sql_query(query, con)
        _check_times(df, query, path)
        return df
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise BadInputError(f"cannot read the profiler database ({exc})", path) from None


def _check_times(df: pd.DataFrame, query: str, path: Path) -> None:
    """startNs / endNs must be integer nanoseconds (SQLite keeps any type in any column:
    text, a REAL such as 1e300, or NULL would be cast into garbage or fail later)."""
    for col in ("startNs", "endNs"):
        if col not in df.columns or not len(df) or pd.api.types.is_integer_dtype(df[col]):
            continue
        values = df[col]
        # integers, or their decimal text (real exports hold some times as TEXT)
        text = values.map(lambda v: v if isinstance(v, str) else "" if v is None else repr(v))
        ok = text.str.fullmatch(r"-?[0-9]{1,19}").astype(bool)
        long = ok & text.str.len().ge(19)  # 19 digits may pass int64: checked one by one
        if long.any():
            ok[long] = text[long].map(_fits_int64)
        if ok.all():
            continue
        table = query.rsplit(" FROM ", 1)[-1].split()[0]
        bad = values[~ok].iloc[0]
        raise BadInputError(
            f"{table}.{col} holds {str(bad)[:30]!r}, expected integer nanoseconds", path)


def _column(values: pd.Series, name: str, path: Path) -> pa.Array:
    """An EVENTS column from the frame; a cell of the wrong type (text or a blob where an
    id belongs: SQLite keeps any type in any column) is a BadInputError."""
    try:
        return pa.array(values, _TYPES[name], from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        what = " ".join(str(exc).split())[:80]
        raise BadInputError(f"the values read into {name} have the wrong type ({what})",
                            path) from None


def _fits_int64(text: str) -> bool:
    try:
        return -(1 << 63) <= int(text) < 1 << 63
    except ValueError:
        return False


def read_db(path: Path) -> DbRank:
    con = _connect(path)
    try:
        return _read(con, path)
    finally:
        con.close()


def _read(con: sqlite3.Connection, path: Path) -> DbRank:
    tables = _tables(con)
    strings = _sql(con, "SELECT id, value FROM STRING_IDS", path).set_index("id")["value"]
    meta = _meta(con, tables, path)
    rank, device = _rank_device(con, tables, path)
    parts = [_comm_ops(con, tables, strings, path)] if "COMMUNICATION_OP" in tables else []
    conns = None
    if "TASK" in tables:
        parts.append(_tasks(con, tables, strings, path))
    if "PYTORCH_API" in tables:
        parts.append(_pytorch(con, tables, strings, path))
        if "CONNECTION_IDS" in tables:
            conns = _sql(con, "SELECT id, connectionId FROM CONNECTION_IDS", path)
    if "CANN_API" in tables:
        parts.append(_cann(con, strings, path))
    filled = [p for p in parts if not p.empty]
    if not filled:
        raise BadInputError("profiler database without any HCCL op or device task", path)
    frame = pd.concat(filled, ignore_index=True)
    on_dev = frame["_on_device"]
    if device is not None:
        frame.loc[on_dev & frame[S.DEVICE].isna(), S.DEVICE] = device
    # the device's rows share one pid (the device index, as in Kineto), an HCCL op sits on
    # the stream of the hardware tasks with its connection id
    frame.loc[on_dev, S.PID] = frame.loc[on_dev, S.DEVICE]
    hw = frame[(frame[S.CATEGORY] == "Ascend Hardware") & frame[S.CORRELATION].notna()]
    hw = hw.drop_duplicates(S.CORRELATION).set_index(S.CORRELATION)[S.STREAM]
    ops = frame["_is_op"]
    frame.loc[ops, S.STREAM] = frame.loc[ops, S.CORRELATION].map(hw)
    frame.loc[ops, S.TID] = frame.loc[ops, S.STREAM]
    frame = _links(frame, conns)
    cols = {c: _column(frame[c], c, path) for c in _TYPES}
    ops = frame[frame["_is_op"]]
    return DbRank(cols, rank, device, meta, ops["_group"].tolist(),
                  _first(con, tables, "NPU_INFO", "name", path),
                  _first(con, tables, "HOST_INFO", "hostName", path))


def _first(con: sqlite3.Connection, tables: set[str], table: str, column: str,
           path: Path) -> str | None:
    """The single value of a one-row info table (NPU_INFO, HOST_INFO), else None."""
    if table not in tables:
        return None
    rows = _sql(con, f"SELECT * FROM {table}", path)
    if len(rows) != 1 or column not in rows:
        return None
    value = rows[column].iloc[0]
    return None if pd.isna(value) else str(value)


_TYPES: dict[str, pa.DataType] = {
    S.PID: pa.int64(), S.TID: pa.int64(), S.DEVICE: pa.int32(), S.STREAM: pa.int64(),
    S.THREAD: pa.string(), S.TS_NS: pa.int64(), S.DUR_NS: pa.int64(), S.NAME: pa.string(),
    S.CATEGORY: pa.string(), S.KIND: pa.string(), S.CORRELATION: pa.int64(),
    S.EXTERNAL_ID: pa.int64(), S.CALL_SITE: pa.string(), S.DTYPE: pa.string(),
    "_count": pa.int64(), "_is_op": pa.bool_(),
}


def _meta(con: sqlite3.Connection, tables: set[str], path: Path) -> dict[str, Any] | None:
    if "META_DATA" not in tables:
        return None
    rows = _sql(con, "SELECT name, value FROM META_DATA WHERE name='parallel_group_info'", path)
    if rows.empty:
        return None
    try:
        info = json.loads(rows["value"].iloc[0])
    except (TypeError, RecursionError, json.JSONDecodeError):
        raise BadInputError("META_DATA parallel_group_info is not JSON", path) from None
    return info if isinstance(info, dict) else None


def _rank_device(con: sqlite3.Connection, tables: set[str], path: Path) -> tuple[int | None,
                                                                                    int | None]:
    if "RANK_DEVICE_MAP" not in tables:
        return None, None
    rows = _sql(con, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP", path)
    if len(rows) != 1:
        return None, None
    return int(rows["rankId"].iloc[0]), int(rows["deviceId"].iloc[0])


def _base(df: pd.DataFrame, kind: Any, category: str, on_device: bool) -> pd.DataFrame:
    out = pd.DataFrame({
        S.TS_NS: df["startNs"].astype("int64"),
        S.DUR_NS: (df["endNs"].astype("int64") - df["startNs"].astype("int64")).clip(lower=0),
    })
    out[S.KIND] = kind
    out[S.CATEGORY] = category
    out["_on_device"] = on_device
    out["_is_op"] = False
    for c in (S.PID, S.TID, S.DEVICE, S.STREAM, S.THREAD, S.CORRELATION, S.DTYPE, "_count",
              "_group", "_conn_key", "_stack", S.EXTERNAL_ID, S.CALL_SITE):
        out[c] = None
    return out


def _comm_ops(con: sqlite3.Connection, tables: set[str], strings: pd.Series,
              path: Path) -> pd.DataFrame:
    df = _sql(con, "SELECT * FROM COMMUNICATION_OP", path)
    need = {"opName", "startNs", "endNs", "connectionId", "groupName", "dataType", "count"}
    if need - set(df.columns):
        raise BadInputError(
            f"COMMUNICATION_OP without column(s) {', '.join(sorted(need - set(df.columns)))}",
            path)
    dtypes = pd.Series(dtype=object)
    if "ENUM_HCCL_DATA_TYPE" in tables:
        dtypes = _sql(con, "SELECT id, name FROM ENUM_HCCL_DATA_TYPE", path).set_index("id")["name"]
    out = _base(df, Kind.KERNEL, "HCCL", True)
    out[S.NAME] = df["opName"].map(strings)
    out[S.CORRELATION] = df["connectionId"]
    out[S.DTYPE] = df["dataType"].map(dtypes)
    out["_count"] = pd.to_numeric(df["count"], errors="coerce").astype("Int64")
    out["_group"] = df["groupName"].map(strings)
    out["_is_op"] = True
    out[S.THREAD] = "HCCL"
    return out


def _tasks(con: sqlite3.Connection, tables: set[str], strings: pd.Series,
           path: Path) -> pd.DataFrame:
    df = _sql(con, "SELECT * FROM TASK", path)
    out = _base(df, Kind.OTHER, "Ascend Hardware", True)
    task_type = df["taskType"].map(strings).fillna("")
    name = task_type.copy()
    if "COMPUTE_TASK_INFO" in tables:
        info = _sql(con, "SELECT globalTaskId, name FROM COMPUTE_TASK_INFO", path)
        named = df["globalTaskId"].map(info.set_index("globalTaskId")["name"].map(strings))
        name = named.fillna(name)
    # an HCCL op's own tasks (its container, SDMA, Notify Wait...) share its connection id
    of_op = pd.Series(False, index=df.index)
    if "COMMUNICATION_OP" in tables:
        op_conns = _sql(con, "SELECT connectionId FROM COMMUNICATION_OP", path)["connectionId"]
        of_op = df["connectionId"].isin(op_conns)
    if "COMMUNICATION_TASK_INFO" in tables:
        comm = _sql(con, "SELECT globalTaskId FROM COMMUNICATION_TASK_INFO", path)
        of_op = of_op | df["globalTaskId"].isin(comm["globalTaskId"])
    kernel = task_type.str.startswith(_KERNEL_PREFIX)
    memcpy = task_type.isin(_MEMCPY)
    out[S.KIND] = Kind.OTHER
    out.loc[kernel, S.KIND] = Kind.KERNEL
    out.loc[memcpy, S.KIND] = Kind.MEMCPY
    out.loc[of_op, S.KIND] = Kind.OTHER
    out[S.NAME] = name
    out[S.DEVICE] = df["deviceId"]
    out[S.PID] = df["globalPid"]
    out[S.STREAM] = df["streamId"]
    out[S.TID] = df["streamId"]
    out[S.THREAD] = "Stream " + df["streamId"].astype(str)
    out[S.CORRELATION] = df["connectionId"]
    return out


def _pytorch(con: sqlite3.Connection, tables: set[str], strings: pd.Series,
             path: Path) -> pd.DataFrame:
    df = _sql(con, "SELECT * FROM PYTORCH_API", path)
    kinds = pd.Series(dtype=object)
    if "ENUM_API_TYPE" in tables:
        kinds = _sql(con, "SELECT id, name FROM ENUM_API_TYPE", path).set_index("id")["name"]
    out = _base(df, Kind.OTHER, "cpu_op", False)
    api = df["type"].map(kinds)
    out[S.KIND] = api.map(_API_KIND).fillna(Kind.OTHER)
    out[S.CATEGORY] = api.map({"op": "cpu_op", "queue": "queue", "trace": "python_function",
                               "mstx": "mstx"}).fillna("cpu_op")
    out[S.NAME] = df["name"].map(strings)
    step = (out[S.KIND] == Kind.CPU_OP) & out[S.NAME].astype(str).str.startswith(STEP_PREFIX)
    out.loc[step, S.KIND] = Kind.ANNOTATION
    out[S.PID] = df["globalTid"] // (1 << 32)
    out[S.TID] = df["globalTid"] % (1 << 32)
    out["_conn_key"] = df["connectionId"]
    if "PYTORCH_CALLCHAINS" in tables and "callchainId" in df:
        chains = _sql(con, "SELECT id, stack, stackDepth FROM PYTORCH_CALLCHAINS", path)
        chains["frame"] = chains["stack"].map(strings)
        stacks = chains.sort_values(["id", "stackDepth"]).groupby("id")["frame"].agg(list)
        out["_stack"] = df["callchainId"].map(stacks)
    return out


def _cann(con: sqlite3.Connection, strings: pd.Series, path: Path) -> pd.DataFrame:
    df = _sql(con, "SELECT * FROM CANN_API", path)
    out = _base(df, Kind.RUNTIME, "CANN", False)
    out[S.NAME] = df["name"].map(strings)
    out[S.PID] = df["globalTid"] // (1 << 32)
    out[S.TID] = df["globalTid"] % (1 << 32)
    out[S.CORRELATION] = df["connectionId"]
    return out


def _links(frame: pd.DataFrame, conns: pd.DataFrame | None) -> pd.DataFrame:
    """EXTERNAL_ID: a cpu op and the device rows of the connection ids it lists share the
    cpu op's row index; CALL_SITE from the op's call chain, copied onto those rows."""
    frame = frame.reset_index(drop=True)
    frame[S.CALL_SITE] = frame["_stack"].map(
        lambda st: user_frames(st) if isinstance(st, list) else None)
    cpu = frame[frame["_conn_key"].notna() & (frame[S.KIND] == Kind.CPU_OP)]
    if conns is None or cpu.empty:
        return frame
    launched = cpu[["_conn_key"]].reset_index().merge(conns, left_on="_conn_key", right_on="id")
    by_conn = launched.drop_duplicates("connectionId").set_index("connectionId")["index"]
    dev = frame[frame["_on_device"] & frame[S.CORRELATION].notna()]
    src = dev[S.CORRELATION].map(by_conn)
    hit = src.notna()
    frame.loc[dev.index[hit], S.EXTERNAL_ID] = src[hit].astype("int64").to_numpy()
    frame.loc[launched["index"].unique(), S.EXTERNAL_ID] = launched["index"].unique()
    site = frame[S.CALL_SITE]
    frame.loc[dev.index[hit], S.CALL_SITE] = site.iloc[src[hit].astype("int64")].to_numpy()
    return frame

