"""sample_traces/: every scenario is complete, its ground truth agrees with its traces, and
regenerating it gives the same ground truth."""

from __future__ import annotations

import collections
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.rules.labels import PathLabel
from tracekit.schema import Group, Op
from tracekit.workloads.samples import SCENARIOS

C10D_COLLECTIVES = {"c10d::allreduce_", "c10d::broadcast_", "c10d::reduce_",
                    "c10d::_allgather_base_", "c10d::_reduce_scatter_base_",
                    "c10d::alltoall_base_", "c10d::barrier"}
CONFIG_KEYS = {"tp_size", "dp_size", "enable_dp_attention", "ep_size", "moe_dp_size",
               "attn_cp_size", "npu", "attn_reduce", "dp_gather", "combine", "a2a", "bug",
               "layers"}


def _scenarios(root: Path) -> list[Path]:
    return [root / s.name for s in SCENARIOS]


def test_every_scenario_is_there_and_small(sample_traces: Path) -> None:
    # GIVEN the bundled folder THEN every scenario has its files and the whole is < 5 MB
    for folder in _scenarios(sample_traces):
        man = json.loads((folder / "manifest.json").read_text())
        assert man["scenario"] == folder.name and set(man["config"]) >= CONFIG_KEYS
        assert man["command"].startswith("python -m tracekit.workloads")
        assert len(man["ranks"]) == man["world_size"]
        for files in man["ranks"].values():
            assert (folder / files["trace"]).is_file() and (folder / files["sidecar"]).is_file()
        assert (folder / "README.md").is_file()
    total = sum(p.stat().st_size for p in sample_traces.rglob("*") if p.is_file())
    assert total < 5_000_000
    assert (sample_traces / "README.md").is_file()


@pytest.mark.parametrize("scenario", [s.name for s in SCENARIOS])
def test_ground_truth_agrees_with_traces(sample_traces: Path, scenario: str) -> None:
    folder = sample_traces / scenario
    man = json.loads((folder / "manifest.json").read_text())
    per_group: dict[tuple[str, tuple[int, ...]], dict[int, list[tuple]]] = (
        collections.defaultdict(dict))
    for rank_s, files in man["ranks"].items():
        rank = int(rank_s)
        side = json.loads((folder / files["sidecar"]).read_text())
        with gzip.open(folder / files["trace"], "rt") as fh:
            trace = json.load(fh)
        entries = side["collectives"]
        # THEN labels come from the schema vocabularies and indexes run 0..n-1
        assert side["rank"] == rank and [e["index"] for e in entries] == list(range(len(entries)))
        for e in entries:
            assert e["op"] in Op.ALL and e["group"] in Group.ALL and e["path"] in PathLabel.ALL
            assert e["phase"] == PathLabel.PHASE_OF[e["path"]] and rank in e["members"]
            per_group[(e["group_desc"], tuple(e["members"]))].setdefault(rank, []).append(
                (e["op"], e["path"], e["layer"]))
        # AND every sidecar group is a process group the trace declares, same members
        pgs = {(pg["pg_desc"], tuple(pg["ranks"])) for pg in trace["distributedInfo"]["pg_config"]}
        assert {(e["group_desc"], tuple(e["members"])) for e in entries} <= pgs
        # AND the trace holds exactly one c10d collective op per sidecar entry
        ops = [e for e in trace["traceEvents"] if e.get("name") in C10D_COLLECTIVES]
        assert len(ops) == len(entries)
    # AND all members of a group issued the same sequence on it
    for key, by_rank in per_group.items():
        assert sorted(by_rank) == list(key[1]), key
        assert len({tuple(seq) for seq in by_rank.values()}) == 1, key


@pytest.mark.slow
def test_regenerating_gives_identical_ground_truth(sample_traces: Path, tmp_path: Path) -> None:
    # GIVEN a bundled scenario WHEN it is generated again elsewhere
    # (tracekit.workloads.samples.generate in launch_batch.py, ranks forked from one forkserver)
    scenario = next(s for s in SCENARIOS if s.name == "tp4_dp4_gatherv_rsv")
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("launch_batch.py")),
                           "--sample", scenario.name, str(tmp_path)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = tmp_path / scenario.name
    assert (fresh / "manifest.json").is_file()
    # THEN sidecars and manifest are byte-identical (only the traces' timings differ)
    for name in sorted(p.name for p in (sample_traces / scenario.name).glob("*.json")):
        assert (fresh / name).read_text() == (sample_traces / scenario.name / name).read_text()
