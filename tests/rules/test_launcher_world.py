"""A kernel's launcher decides its op; the declared world is a candidate, not a verdict."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from rules.test_engine import attribute, make_run

from tracekit import api
from tracekit import schema as S
from tracekit.schema import Group, Kind, Status
from tracekit.topology import ParallelConfig, Topology

SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def _launched(c10d: str, corr: int, t: int, sibling: bool = False) -> list[dict[str, Any]]:
    """A c10d op on host thread 9 launching an NCCL kernel on stream 7 (correlation ``corr``);
    with ``sibling`` a record_param_comms that closes before the launch sits inside it."""
    host = {S.PID: 1, S.TID: 9}
    rows = [{S.NAME: c10d, S.KIND: Kind.CPU_OP, S.TS_NS: t, S.DUR_NS: 5_000, **host}]
    if sibling:
        rows.append({S.NAME: "record_param_comms", S.KIND: Kind.COMM_OP, S.TS_NS: t + 100,
                     S.DUR_NS: 500, S.OP: S.Op.ALL_REDUCE, **host})
    rows.append({S.NAME: "cudaLaunchKernel", S.KIND: Kind.RUNTIME, S.TS_NS: t + 2_000,
                 S.DUR_NS: 100, S.CORRELATION: corr, **host})
    rows.append({S.NAME: SENDRECV, S.KIND: Kind.KERNEL, S.PID: 0, S.TID: 7, S.TS_NS: t + 3_000,
                 S.DUR_NS: 9_000, S.CORRELATION: corr, S.OP: S.Op.SEND_RECV,
                 S.META_SOURCE: S.MetaSource.NAME})
    return rows


def _with_world(run: api.Run, world: int, pgs: list[list[int]] | None = None) -> api.Run:
    info = S.conform(pa.table({S.RANK: pa.array([0], pa.int32()),
                               S.WORLD_SIZE: pa.array([world], pa.int32())}), S.RANK_INFO)
    groups = run.process_groups
    if pgs is not None:
        groups = S.conform(pa.Table.from_pylist([
            {S.RANK: 0, S.PG_NAME: str(i), S.PG_RANKS: m} for i, m in enumerate(pgs)]),
            S.PROCESS_GROUPS)
    return api.Run(events=run.events, process_groups=groups, rank_info=info)


def test_kernel_op_comes_from_the_enclosing_c10d_op() -> None:
    # GIVEN SendRecv-named kernels launched by c10d::alltoall_base_ and by c10d::allreduce_
    # (whose record_param_comms closed before the launch: the outer op must be found)
    events = (_launched("c10d::alltoall_base_", 11, 0)
              + _launched("c10d::allreduce_", 12, 100_000, sibling=True))
    rows = attribute(make_run(events))
    kernels = [r for r in rows if r[S.KIND] == Kind.KERNEL]
    # THEN their ops are the launchers', not the name's send_recv
    assert [r[S.OP] for r in kernels] == [S.Op.ALL_TO_ALL, S.Op.ALL_REDUCE]


def test_a_kernel_with_its_own_args_keeps_its_op() -> None:
    # GIVEN a kernel whose op came from its own collective args
    events = _launched("c10d::alltoall_base_", 11, 0)
    events[-1] = {**events[-1], S.META_SOURCE: S.MetaSource.ARGS}
    kernel = next(r for r in attribute(make_run(events)) if r[S.KIND] == Kind.KERNEL)
    # THEN the launcher does not override it
    assert kernel[S.OP] == S.Op.SEND_RECV


def test_world_is_a_verdict_only_when_no_subgroup_can_exist() -> None:
    events = _launched("c10d::allreduce_", 11, 0)
    run = make_run(events)

    def kernel_of(r: api.Run, topo: Topology | None = None) -> dict[str, Any]:
        return next(x for x in attribute(r, topo) if x[S.KIND] == Kind.KERNEL)

    # GIVEN only distributedInfo's world size: ambiguous, WORLD named as a candidate
    k = kernel_of(_with_world(run, 128))
    assert (k[S.GROUP], k[S.STATUS]) == (None, Status.AMBIGUOUS)
    assert "candidates WORLD (or a subgroup" in k[S.REASON]
    # GIVEN a pg_config that lists only the default group: WORLD
    k = kernel_of(_with_world(run, 4, [[0, 1, 2, 3]]))
    assert (k[S.GROUP], k[S.STATUS]) == (Group.WORLD, Status.ATTRIBUTED)
    # GIVEN a pg_config with a subgroup: ambiguous
    k = kernel_of(_with_world(run, 4, [[0, 1, 2, 3], [0, 1]]))
    assert k[S.STATUS] == Status.AMBIGUOUS
    # GIVEN a topology with TP 4 of a world of 4 (distinct communicators): both candidates
    k = kernel_of(_with_world(run, 4), Topology(ParallelConfig(tp=4)))
    assert k[S.STATUS] == Status.AMBIGUOUS and "candidates WORLD, TP" in k[S.REASON]
