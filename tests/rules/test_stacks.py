"""Call sites of rows that only the kernel rules class as communication (issue 14, item 2).

The parser resolves call sites only for rows with an op of their own; a kernel a rule file
classes as communication gets its call site in the rules stage, from the python frames around
the runtime call that launched it (same correlation). The kernel name below is UCCL-EP's
(uccl-project/uccl, ep/src/internode_ll.cu: ``uccl::ep::dispatch_kernel``) as issue 14 quotes
it; its name contains none of the words the parser once looked for ("dispatch" aside, which a
renamed ``uccl::ep::send_tokens`` would not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rules.test_engine import make_run

from tracekit import api
from tracekit import schema as S
from tracekit.rules.engine import attribute_run
from tracekit.schema import Kind

RULE = """
version: 1
name: user-ep
kernel_classes:
  - {id: user.ep.send, match: 'uccl::ep::send_tokens', kinds: [kernel], class: communication,
     op: dispatch, library: uccl_ep, role: dispatch}
"""
KERNEL = "void uccl::ep::send_tokens<8, __nv_bfloat16>(void*, int)"
COMPUTE = "void at::native::vectorized_elementwise_kernel<4>(int)"


def _launched(name: str, corr: int, t: int) -> list[dict[str, Any]]:
    """Python frames on thread 1 around a cudaLaunchKernel, and the kernel it launched."""
    return [
        {S.NAME: "x/model.py(40): forward", S.KIND: Kind.PYTHON, S.TS_NS: t, S.DUR_NS: 900,
         S.PY_ID: corr * 10, S.PY_PARENT_ID: -1, S.TID: 1},
        {S.NAME: "x/ep.py(12): UcclEpDispatcher.dispatch", S.KIND: Kind.PYTHON,
         S.TS_NS: t + 100, S.DUR_NS: 500, S.PY_ID: corr * 10 + 1,
         S.PY_PARENT_ID: corr * 10, S.TID: 1},
        {S.NAME: "cudaLaunchKernel", S.KIND: Kind.RUNTIME, S.TS_NS: t + 200, S.DUR_NS: 10,
         S.CORRELATION: corr, S.TID: 1},
        {S.NAME: name, S.KIND: Kind.KERNEL, S.TS_NS: t + 300, S.DUR_NS: 50,
         S.CORRELATION: corr, S.PID: 0, S.TID: 7},
    ]


def _attributed(tmp_path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rule = tmp_path / "user.yaml"
    rule.write_text(RULE)
    attributed, _ = attribute_run(make_run(rows), api.AnalyzeOptions(rules_files=(rule,)))
    S.validate(attributed, S.ATTRIBUTED)
    return attributed.to_pylist()


def test_a_kernel_classed_communication_by_a_user_rule_gets_its_launch_call_site(
        tmp_path: Path) -> None:
    # GIVEN a user rule classing uccl::ep::send_tokens as communication, and that kernel and
    # a compute kernel each launched under the same python frames
    rows = _launched(KERNEL, 1, 0) + _launched(COMPUTE, 2, 10_000)
    out = _attributed(tmp_path, rows)
    comm = next(r for r in out if r[S.NAME] == KERNEL)
    compute = next(r for r in out if r[S.NAME] == COMPUTE)
    # THEN the communication kernel carries the frames around its launch, innermost first
    assert comm[S.KERNEL_CLASS] == S.KernelClass.COMM
    assert comm[S.CALL_SITE] == ("UcclEpDispatcher.dispatch (x/ep.py:12) <- "
                                 "forward (x/model.py:40)")
    # and the compute kernel none: call sites are resolved for communication rows only
    assert compute[S.CALL_SITE] is None


def test_without_python_frames_the_call_site_stays_empty(tmp_path: Path) -> None:
    # GIVEN the same kernel launched without any python frames
    rows = [r for r in _launched(KERNEL, 1, 0) if r[S.KIND] != Kind.PYTHON]
    (comm,) = [r for r in _attributed(tmp_path, rows) if r[S.NAME] == KERNEL]
    # THEN it is communication without a call site
    assert comm[S.KERNEL_CLASS] == S.KernelClass.COMM and comm[S.CALL_SITE] is None


def test_vllm_agrs_all2all_nccl_kernels_carry_the_backend_call_site(tmp_path: Path) -> None:
    # GIVEN vLLM's allgather_reducescatter all2all backend (vllm-project/vllm
    # vllm/distributed/device_communicators/all2all.py, AgRsAll2AllManager): dispatch
    # gathers with all_gatherv (pynccl: grouped ncclBroadcast kernels), combine scatters with
    # reduce_scatterv (grouped ncclReduce kernels); no record_param_comms around them
    a2a = "vllm/distributed/device_communicators/all2all.py"
    rows: list[dict[str, Any]] = []
    args = "(ncclDevKernelArgsStorage<4096ul>)"
    for corr, (func, line, name) in enumerate((
            ("dispatch", 118, "ncclDevKernel_Broadcast_RING_LL" + args),
            ("combine", 142, "ncclDevKernel_Reduce_Sum_bf16_RING_LL" + args)), start=1):
        frames = _launched(name, corr, corr * 10_000)
        frames[1] = {**frames[1], S.NAME: f"{a2a}({line}): {func}"}
        rows += frames
    out = [r for r in _attributed(tmp_path, rows) if r[S.KIND] == Kind.KERNEL]
    # THEN each NCCL kernel is communication with the backend's frame as its call site
    assert [r[S.OP] for r in out] == [S.Op.BROADCAST, S.Op.REDUCE]
    assert [r[S.CALL_SITE].split(" <- ")[0] for r in out] == [
        f"dispatch ({a2a}:118)", f"combine ({a2a}:142)"]
