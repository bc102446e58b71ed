"""Ascend (torch_npu / msprof) exports -> a Run with the same EVENTS as Kineto.

Accepted paths (TRACE_FORMATS.md B.1): a ``*_ascend_pt`` directory, its
``ASCEND_PROFILER_OUTPUT/``, a parent holding several ranks' ``*_ascend_pt`` directories, and
the 2023 layout ``test_rank_N/ASCEND_PROFILER_OUTPUT``: any directory with an
``ASCEND_PROFILER_OUTPUT`` child is one rank.

The Run holds EVENTS for every rank (an HCCL op is a device ``kernel`` row, category ``HCCL``,
like an NCCL kernel: op, dtype, element counts, bytes, seq, comms id, the profiler's own
transit / wait / sync / idle times, and the communicator), PROCESS_GROUPS (pg_name = HCCL
communicator name, pg_desc = group_name), RANK_INFO (format "ascend") and, in
``Run.extra``, the ASCEND_COMM_OPS / ASCEND_COMM_BANDWIDTH / ASCEND_COMM_MATRIX tables keyed
by (rank, event_id) and ASCEND_DEVICES (the NPU model when the export names it).

Communicator identity of an op (EVENTS.pg_name): the HCCL comm name when a file gives it, else
the full group hash, else ``*<3 digits>``, the hash tail of its name (text Level0 exports have
nothing more). ``seq`` is the op's index in that communicator from its name, so
(pg_name, op, seq) names one collective on every rank. Size and members (group_size,
pg_ranks) come from ascend_groups: parallel_group_info, cluster_analysis_output, or a
communication matrix that proves the size.

As a format of the per-rank driver (tracekit.parsers), this module finds the rank
directories (``rank_inputs``), reads one (``parse_rank``: ascend_rank), keys its parse-cache
entry on every file it reads (``cache_key``; the entry itself: ascend_rank_entry) and puts
the ranks together (``assemble``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import model
from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.ascend import groups as G
from tracekit.parsers.ascend.hccl import double_hash, split_op_names
from tracekit.parsers.ascend.ops import CommGroup, comm_columns, sequence_numbers
from tracekit.parsers.ascend.rank import OUTPUT, RankData, group_hashes, rank_files, read_rank
from tracekit.parsers.ascend.rank_entry import from_entry as from_entry  # the parse cache's
from tracekit.parsers.ascend.rank_entry import to_entry as to_entry  # side of this format
from tracekit.parsers.rank_input import RankInput, entry_key, file_identity

FORMAT = "ascend"
BACKEND = "hccl"
EXTRA_OPS = "ascend_comm_ops"
EXTRA_BANDWIDTH = "ascend_comm_bandwidth"
EXTRA_MATRIX = "ascend_comm_matrix"
EXTRA_DEVICES = "ascend_devices"
# part of the parse-cache key: raise it when the same export parses into other tables
PARSER_VERSION = "ascend-1"


def _is_rank_dir(path: Path) -> bool:
    return (path / OUTPUT).is_dir()


def rank_dirs(path: Path) -> list[Path]:
    """The rank directories a path names (empty when it is not an Ascend export)."""
    if not path.is_dir():
        return []
    if path.name == OUTPUT:
        return [path.parent]
    if _is_rank_dir(path):
        return [path]
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p for p in children if _is_rank_dir(p)]


def sniff(path: Path) -> bool:
    """True when ``path`` is an Ascend export directory (one rank or several)."""
    return bool(rank_dirs(Path(path)))


def rank_inputs(path: Path, options: model.LoadOptions) -> list[RankInput]:
    """The rank directories of an export (``options.rank`` is that of a single one)."""
    dirs = rank_dirs(Path(path))
    if not dirs:
        raise BadInputError(f"not an Ascend export: no {OUTPUT} directory found", path)
    forced = options.rank if len(dirs) == 1 else None
    return [RankInput(str(d), forced, _export_bytes(d)) for d in dirs]


def _export_bytes(rank_dir: Path) -> int:
    try:
        return sum(f.stat().st_size for f in (rank_dir / OUTPUT).iterdir() if f.is_file())
    except OSError:  # reported as bad input by the reader
        return 0


def parse_rank(item: RankInput) -> RankData:
    """One rank directory; its rank from profiler_info_{rank}.json, or the one forced."""
    data = read_rank(Path(item.path))
    if item.rank is not None:
        data.rank = item.rank
    if data.rank is None:
        raise BadInputError(
            "cannot tell the rank: no profiler_info_{rank}.json with rank_id"
            " (pass the rank explicitly for a single directory)", data.directory)
    return data


def cache_key(item: RankInput) -> str:
    """Every file the rank reads (rank_files), the EVENTS schema and parser versions and the
    forced rank (OSError when a file cannot be read)."""
    files = rank_files(Path(item.path))
    return entry_key([
        FORMAT, *file_identity(files), S.SCHEMA_VERSION, PARSER_VERSION,
        "" if item.rank is None else str(item.rank)])


def rank_of(data: RankData) -> int:
    assert data.rank is not None  # parse_rank settled it
    return data.rank


def source_of(data: RankData) -> str:
    return str(data.directory)


def assemble(path: Path, datas: list[RankData], skipped: list[tuple[str, str]]) -> model.Run:
    """The ranks put together: communicator names, members and seq are decided over every
    rank at once; the ranks keep the order of their directories' names."""
    groups = _all_groups(datas)
    names = _names_by_hash(datas, groups)
    matrix = _matrix(datas)
    members = G.merge(G.from_groups(groups), G.from_cluster(_cluster_dirs(path, datas)),
                      G.from_matrix(matrix))
    tables = [_events(d, groups, names, members) for d in datas]
    events = _run_wide_seq(pa.concat_tables(tables))
    run = model.Run(
        events=events,
        process_groups=_process_groups(datas, groups, events, G.local_ranks(matrix), names),
        rank_info=_rank_info(datas, tables),
        skipped=skipped,
    )
    run.extra.update(_extras(datas, tables, names))
    run.extra[EXTRA_DEVICES] = S.conform(pa.table({
        S.RANK: pa.array([d.rank for d in datas], pa.int32()),
        S.DEVICE: pa.array([d.device for d in datas], pa.int32()),
        S.DEVICE_MODEL: pa.array([d.model for d in datas], pa.string()),
    }), S.ASCEND_DEVICES)
    return run


