"""communication.json, communication_matrix.json and analysis.db -> the ASCEND_COMM_* tables.

Facts (TRACE_FORMATS.md B.5, B.6, B.9):

* ``{step: {"p2p"|"collective": {"<op>@<group hash>": info, ..., "Total Op Info": totals}}}``;
  the step key is ``step<N>`` or ``step``;
* ``Communication Time Info``: Start Timestamp(us), Elapse / Transit / Wait / Synchronization
  / Idle Time(ms); ``Communication Bandwidth Info``: per transport (RDMA, HCCS, PCIE, SDMA,
  SIO) Transit Size(MB) (1e6 B), Transit Time(ms), Bandwidth(GB/s). SDMA already contains
  HCCS, PCIE and SIO: ``in_sdma`` marks those so nobody adds them to SDMA;
* the matrix keys links ``"src-dst"`` in group-local ranks, per op bucket or op name;
* analysis.db holds the same numbers in CommAnalyzerTime / CommAnalyzerBandwidth /
  CommAnalyzerMatrix (times in ms, sizes in MB, ``package_size`` rows per packet size).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend.io import as_float, load_json, mb_to_bytes, ms_to_ns, us_to_ns

TOTAL = "Total Op Info"
TIME_INFO = "Communication Time Info"
BW_INFO = "Communication Bandwidth Info"
IN_SDMA = ("HCCS", "PCIE", "SIO")


def _split_key(key: str) -> tuple[str, str | None]:
    name, _, group = key.partition("@")
    return name, (group or None)


def _steps(doc: dict[str, Any], path: Path) -> list[tuple[str, str, str, Any]]:
    """(step, kind, key, value) of every op entry, totals left out."""
    out = []
    for step, kinds in doc.items():
        if not isinstance(kinds, dict):
            raise BadInputError(f"step {step!r} is not an object", path)
        for kind, ops in kinds.items():
            if not isinstance(ops, dict):
                raise BadInputError(f"{step}.{kind} is not an object", path)
            out += [(step, kind, k, v) for k, v in ops.items() if k != TOTAL]
    return out


def read_communication(path: Path, rank: int) -> tuple[pa.Table, pa.Table]:
    """(ASCEND_COMM_OPS, ASCEND_COMM_BANDWIDTH) of one rank's communication.json."""
    doc = load_json(path, dict, "a JSON object keyed by step")
    ops: dict[str, list[Any]] = {f.name: [] for f in S.ASCEND_COMM_OPS}
    bws: dict[str, list[Any]] = {f.name: [] for f in S.ASCEND_COMM_BANDWIDTH}
    for step, kind, key, info in _steps(doc, path):
        if not isinstance(info, dict) or not isinstance(info.get(TIME_INFO), dict):
            raise BadInputError(f"{step}.{kind}.{key}: no {TIME_INFO!r}", path)
        name, group = _split_key(key)
        t = info[TIME_INFO]
        row: dict[str, Any] = {
            S.RANK: rank,
            S.EVENT_ID: None,
            S.NAME: name,
            S.GROUP_HASH: group,
            S.PG_NAME: None,
            S.STEP: step,
            S.COMM_KIND: kind,
            S.TS_NS: us_to_ns(t.get("Start Timestamp(us)")),
            S.DUR_NS: ms_to_ns(t.get("Elapse Time(ms)")),
            S.TRANSFER_NS: ms_to_ns(t.get("Transit Time(ms)")),
            S.WAIT_NS: ms_to_ns(t.get("Wait Time(ms)")),
            S.SYNC_NS: ms_to_ns(t.get("Synchronization Time(ms)")),
            S.IDLE_NS: ms_to_ns(t.get("Idle Time(ms)")),
        }
        for col, value in row.items():
            ops[col].append(value)
        for transport, b in (info.get(BW_INFO) or {}).items():
            if not isinstance(b, dict):
                continue
            bw_row: dict[str, Any] = {
                S.RANK: rank,
                S.EVENT_ID: None,
                S.NAME: name,
                S.GROUP_HASH: group,
                S.STEP: step,
                S.TRANSPORT: transport,
                S.IN_SDMA: transport in IN_SDMA,
                S.TRANSIT_BYTES: mb_to_bytes(b.get("Transit Size(MB)")),
                S.TRANSFER_NS: ms_to_ns(b.get("Transit Time(ms)")),
                S.BANDWIDTH_GBPS: as_float(b.get("Bandwidth(GB/s)")),
            }
            for col, value in bw_row.items():
                bws[col].append(value)
    return (
        pa.Table.from_pydict(ops, schema=_plain(S.ASCEND_COMM_OPS)),
        pa.Table.from_pydict(bws, schema=_plain(S.ASCEND_COMM_BANDWIDTH)),
    )


def read_matrix(path: Path, rank: int) -> pa.Table:
    doc = load_json(path, dict, "a JSON object keyed by step")
    rows: dict[str, list[Any]] = {f.name: [] for f in S.ASCEND_COMM_MATRIX}
    for step, kinds in doc.items():
        if not isinstance(kinds, dict):
            raise BadInputError(f"step {step!r} is not an object", path)
        for kind, ops in kinds.items():
            for key, links in (ops or {}).items():
                name, group = _split_key(key)
                for link, v in (links or {}).items():
                    src, _, dst = str(link).partition("-")
                    if not isinstance(v, dict) or not src.isdigit() or not dst.isdigit():
                        raise BadInputError(f"{step}.{kind}.{key}: bad link {link!r}", path)
                    row: dict[str, Any] = {
                        S.RANK: rank,
                        S.NAME: name,
                        S.HCCL_OP: v.get("Op Name"),
                        S.GROUP_HASH: group,
                        S.STEP: step,
                        S.COMM_KIND: kind,
                        S.SRC_RANK: int(src),
                        S.DST_RANK: int(dst),
                        S.TRANSPORT: v.get("Transport Type"),
                        S.TRANSIT_BYTES: mb_to_bytes(v.get("Transit Size(MB)")),
                        S.TRANSFER_NS: ms_to_ns(v.get("Transit Time(ms)")),
                        S.BANDWIDTH_GBPS: as_float(v.get("Bandwidth(GB/s)")),
                    }
                    for col, value in row.items():
                        rows[col].append(value)
    return pa.Table.from_pydict(rows, schema=_plain(S.ASCEND_COMM_MATRIX))


