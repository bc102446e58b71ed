"""One rank of an Ascend export: pick the richest source, read it, tie the comm tables to it.

Sources, richest first (TRACE_FORMATS.md B.1, B.9): ``ascend_pytorch_profiler_{rank}.db``
(raw group names in COMMUNICATION_OP), ``trace_view.json`` (+ ``communication.json``),
``kernel_details.csv`` + ``communication.json`` (2023 layout without a timeline). Per-op
Transit / Wait / Synchronization / Idle come from ``analysis.db`` (db export) or
``communication.json`` (text export) and are joined to the op rows by op name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend.comm import read_analysis_db, read_communication, read_matrix
from tracekit.parsers.ascend.db import read_db
from tracekit.parsers.ascend.hccl import double_hash
from tracekit.parsers.ascend.kernels import read_kernel_details
from tracekit.parsers.ascend.meta import RankMeta, parse_group_info, read_rank_meta
from tracekit.parsers.ascend.trace_view import read_trace_view
from tracekit.schema import Kind

OUTPUT = "ASCEND_PROFILER_OUTPUT"
TRACE_VIEW = "trace_view.json"
KERNEL_DETAILS = "kernel_details.csv"
COMMUNICATION = "communication.json"
MATRIX = "communication_matrix.json"
ANALYSIS_DB = "analysis.db"
DB_GLOB = "ascend_pytorch_profiler*.db"


@dataclass
class RankData:
    """What one rank directory gave, before ranks are put together."""

    rank: int | None
    directory: Path
    source: Path
    columns: dict[str, pa.Array]  # EVENTS columns plus private "_" ones
    meta: RankMeta
    device: int | None = None
    raw_groups: list[str | None] = field(default_factory=list)  # db: op rows' comm names
    comm_ops: pa.Table | None = None
    comm_bw: pa.Table | None = None
    comm_matrix: pa.Table | None = None
    model: str | None = None  # NPU model when the export names it (db NPU_INFO)
    host: str | None = None


INFO_GLOB = "profiler_info*.json"
METADATA = "profiler_metadata.json"


def rank_files(rank_dir: Path) -> list[Path]:
    """Every file ``read_rank`` may read for this rank directory (that exists), in a fixed
    order: what the parse cache keys its entry on, so that a changed, added or removed file
    makes the rank be read again."""
    out = rank_dir / OUTPUT
    files = [*sorted(rank_dir.glob(INFO_GLOB)), rank_dir / METADATA, *sorted(out.glob(DB_GLOB)),
             *(out / name for name in (ANALYSIS_DB, TRACE_VIEW, KERNEL_DETAILS, COMMUNICATION,
                                       MATRIX))]
    return [f for f in files if f.is_file()]


def read_rank(rank_dir: Path) -> RankData:
    out = rank_dir / OUTPUT
    if not out.is_dir():
        raise BadInputError(f"no {OUTPUT} directory", rank_dir)
    meta = read_rank_meta(rank_dir)
    dbs = sorted(out.glob(DB_GLOB))
    if dbs:
        data = _from_db(rank_dir, dbs[0], meta)
    elif (out / TRACE_VIEW).exists():
        tv = read_trace_view(out / TRACE_VIEW)
        data = RankData(meta.rank, rank_dir, out / TRACE_VIEW, tv.columns, meta, tv.device)
    elif (out / KERNEL_DETAILS).exists():
        data = _from_kernel_details(rank_dir, meta)
    else:
        raise BadInputError(
            f"no {TRACE_VIEW}, {KERNEL_DETAILS} or ascend_pytorch_profiler_*.db in {OUTPUT}",
            rank_dir)
    if data.comm_ops is None and (out / COMMUNICATION).exists():
        data.comm_ops, data.comm_bw = read_communication(out / COMMUNICATION, _rank_or(data))
    if (out / MATRIX).exists():
        data.comm_matrix = read_matrix(out / MATRIX, _rank_or(data))
    return data


def _rank_or(data: RankData) -> int:
    return data.rank if data.rank is not None else -1


def _from_db(rank_dir: Path, db: Path, meta: RankMeta) -> RankData:
    d = read_db(db)
    if d.group_info is not None and not meta.groups:
        meta.groups = parse_group_info(d.group_info, db)
    rank = meta.rank if meta.rank is not None else d.rank
    data = RankData(rank, rank_dir, db, d.columns, meta, d.device, list(d.group_names),
                    model=d.model, host=d.host)
    analysis = db.parent / ANALYSIS_DB
    comm = read_analysis_db(analysis, rank if rank is not None else -1) if (
        analysis.exists()) else None
    if comm is not None:
        data.comm_ops, data.comm_bw, data.comm_matrix = comm
    return data


def _from_kernel_details(rank_dir: Path, meta: RankMeta) -> RankData:
    """Compute tasks from kernel_details.csv; HCCL ops from communication.json when present
    (it lists every op; the CSV's hcom rows can be a subset, as in the 2023 sample)."""
    out = rank_dir / OUTPUT
    cols = read_kernel_details(out / KERNEL_DETAILS)
    data = RankData(meta.rank, rank_dir, out / KERNEL_DETAILS, cols, meta)
    if not (out / COMMUNICATION).exists():
        return data
    ops, bw = read_communication(out / COMMUNICATION, _rank_or(data))
    data.comm_ops, data.comm_bw = ops, bw
    keep = pc.invert(cols["_is_op"])
    kept = {k: pc.filter(v, keep) for k, v in cols.items()}
    n = ops.num_rows
    json_ops = {
        S.PID: pa.nulls(n, pa.int64()), S.TID: pa.nulls(n, pa.int64()),
        S.DEVICE: pa.nulls(n, pa.int32()), S.STREAM: pa.nulls(n, pa.int64()),
        S.THREAD: pa.nulls(n, pa.string()), S.TS_NS: ops[S.TS_NS].combine_chunks(),
        S.DUR_NS: ops[S.DUR_NS].combine_chunks(), S.NAME: ops[S.NAME].combine_chunks(),
        S.CATEGORY: pa.array(["communication.json"] * n, pa.string()),
        S.KIND: pa.array([Kind.KERNEL] * n, pa.string()),
        "_op_type": pa.nulls(n, pa.string()), "_is_op": pa.array([True] * n),
    }
    data.columns = {k: pa.concat_arrays([kept[k], json_ops[k]]) for k in kept}
    data.source = out / COMMUNICATION
    return data


def group_hashes(data: RankData, op_names: pa.Array) -> pa.Array:
    """The full communicator hash of each op row: double_hash of the db's raw group name, else
    the hash after '@' in the communication tables for that op name (null when neither)."""
    if data.raw_groups:
        return pa.array([str(double_hash(g)) if g else None for g in data.raw_groups],
                        pa.string())
    if data.comm_ops is None or data.comm_ops.num_rows == 0:
        return pa.nulls(len(op_names), pa.string())
    known = data.comm_ops.select([S.NAME, S.GROUP_HASH]).to_pydict()
    by_name = dict(zip(known[S.NAME], known[S.GROUP_HASH], strict=True))
    return pa.array([by_name.get(n) for n in op_names.to_pylist()], pa.string())