def _all_groups(datas: list[RankData]) -> list[CommGroup]:
    """Every rank's parallel_group_info, one entry per communicator name (a rank's own entry
    carries its group_rank; another rank's entry still gives members and name)."""
    out: dict[str, CommGroup] = {}
    for d in datas:
        for g in d.meta.groups:
            out.setdefault(g.comm_name, g)
    return list(out.values())


def _names_by_hash(datas: list[RankData], groups: list[CommGroup]) -> dict[str, str]:
    """Communicator hash -> HCCL comm name, from parallel_group_info and the db's raw names;
    every other full hash a rank's files name maps to itself (so that op names' 3-digit
    tails resolve to it on the ranks whose files lack it)."""
    out: dict[str, str] = {}
    for d in datas:
        for t in (d.comm_ops, d.comm_bw, d.comm_matrix):
            if t is not None:
                out.update({h: h for h in t[S.GROUP_HASH].drop_null().to_pylist()})
    out.update({str(double_hash(n)): n for d in datas for n in d.raw_groups if n})
    out.update({g.hash: g.comm_name for g in groups})
    return out


def _matrix(datas: list[RankData]) -> pa.Table:
    parts = [d.comm_matrix.set_column(0, S.RANK, pa.array([d.rank] * d.comm_matrix.num_rows,
                                                          pa.int32()))
             for d in datas if d.comm_matrix is not None]
    return S.conform(pa.concat_tables(parts), S.ASCEND_COMM_MATRIX) if parts else S.empty(
        S.ASCEND_COMM_MATRIX)


def _cluster_dirs(path: Path, datas: list[RankData]) -> list[Path]:
    """Where msprof-analyze writes cluster_analysis_output/: the folder holding the rank
    directories (the path given, or the parent of a single rank directory)."""
    out = [path] + [d.directory.parent for d in datas]
    return list(dict.fromkeys(p.resolve() for p in out))


_PROF = ((S.PROF_TRANSIT_NS, S.TRANSFER_NS), (S.PROF_WAIT_NS, S.WAIT_NS),
         (S.PROF_SYNC_NS, S.SYNC_NS), (S.PROF_IDLE_NS, S.IDLE_NS))


