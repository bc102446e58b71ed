"""Real reference traces (HTA test data): metadata-driven groups and p2p SendRecv kernels."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from tracekit import api
from tracekit import schema as S
from tracekit.rules.engine import attribute_run
from tracekit.schema import Group, KernelClass, Status


def attributed(path: Path) -> list[dict[str, object]]:
    run = api.load(path, api.LoadOptions(jobs=1))
    table, findings = attribute_run(run, api.AnalyzeOptions())
    S.validate(table, S.ATTRIBUTED)
    assert findings.num_rows == 0
    keep = pc.fill_null(table.column(S.IS_INSTANCE), False)
    return table.filter(keep).to_pylist()


def test_nccl_data_collectives_get_their_group_from_metadata(kineto_hta: Path) -> None:
    # GIVEN HTA's nccl_data trace: NCCL kernels enriched with 'default_pg' metadata
    rows = attributed(kineto_hta / "nccl_parser_config" / "nccl_data.json.gz")
    kernels = [r for r in rows if r[S.KIND] == "kernel"]
    # THEN every NCCL kernel is a WORLD collective decided by the description
    assert len(kernels) == 21
    assert {r[S.GROUP] for r in kernels} == {Group.WORLD}
    assert {r[S.STATUS] for r in kernels} == {Status.ATTRIBUTED}
    assert all("default_pg" in str(r[S.REASON]) for r in kernels)
    assert {r[S.OP] for r in kernels} == {S.Op.ALL_REDUCE, S.Op.BROADCAST}


def test_trace_filter_sendrecv_kernels_are_point_to_point(kineto_hta: Path) -> None:
    # GIVEN HTA's trace_filter ranks (2023, no collective metadata)
    rows = attributed(kineto_hta / "trace_filter")
    sendrecv = [r for r in rows if "SendRecv" in str(r[S.NAME])]
    # THEN the SendRecv kernels are p2p communication instances, with no group invented
    assert sendrecv
    assert {(r[S.KERNEL_CLASS], r[S.KERNEL_ROLE], r[S.OP]) for r in sendrecv} == {
        (KernelClass.COMM, "p2p", S.Op.SEND_RECV)}
    assert {r[S.STATUS] for r in sendrecv} == {Status.UNATTRIBUTED}
