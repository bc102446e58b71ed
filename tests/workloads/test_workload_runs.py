"""The layer on real gloo ranks: numbers equal the single-process reference, every path issues
the collectives SGLang issues, and planted bugs are caught by the reference check.

Tolerance: torch.allclose(rtol=1e-4, atol=1e-4) (tracekit.workloads.reference.RTOL/ATOL).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.rules.labels import PathLabel
from tracekit.schema import Group, Op
from tracekit.workloads.runner import RankResult

pytestmark = pytest.mark.slow

FULL_TP = ["--tp", "4"]
DP_ATTENTION = ["--tp", "4", "--dp", "2", "--dp-attention"]
GATHERV = ["--tp", "4", "--dp", "4", "--dp-attention", "--combine", "b"]
DEEPEP = ["--tp", "4", "--dp", "4", "--dp-attention", "--ep", "4", "--a2a", "deepep"]
DEEPEP_LL = [*DEEPEP, "--deepep-mode", "low_latency"]
FUSEEP = ["--tp", "4", "--ep", "4", "--a2a", "fuseep", "--npu"]
PLANTED_BUGS = [
    ["--tp", "4", "--dp", "4", "--dp-attention", "--combine", "c", "--bug", "double-reduce"],
    ["--tp", "4", "--dp", "2", "--dp-attention", "--dp-gather", "max_len", "--bug",
     "global-tp-reduce"],
]
ALL_ARGS = [FULL_TP, DP_ATTENTION, GATHERV, DEEPEP, DEEPEP_LL, FUSEEP, *PLANTED_BUGS]


def _name(args: list[str]) -> str:
    return "_".join(a.strip("-") for a in args)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every configuration of this module, run once in one helper process
    (tests/workloads/launch_batch.py: the ranks fork from one torch-loaded forkserver)."""
    out = tmp_path_factory.mktemp("workload_runs")
    spec = out / "spec.json"
    spec.write_text(json.dumps({_name(a): [*a, "--layers", "1", "--no-cpu-groups"]
                                for a in ALL_ARGS}))
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("launch_batch.py")),
                           str(spec), str(out)], capture_output=True, text=True, timeout=850,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _run(args: list[str], runs: Path) -> tuple[list[RankResult], dict[int, list[dict]]]:
    folder = runs / _name(args)
    if (folder / "error.txt").exists():
        pytest.fail((folder / "error.txt").read_text())
    world_size, results = pickle.loads((folder / "results.pkl").read_bytes())
    sidecars = {r: json.loads((folder / f"rank{r}.sidecar.json").read_text())["collectives"]
                for r in range(world_size)}
    for entries in sidecars.values():  # each step starts with a barrier on world:cpu
        assert (entries[0]["op"], entries[0]["group"], entries[0]["path"], entries[0]["layer"]
                ) == (Op.BARRIER, Group.WORLD, PathLabel.OTHER, None)
    return results, {r: [e for e in v if e["layer"] is not None] for r, v in sidecars.items()}


def _shape(entries: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["op"], e["group"], e["path"]) for e in entries]


def test_full_tp_matches_reference_with_two_tp_allreduces(runs: Path) -> None:
    # GIVEN tp=4 without DP attention WHEN one layer runs on 4 gloo ranks
    results, sidecars = _run(FULL_TP, runs)
    # THEN every rank matches the reference
    assert all(r.matches for r in results), results
    # AND the layer did attention AllReduce then post-experts AllReduce, both on tp:device
    assert _shape(sidecars[0]) == [(Op.ALL_REDUCE, Group.TP, PathLabel.ATTN_FULL_TP),
                                   (Op.ALL_REDUCE, Group.TP, PathLabel.NO_DPA_MOE_AR)]
    assert {e["group_desc"] for e in sidecars[3]} == {"tp:device"}


def test_dp_attention_attn_tp_and_sum_len_gather(runs: Path) -> None:
    # GIVEN tp=4 dp=2 DP attention (attn_tp=2) WHEN it runs
    results, sidecars = _run(DP_ATTENTION, runs)
    assert all(r.matches for r in results), results
    # THEN attention reduces on ATTN_TP (members by attn_tp fastest), gather and combine on TP
    first = sidecars[2]
    assert _shape(first) == [(Op.ALL_REDUCE, Group.ATTN_TP, PathLabel.ATTN_TP),
                             (Op.ALL_REDUCE, Group.TP, PathLabel.GATHER_AR),
                             (Op.ALL_REDUCE, Group.TP, PathLabel.COMBINE_A)]
    assert first[0]["members"] == [2, 3] and first[0]["group_desc"] == "attention_tp:device"
    assert first[1]["call"] == "_dp_gather_via_all_reduce"