def _prof_times(data: RankData, names: pa.Array) -> dict[str, pa.Array]:
    """The profiler's own Transit / Wait / Synchronization / Idle of each op row, joined by
    op name (the first entry of a name, as for the ASCEND_COMM_OPS event ids)."""
    if data.comm_ops is None or data.comm_ops.num_rows == 0:
        return {}
    ops = data.comm_ops
    idx = pc.index_in(names, value_set=ops[S.NAME].combine_chunks().cast(pa.string()))
    return {col: pc.take(ops[src].combine_chunks(), idx) for col, src in _PROF}


def _events(data: RankData, groups: list[CommGroup], names: dict[str, str],
            members: dict[str, G.Members]) -> pa.Table:
    cols = dict(data.columns)
    n = len(cols[S.TS_NS])
    is_op = cols["_is_op"]
    names_by_hash = names
    names = pc.filter(cols[S.NAME], is_op)
    dtype_col = cols.get(S.DTYPE, pa.nulls(n, pa.string()))
    count_col = cols.get("_count", pa.nulls(n, pa.int64()))
    comm = comm_columns(names, pc.filter(dtype_col, is_op), pc.filter(count_col, is_op),
                        group_hashes(data, names), groups, names_by_hash, members)
    comm.update(_prof_times(data, pc.cast(names, pa.string())))
    positions = pc.indices_nonzero(is_op)
    for key, values in comm.items():
        if key.startswith("_"):
            continue
        base = pa.nulls(n, values.type)
        cols[key] = _scatter(base, positions, values)
    cols[S.RANK] = pa.array([data.rank] * n, pa.int32())
    cols[S.SOURCE] = pa.array([str(data.source)] * n, pa.string())
    cols[S.EVENT_ID] = pa.array(range(n), pa.int64())
    table = pa.table({k: v for k, v in cols.items() if not k.startswith("_")})
    return S.conform(table, S.EVENTS)


def _scatter(base: pa.Array, positions: pa.Array, values: pa.Array) -> pa.Array:
    """``base`` with ``values`` written at ``positions`` (vectorized)."""
    idx = pc.index_in(pa.array(range(len(base)), pa.uint64()), value_set=positions)
    return pc.coalesce(pc.take(values, idx), base) if len(values) else base


def _process_groups(datas: list[RankData], groups: list[CommGroup], events: pa.Table,
                    local: dict[tuple[int, str], int], names: dict[str, str]) -> pa.Table:
    """One row per (rank, communicator): the parallel_group_info groups the rank is in, then
    every other communicator its HCCL ops ran on, with the size / members / group-local rank
    the run's evidence gives (ascend_groups), null where it gives none."""
    rows: dict[str, list[object]] = {f.name: [] for f in S.PROCESS_GROUPS}

    def add(rank: int | None, name: object, desc: object, ranks: object, size: object,
            grank: object) -> None:
        for col, value in ((S.RANK, rank), (S.PG_NAME, name), (S.PG_DESC, desc),
                           (S.PG_RANKS, ranks), (S.GROUP_SIZE, size), (S.GROUP_RANK, grank),
                           (S.BACKEND, BACKEND)):
            rows[col].append(value)

    hash_of = {name: h for h, name in names.items()}
    ops = events.filter(pc.is_valid(events[S.PG_NAME])).select(
        [S.RANK, S.PG_NAME, S.PG_DESC, S.PG_RANKS, S.GROUP_SIZE]).to_pylist()
    for d in datas:
        assert d.rank is not None
        own = {g.comm_name: g for g in d.meta.groups}
        listed = set()
        for g in (g for g in groups if d.rank in g.global_ranks):
            mine = own.get(g.comm_name)
            grank = mine.group_rank if mine and mine.group_rank is not None else (
                g.global_ranks.index(d.rank))
            add(d.rank, g.comm_name, g.group_name, list(g.global_ranks), len(g.global_ranks),
                grank)
            listed.add(g.comm_name)
        for r in ops:
            name = r[S.PG_NAME]
            if r[S.RANK] != d.rank or name in listed:
                continue
            listed.add(name)
            ranks = r[S.PG_RANKS]
            index = ranks.index(d.rank) if ranks and d.rank in ranks else local.get(
                (d.rank, hash_of.get(name, "")))
            add(d.rank, name, r[S.PG_DESC], ranks, r[S.GROUP_SIZE], index)
    plain = pa.table({f.name: pa.array(rows[f.name], _plain(f.type)) for f in S.PROCESS_GROUPS})
    return S.conform(plain, S.PROCESS_GROUPS)


