"""Communication columns of HCCL op rows, the same for every Ascend source.

Input: op rows with the op name, the HCCL ``data_type`` and ``count``, and the communicator
hash (from communication.json keys, or ``double_hash`` of the db's raw group name). Output:
EVENTS ``op``, ``coll_name`` (the opType, ``hcom_allReduce_``), element counts and bytes
(count x dtype size), and the group columns through parallel_group_info.

``count`` follows the HCCL API: the send count for all-gather, the receive count for
reduce-scatter, the buffer count otherwise. The other side is count x group size when the
group is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.ascend.groups import TAIL_PREFIX, Members
from tracekit.parsers.ascend.hccl import double_hash, dtype_bytes, op_of_type, split_op_names
from tracekit.schema import MetaSource, Op


@dataclass(frozen=True)
class CommGroup:
    """One HCCL communicator from parallel_group_info (TRACE_FORMATS.md B.3)."""

    comm_name: str  # HCCL communicator name (the parallel_group_info key)
    group_name: str  # hccl_config group_name ("tp", "moe_ep", "default_group", "")
    group_rank: int | None
    global_ranks: tuple[int, ...]

    @property
    def hash(self) -> str:
        return str(double_hash(self.comm_name))


def resolve_hashes(
    names: pa.Array, hashes: pa.Array, groups: list[CommGroup],
    known: Iterable[str] = (),
) -> pa.Array:
    """Full group hash of every op: the given one, else the unique known communicator
    (parallel_group_info, or a full hash another file of the run names) whose hash ends with
    the 3 digits in the op name (null when none or several do)."""
    hash3 = split_op_names(names).field("hash3")
    by3: dict[str, set[str]] = {}
    for h in [g.hash for g in groups] + [str(k) for k in known]:
        by3.setdefault(h[-3:], set()).add(h)
    unique = {k: next(iter(v)) for k, v in by3.items() if len(v) == 1}
    keys = pa.array(list(unique), pa.string())
    guessed = pc.take(pa.array(list(unique.values()), pa.string()),
                      pc.index_in(hash3, value_set=keys))
    return pc.coalesce(pc.cast(hashes, pa.string()), guessed)


def comm_columns(
    names: pa.Array,
    dtypes: pa.Array,
    counts: pa.Array,
    hashes: pa.Array,
    groups: list[CommGroup],
    names_by_hash: dict[str, str] | None = None,
    members: dict[str, Members] | None = None,
) -> dict[str, pa.Array]:
    """EVENTS communication columns for HCCL op rows (every input the length of the rows).

    ``names_by_hash``: communicator names known without parallel_group_info (the db's raw
    group names), used for pg_name when no group entry matches. ``members``: group hash ->
    size / global ranks from the other evidence of the run (ascend_groups); their hashes
    also resolve op names' 3-digit tails. An op whose full hash no file gives keeps the tail
    as its communicator identity (pg_name ``*<3 digits>``): the same on every rank of one
    communicator, and never shared by ops of communicators whose tails differ."""
    members = members or {}
    names_by_hash = names_by_hash or {}
    parts = split_op_names(names)
    op_type = parts.field("op_type")
    op_type = pc.if_else(pc.equal(op_type, ""), pa.scalar(None, pa.string()), op_type)
    op = op_of_type(op_type)
    full = resolve_hashes(names, hashes, groups, list(members) + list(names_by_hash))
    tail = pc.if_else(pc.equal(parts.field("hash3"), ""), pa.scalar(None, pa.string()),
                      parts.field("hash3"))
    identity = pc.coalesce(full, pc.binary_join_element_wise(TAIL_PREFIX, tail, ""))
    by_hash = {g.hash: g for g in groups}
    known = [by_hash.get(h) if h is not None else None for h in full.to_pylist()]
    other = [members.get(h) if h is not None else None for h in full.to_pylist()]
    size = pa.array([len(g.global_ranks) if g else (m.size if m else None)
                     for g, m in zip(known, other, strict=True)], pa.int32())
    ranks = [list(g.global_ranks) if g else (list(m.ranks) if m and m.ranks else None)
             for g, m in zip(known, other, strict=True)]
    width = dtype_bytes(dtypes)
    count = pc.cast(counts, pa.int64())
    scaled = pc.multiply(count, pc.cast(size, pa.int64()))
    in_n = pc.if_else(pc.equal(op, Op.REDUCE_SCATTER), scaled,
                      pc.if_else(pc.equal(op, Op.RECV), pa.scalar(None, pa.int64()), count))
    out_n = pc.if_else(pc.equal(op, Op.ALL_GATHER), scaled,
                       pc.if_else(pc.equal(op, Op.SEND), pa.scalar(None, pa.int64()), count))
    pg_name = [g.comm_name if g else (names_by_hash.get(h, h) if h is not None else i)
               for g, h, i in zip(known, full.to_pylist(), identity.to_pylist(), strict=True)]
    return {
        S.OP: op,
        S.COLL_NAME: op_type,
        S.DTYPE: pc.cast(dtypes, pa.string()),
        S.IN_NELEMS: in_n,
        S.OUT_NELEMS: out_n,
        S.IN_BYTES: pc.multiply(in_n, width),
        S.OUT_BYTES: pc.multiply(out_n, width),
        S.GROUP_SIZE: size,
        S.PG_NAME: pa.array(pg_name, pa.string()),
        S.PG_DESC: pa.array([g.group_name if g else None for g in known], pa.string()),
        S.PG_RANKS: pa.array(ranks, pa.list_(pa.int32())),
        S.META_SOURCE: pc.if_else(pc.is_valid(op), pa.scalar(MetaSource.ASCEND),
                                  pa.scalar(None, pa.string())),
        S.SEQ: sequence_numbers(parts, identity),
        S.COMMS_ID: _comms_ids(names, identity),
        "_group_hash": full,
    }


def sequence_numbers(parts: pa.StructArray, identity: pa.Array) -> pa.Array:
    """EVENTS.seq of HCCL ops: the op's index in its communicator, from the name (B.4: the
    index counts every op of the group, whatever its type, so it is the communicator's own
    issue order and the same on every rank, whichever ops the profiling window caught).

    Names of newer CANN end with an iteration field; where one communicator's names in these
    rows carry more than one iteration value, seq = iteration x 2^32 + index, so an index
    that restarts in a later iteration never repeats a seq. Null when the name has no index.
    """
    index = pc.cast(pc.if_else(pc.equal(parts.field("index"), ""),
                               pa.scalar(None, pa.string()), parts.field("index")), pa.int64())
    it_text = parts.field("iteration")
    iteration = pc.cast(pc.if_else(pc.equal(it_text, ""), pa.scalar(None, pa.string()),
                                   it_text), pa.int64())
    t = pa.table({"g": pc.cast(identity, pa.string()), "i": iteration}).drop_null()
    if t.num_rows == 0:
        return index
    counts = t.group_by("g").aggregate([("i", "count_distinct")])
    several = pc.filter(counts["g"], pc.greater(counts["i_count_distinct"], 1))
    widen = pc.fill_null(pc.is_in(identity, value_set=several), False)
    wide = pc.add(pc.multiply(iteration, 1 << 32), index)
    return pc.if_else(pc.and_(widen, pc.is_valid(iteration)), wide, index)


def _comms_ids(names: pa.Array, identity: pa.Array) -> pa.Array:
    """One id per collective, the same on every rank: the op name (opType, index in the group,
    iteration) within its communicator (full hash, else hash tail), hashed; null when the
    name has no communicator part."""
    ids = [double_hash(f"{h}@{n}") if h is not None and n is not None else None
           for n, h in zip(names.to_pylist(), identity.to_pylist(), strict=True)]
    return pa.array(ids, pa.uint64())