def test_gatherv_and_reduce_scatterv_move_real_token_counts(runs: Path) -> None:
    # GIVEN tp=4 dp=4 (attn_tp=1) with gather-v and ReduceScatterV WHEN it runs
    results, sidecars = _run(GATHERV, runs)
    assert all(r.matches for r in results), results
    # THEN 4 broadcasts (one per root) then 4 reduces, uneven sizes, no post-experts AllReduce
    entries = sidecars[1]
    assert [e["op"] for e in entries] == [Op.BROADCAST] * 4 + [Op.REDUCE] * 4
    assert {e["path"] for e in entries[:4]} == {PathLabel.GATHER_V}
    assert {e["path"] for e in entries[4:]} == {PathLabel.COMBINE_B}
    assert len({e["bytes"] for e in entries[:4]}) == 4  # every DP rank has its own count


def test_deepep_all_to_all_has_uneven_splits(runs: Path) -> None:
    # GIVEN ep=4 DeepEP-like dispatch/combine WHEN it runs
    results, sidecars = _run(DEEPEP, runs)
    assert all(r.matches for r in results), results
    # THEN counts exchange, dispatch and combine run on the TP device group (GPU mode)
    assert _shape(sidecars[0]) == [
        (Op.ALL_TO_ALL, Group.TP, PathLabel.DEEPEP_LAYOUT),
        (Op.ALL_TO_ALLV, Group.TP, PathLabel.DEEPEP_NORMAL_DISPATCH),
        (Op.ALL_TO_ALLV, Group.TP, PathLabel.DEEPEP_NORMAL_COMBINE)]
    # AND ranks send different amounts (token counts differ)
    assert len({s[1]["bytes"] for s in sidecars.values()}) > 1


def test_deepep_low_latency_uses_equal_slots(runs: Path) -> None:
    # GIVEN DeepEP low-latency mode WHEN it runs THEN numbers match, and dispatch / combine
    # are equal-split all-to-alls of the same fixed size on every rank, with no count exchange
    results, sidecars = _run(DEEPEP_LL, runs)
    assert all(r.matches for r in results), results
    assert _shape(sidecars[2]) == [(Op.ALL_TO_ALL, Group.TP, PathLabel.DEEPEP_LL_DISPATCH),
                                   (Op.ALL_TO_ALL, Group.TP, PathLabel.DEEPEP_LL_COMBINE)]
    assert len({s[0]["bytes"] for s in sidecars.values()}) == 1
    assert sidecars[0][0]["call"] == "low_latency_dispatch"


def test_fuseep_runs_on_standalone_moe_ep_in_npu_mode(runs: Path) -> None:
    results, sidecars = _run(FUSEEP, runs)
    assert all(r.matches for r in results), results
    moe = [e for e in sidecars[0] if e["path"] == PathLabel.FUSEEP]
    assert [e["op"] for e in moe] == [Op.ALL_TO_ALL, Op.ALL_TO_ALL]
    assert {e["group_desc"] for e in moe} == {"moe_ep:device"}
    assert {e["call"] for e in moe} == {"fused_deep_moe"}
    # AND the attention AllReduce uses tp:device, which has the same members
    attn = [e for e in sidecars[0] if e["path"] == PathLabel.ATTN_FULL_TP]
    assert attn[0]["members"] == moe[0]["members"] == [0, 1, 2, 3]


@pytest.mark.parametrize("args", PLANTED_BUGS)
def test_planted_bugs_mismatch_the_reference(args: list[str], runs: Path) -> None:
    # GIVEN a planted bug WHEN it runs THEN no rank matches the reference
    results, sidecars = _run(args, runs)
    assert not any(r.matches for r in results)
    assert min(r.max_abs_diff for r in results) > 1e-2
    paths = [e["path"] for e in sidecars[0]]
    if "double-reduce" in args:  # both the ReduceScatter and the post-experts AllReduce ran
        assert PathLabel.COMBINE_C in paths and PathLabel.COMBINE_A in paths
    else:  # the attention reduction went over the global TP group
        assert (Op.ALL_REDUCE, Group.TP, PathLabel.ATTN_FULL_TP) in _shape(sidecars[0])