def _plain(schema: pa.Schema) -> pa.Schema:
    """The schema with plain strings where it declares dictionaries (conformed later)."""
    return pa.schema([
        pa.field(f.name, pa.string() if pa.types.is_dictionary(f.type) else f.type)
        for f in schema
    ])


_TIME_SQL = (
    "SELECT hccl_op_name, group_name, step, type, start_timestamp, elapse_time, transit_time, "
    "wait_time, synchronization_time, idle_time FROM CommAnalyzerTime"
)
_BW_SQL = (
    "SELECT hccl_op_name, group_name, step, transport_type, MAX(transit_size), "
    "MAX(transit_time), MAX(bandwidth) FROM CommAnalyzerBandwidth "
    "GROUP BY hccl_op_name, group_name, step, transport_type"
)
_MATRIX_SQL = (
    "SELECT hccl_op_name, op_name, group_name, step, type, src_rank, dst_rank, transport_type, "
    "transit_size, transit_time, bandwidth FROM CommAnalyzerMatrix"
)
COMM_TABLES = ("CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix")


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export's SQLite file truly read-only: ``immutable=1`` tells SQLite the file
    cannot change, so it takes no lock and writes no -shm / -wal / -journal beside it (an
    export on a read-only share, or one another tool is reading, is left as it was)."""
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def read_analysis_db(path: Path, rank: int) -> tuple[pa.Table, pa.Table, pa.Table] | None:
    """(ASCEND_COMM_OPS, ASCEND_COMM_BANDWIDTH, ASCEND_COMM_MATRIX) from analysis.db (db
    export); None when it has no communication tables: a Level0 export's analysis.db holds
    only StepTraceTime (the ops and their times are then in the profiler db alone)."""
    try:
        con = connect_readonly(path)
        try:
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            if "CommAnalyzerTime" not in tables:
                return None
            times = con.execute(_TIME_SQL).fetchall()
            bands = con.execute(_BW_SQL).fetchall() if "CommAnalyzerBandwidth" in tables else []
            links = con.execute(_MATRIX_SQL).fetchall() if "CommAnalyzerMatrix" in tables else []
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise BadInputError(f"not a readable analysis.db ({exc})", path) from None
    ops = {
        S.RANK: [rank] * len(times), S.EVENT_ID: [None] * len(times),
        S.NAME: [r[0] for r in times], S.GROUP_HASH: [r[1] for r in times],
        S.PG_NAME: [None] * len(times), S.STEP: [r[2] for r in times],
        S.COMM_KIND: [r[3] for r in times], S.TS_NS: [us_to_ns(r[4]) for r in times],
        S.DUR_NS: [ms_to_ns(r[5]) for r in times], S.TRANSFER_NS: [ms_to_ns(r[6]) for r in times],
        S.WAIT_NS: [ms_to_ns(r[7]) for r in times], S.SYNC_NS: [ms_to_ns(r[8]) for r in times],
        S.IDLE_NS: [ms_to_ns(r[9]) for r in times],
    }
    bws = {
        S.RANK: [rank] * len(bands), S.EVENT_ID: [None] * len(bands),
        S.NAME: [r[0] for r in bands], S.GROUP_HASH: [r[1] for r in bands],
        S.STEP: [r[2] for r in bands], S.TRANSPORT: [r[3] for r in bands],
        S.IN_SDMA: [r[3] in IN_SDMA for r in bands],
        S.TRANSIT_BYTES: [mb_to_bytes(r[4]) for r in bands],
        S.TRANSFER_NS: [ms_to_ns(r[5]) for r in bands],
        S.BANDWIDTH_GBPS: [as_float(r[6]) for r in bands],
    }
    mat = {
        S.RANK: [rank] * len(links), S.NAME: [r[0] for r in links],
        S.HCCL_OP: [r[1] or None for r in links], S.GROUP_HASH: [r[2] for r in links],
        S.STEP: [r[3] for r in links], S.COMM_KIND: [r[4] for r in links],
        S.SRC_RANK: [_int(r[5]) for r in links], S.DST_RANK: [_int(r[6]) for r in links],
        S.TRANSPORT: [r[7] for r in links], S.TRANSIT_BYTES: [mb_to_bytes(r[8]) for r in links],
        S.TRANSFER_NS: [ms_to_ns(r[9]) for r in links],
        S.BANDWIDTH_GBPS: [as_float(r[10]) for r in links],
    }
    return (pa.Table.from_pydict(ops, schema=_plain(S.ASCEND_COMM_OPS)),
            pa.Table.from_pydict(bws, schema=_plain(S.ASCEND_COMM_BANDWIDTH)),
            pa.Table.from_pydict(mat, schema=_plain(S.ASCEND_COMM_MATRIX)))


def _int(value: object) -> int | None:
    """A group-local rank as analysis.db stores it (TEXT '0', or an integer)."""
    try:
        return int(str(value))
    except ValueError:
        return None
