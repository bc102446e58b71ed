"""The worked example docs/examples/rules/uccl-ep.yaml on a generated 2-rank GPU Kineto trace.

The kernel name shape is the one issue 14 gives (`void uccl::ep::dispatch_kernel<8,
__nv_bfloat16>(...)`); the python frame `UcclEpDispatcher.dispatch` is the launcher it names.
Expected facts (communication, MOE_EP, the two new labels) are the example's stated intent,
read back from the Parquet that `tracekit export` writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from click.testing import CliRunner

from tracekit import schema as S
from tracekit.cli import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "rules" / "uccl-ep.yaml"
DISPATCH = ("void uccl::ep::dispatch_kernel<8, __nv_bfloat16>(__nv_bfloat16*, float*, int*, "
            "long const*, int, int)")
COMBINE = ("void uccl::ep::combine_kernel<8, __nv_bfloat16>(__nv_bfloat16*, float const*, "
           "int const*, int, int)")


def _x(name: str, cat: str, ts: float, dur: float, pid: int, tid: int,
       **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _rank_events(with_stack: bool) -> list[dict[str, Any]]:
    """Two layers of dispatch + combine: CPU launches (under python frames when with_stack)
    and the GPU kernels on stream 25, linked by correlation."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t, corr, py_id = 1000.0, 100, 1
    for _layer in range(2):
        for method, kname in (("dispatch", DISPATCH), ("combine", COMBINE)):
            if with_stack:
                events.append(_x(f"uccl/ep/dispatcher.py(120): UcclEpDispatcher.{method}",
                                 "python_function", t, 20.0, 1, 1,
                                 **{"Python id": py_id, "Python parent id": None}))
                py_id += 1
            events.append(_x("cudaLaunchKernel", "cuda_runtime", t + 2.0, 3.0, 1, 1,
                             correlation=corr))
            events.append(_x(kname, "kernel", t + 10.0, 40.0, 0, 25, correlation=corr,
                             device=0, stream=25))
            t += 100.0
            corr += 1
    return events


def _write_run(folder: Path, with_stack: bool) -> Path:
    folder.mkdir()
    for rank in (0, 1):
        doc = {"schemaVersion": 1, "distributedInfo": {
            "backend": "nccl", "rank": rank, "world_size": 2, "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                 "pg_size": 2, "ranks": [0, 1]}]},
            "traceEvents": _rank_events(with_stack)}
        (folder / f"rank{rank}.trace.json").write_text(json.dumps(doc))
    return folder


def _export(run: Path, out: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["export", str(run), "--rules", str(EXAMPLE),
                                      "--parquet", str(out)])
    assert result.exit_code == 0, result.output
    return pq.read_table(out / "attributed.parquet").to_pylist()


def test_uccl_example_attributes_kernels_with_and_without_a_stack(tmp_path: Path) -> None:
    for with_stack in (True, False):
        # GIVEN a 2-rank GPU trace of uccl::ep dispatch / combine kernels
        run = _write_run(tmp_path / f"run_{with_stack}", with_stack)
        # WHEN exported with the example rule file
        rows = _export(run, tmp_path / f"out_{with_stack}")
        kernels = [r for r in rows if r[S.NAME] in (DISPATCH, COMBINE)]
        # THEN every kernel of both ranks is communication on MOE_EP with its new path
        assert len(kernels) == 8 and {r[S.RANK] for r in kernels} == {0, 1}
        for r in kernels:
            want = "uccl_ep.dispatch" if r[S.NAME] == DISPATCH else "uccl_ep.combine"
            assert (r[S.KERNEL_CLASS], r[S.GROUP], r[S.PATH]) == (
                "communication", "MOE_EP", want), r
            assert r[S.PHASE] == want.split(".")[1]
        if with_stack:
            assert all("UcclEpDispatcher" in (r[S.CALL_SITE] or "") for r in kernels)
            assert {r[S.RULE_ID].split("+")[-1] for r in kernels} == {
                "call.uccl_ep.dispatch", "call.uccl_ep.combine"}
        else:
            assert all(r[S.CALL_SITE] is None for r in kernels)


def test_without_the_example_the_kernels_have_no_uccl_path(tmp_path: Path) -> None:
    # GIVEN the same trace WHEN exported without the rule file THEN no such label appears
    run = _write_run(tmp_path / "run", True)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["export", str(run), "--parquet", str(out)])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out / "attributed.parquet").to_pylist()
    kernels = [r for r in rows if r[S.NAME] in (DISPATCH, COMBINE)]
    assert len(kernels) == 8
    assert {(r[S.KERNEL_CLASS], r[S.PATH]) for r in kernels} == {("compute", None)}