def _run_wide_seq(events: pa.Table) -> pa.Table:
    """EVENTS.seq of the HCCL ops decided over every rank at once (ascend_ops
    sequence_numbers), so that one communicator's ops get the same seq form on all ranks."""
    is_op = pc.and_(pc.is_valid(events[S.PG_NAME]), pc.is_valid(events[S.OP]))
    if not pc.any(is_op).as_py():
        return events
    pos = pc.indices_nonzero(is_op)
    ops = events.filter(is_op)
    seq = sequence_numbers(split_op_names(pc.cast(ops[S.NAME], pa.string())),
                           pc.cast(ops[S.PG_NAME], pa.string()))
    col = _scatter(events[S.SEQ].combine_chunks(), pos, seq)
    return events.set_column(events.schema.get_field_index(S.SEQ), S.SEQ, col)


def _plain(t: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_dictionary(t) else t


def _rank_info(datas: list[RankData], tables: list[pa.Table]) -> pa.Table:
    world = [d.meta.world_size or max((len(g.global_ranks) for g in d.meta.groups), default=None)
             for d in datas]
    plain = pa.table({
        S.RANK: pa.array([d.rank for d in datas], pa.int32()),
        S.SOURCE: pa.array([str(d.directory) for d in datas], pa.string()),
        S.FORMAT: pa.array([FORMAT] * len(datas), pa.string()),
        S.BACKEND: pa.array([BACKEND] * len(datas), pa.string()),
        S.WORLD_SIZE: pa.array(world, pa.int32()),
        S.HOST: pa.array([d.host for d in datas], pa.string()),
        S.BASE_TIME_NS: pa.nulls(len(datas), pa.int64()),
        S.COUNT: pa.array([t.num_rows for t in tables], pa.int64()),
    })
    return S.conform(plain, S.RANK_INFO)


def _extras(datas: list[RankData], tables: list[pa.Table],
            by_hash: dict[str, str]) -> dict[str, pa.Table]:
    ops, bws, mats = [], [], []
    for d, t in zip(datas, tables, strict=True):
        ids = _op_ids(t)
        if d.comm_ops is not None:
            ops.append(_link(d.comm_ops, d.rank, ids, by_hash))
        if d.comm_bw is not None:
            bws.append(_link(d.comm_bw, d.rank, ids, None))
        if d.comm_matrix is not None:
            mats.append(d.comm_matrix.set_column(
                0, S.RANK, pa.array([d.rank] * d.comm_matrix.num_rows, pa.int32())))
    out = {}
    for key, parts, schema in ((EXTRA_OPS, ops, S.ASCEND_COMM_OPS),
                               (EXTRA_BANDWIDTH, bws, S.ASCEND_COMM_BANDWIDTH),
                               (EXTRA_MATRIX, mats, S.ASCEND_COMM_MATRIX)):
        table = pa.concat_tables(parts) if parts else S.empty(schema)
        out[key] = S.conform(table, schema)
    return out


def _op_ids(events: pa.Table) -> dict[str, int]:
    ops = events.filter(pc.is_valid(events[S.OP]))  # only HCCL op rows carry an op here
    names = ops[S.NAME].to_pylist()
    ids = ops[S.EVENT_ID].to_pylist()
    out: dict[str, int] = {}
    for name, i in zip(names, ids, strict=True):
        out.setdefault(name, i)
    return out


def _link(table: pa.Table, rank: int | None, ids: dict[str, int],
          by_hash: dict[str, str] | None) -> pa.Table:
    names = table[S.NAME].to_pylist()
    table = table.set_column(table.schema.get_field_index(S.RANK), S.RANK,
                             pa.array([rank] * table.num_rows, pa.int32()))
    table = table.set_column(table.schema.get_field_index(S.EVENT_ID), S.EVENT_ID,
                             pa.array([ids.get(n) for n in names], pa.int64()))
    if by_hash is not None:
        hashes = table[S.GROUP_HASH].to_pylist()
        table = table.set_column(table.schema.get_field_index(S.PG_NAME), S.PG_NAME,
                                 pa.array([by_hash.get(h) for h in hashes], pa.string()))
    return table
