"""tracekit synth: deterministic bytes, Kineto-shaped events of the chosen era, ground truth."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest

from tracekit.errors import ConfigError
from tracekit.synth import ModelShape, SynthConfig, synth_run
from tracekit.synth.config import process_groups, rank_groups, trace_name
from tracekit.synth.plan import plan_step

SMALL = ModelShape(hidden=256, tokens=8, extend_tokens=32, layers=2)
BASE = SynthConfig(tp=4, dp=2, enable_dp_attention=True, ep=4, steps=3, shape=SMALL)


def _load(path: Path) -> dict:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    # GIVEN one config WHEN written twice (serial and on 2 processes) and with another seed
    synth_run(BASE, tmp_path / "a", jobs=1)
    synth_run(BASE, tmp_path / "b", jobs=2)
    synth_run(dataclasses.replace(BASE, seed=1), tmp_path / "c", jobs=1)
    a, b, c = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    # THEN the same seed gives the same bytes, another seed other trace bytes
    assert a == b
    assert len(a) == 4 + 4 + 1  # traces, sidecars, manifest
    trace = trace_name(BASE, 0)
    assert a[trace] != c[trace]
    # and no temporary file is left behind
    assert not [n for n in a if n.startswith(".")]


def test_sglang_file_names_and_manifest(tmp_path: Path) -> None:
    manifest = synth_run(BASE, tmp_path, jobs=1)
    assert trace_name(BASE, 3) == "1790000000.0000000-TP-3-DP-1-EP-3.trace.json.gz"
    assert manifest["world_size"] == 4
    assert manifest["config"]["tp_size"] == 4 and manifest["config"]["enable_dp_attention"]
    for r, entry in manifest["ranks"].items():
        assert (tmp_path / entry["trace"]).is_file()
        assert json.loads((tmp_path / entry["sidecar"]).read_text())["rank"] == int(r)


def test_record_param_comms_and_enriched_kernels_match(tmp_path: Path) -> None:
    # GIVEN torch 2.13 args WHEN a rank is read back
    synth_run(BASE, tmp_path, jobs=1)
    doc = _load(tmp_path / trace_name(BASE, 1))
    events = doc["traceEvents"]
    rpc = [e for e in events if e.get("name") == "record_param_comms"]
    kernels = {e["args"].get("External id"): e for e in events if e.get("cat") == "kernel"}
    assert rpc
    pg_ranks = {g["pg_name"]: g["ranks"] for g in doc["distributedInfo"]["pg_config"]}
    for op in rpc:
        a = op["args"]
        # THEN every op has the era's keys, its group is in pg_config, and its kernel carries
        # the copied keys (not Rank / Global rank start / Is asynchronized op)
        for key in ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
                    "Process Group Name", "Process Group Description", "Process Group Ranks",
                    "Seq", "Comms Id", "Rank", "Is asynchronized op"):
            assert key in a, key
        assert json.loads(a["Process Group Ranks"]) == pg_ranks[a["Process Group Name"]]
        k = kernels[a["External id"]]["args"]
        for key in ("Collective name", "In msg nelems", "Process Group Name", "Seq", "Comms Id"):
            assert k[key] == a[key]
        assert "Rank" not in k and "Global rank start" not in k
    # the launch -> kernel ac2g flows pair up by correlation
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    finishes = {e["id"] for e in events if e.get("ph") == "f"}
    assert finishes <= starts


def test_comms_ids_agree_across_the_ranks_of_a_group(tmp_path: Path) -> None:
    synth_run(BASE, tmp_path, jobs=1)
    ids = []
    for r in range(4):
        ev = _load(tmp_path / trace_name(BASE, r))["traceEvents"]
        ids.append([(e["args"]["Process Group Description"], e["args"]["Comms Id"])
                    for e in ev if e.get("name") == "record_param_comms"
                    and e["args"]["Process Group Description"] == "tp:device"])
    assert ids[0] and all(x == ids[0] for x in ids)


@pytest.mark.parametrize(("nccl", "pattern"), [
    ("2.11", r"^ncclKernel_\w+\(ncclWorkElem\)$"),
    ("2.17", r"^ncclKernel_\w+\(ncclDevComm\*, unsigned long, ncclWork\*\)$"),
    ("2.19", r"^ncclDevKernel_\w+\(ncclDevComm\*, unsigned long, ncclWork\*\)$"),
    ("2.23", r"^ncclDevKernel_\w+\(ncclDevKernelArgsStorage<4096ul>\)$"),
])
def test_nccl_kernel_names_follow_the_era(tmp_path: Path, nccl: str, pattern: str) -> None:
    cfg = dataclasses.replace(BASE, nccl=nccl, steps=1, custom_ar=False)
    synth_run(cfg, tmp_path, jobs=1)
    names = {e["name"] for e in _load(tmp_path / trace_name(cfg, 0))["traceEvents"]
             if e.get("cat") == "kernel" and e["name"].startswith("nccl")}
    assert names and all(re.match(pattern, n) for n in names), names


def test_symmetric_kernels_in_graph_replays_from_nccl_2_27(tmp_path: Path) -> None:
    cfg = SynthConfig(tp=4, steps=2, nccl="2.27", custom_ar=False, shape=SMALL)
    synth_run(cfg, tmp_path, jobs=1)
    names = {e["name"] for e in _load(tmp_path / trace_name(cfg, 0))["traceEvents"]
             if e.get("cat") == "kernel"}
    assert "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16" in names


def test_torch_2_3_era_uses_group_id_and_uid(tmp_path: Path) -> None:
    cfg = dataclasses.replace(BASE, torch="2.3", steps=1)
    synth_run(cfg, tmp_path, jobs=1)
    doc = _load(tmp_path / trace_name(cfg, 0))
    assert all("uid" in g and "pg_desc" not in g for g in doc["distributedInfo"]["pg_config"])
    rpc = [e["args"] for e in doc["traceEvents"] if e.get("name") == "record_param_comms"]
    assert rpc and all("Process Group ID" in a and "Process Group Name" not in a for a in rpc)


def test_graph_replays_carry_no_comm_metadata(tmp_path: Path) -> None:
    # GIVEN decode steps replayed as CUDA graphs
    synth_run(BASE, tmp_path, jobs=1)
    events = _load(tmp_path / trace_name(BASE, 0))["traceEvents"]
    graph = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    assert len(graph) == BASE.steps - BASE.extend_steps
    replayed = [e for e in events if e.get("cat") == "kernel"
                and e["args"]["correlation"] in graph]
    # THEN their kernels (comm ones included) have no External id and no collective args
    assert any(e["name"].startswith("nccl") for e in replayed)
    assert all("Collective name" not in e["args"] and "External id" not in e["args"]
               for e in replayed)


def test_timestamps_are_printed_as_kineto_does(tmp_path: Path) -> None:
    synth_run(dataclasses.replace(BASE, gzip=False), tmp_path, jobs=1)
    text = (tmp_path / trace_name(dataclasses.replace(BASE, gzip=False), 0)).read_text()
    values = re.findall(r'"(?:ts|dur)":([0-9.]+)', text)
    assert values and all(re.fullmatch(r"\d+\.\d{3}", v) for v in values if v != "0")


def test_sidecar_is_the_plan_with_members_from_pg_config(tmp_path: Path) -> None:
    synth_run(BASE, tmp_path, jobs=1)
    side = json.loads((tmp_path / "rank2.sidecar.json").read_text())["collectives"]
    expected = [s for step in range(BASE.steps) for s in plan_step(BASE, 2, step)[1]]
    assert [(c["op"], c["path"], c["layer"]) for c in side] == [
        (s.op, s.path, s.layer) for s in expected]
    assert [c["index"] for c in side] == list(range(len(side)))
    mine = rank_groups(BASE, 2, process_groups(BASE))
    # attn_tp = 2: the attention reduce runs on {2, 3}, the DP gather's all-gather on TP
    attn = [c for c in side if c["group"] == "ATTN_TP"]
    assert attn and all(c["members"] == [2, 3] for c in attn)
    assert mine.device("attention_tp").desc == "attention_tp:device"
    assert {c["path"] for c in side} >= {"attn_reduce.attn_tp", "dp_gather.rs_ag"}


def test_deepep_and_pynccl_v_collectives(tmp_path: Path) -> None:
    deepep = SynthConfig(tp=4, dp=4, enable_dp_attention=True, ep=4, a2a="deepep", steps=2,
                         shape=SMALL)
    synth_run(deepep, tmp_path / "d", jobs=1)
    names = [e["name"] for e in _load(tmp_path / "d" / trace_name(deepep, 0))["traceEvents"]
             if e.get("cat") == "kernel"]
    assert any("deep_ep::intranode::dispatch<" in n for n in names)
    assert any("deep_ep::internode_ll::combine<" in n for n in names)
    assert any("deep_ep::layout::get_dispatch_layout" in n for n in names)
    gatherv = SynthConfig(tp=4, dp=4, enable_dp_attention=True, ep=1, dp_gather="gatherv",
                          steps=1, shape=SMALL)
    synth_run(gatherv, tmp_path / "g", jobs=1)
    doc = _load(tmp_path / "g" / trace_name(gatherv, 0))
    kernels = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    # 2 layers x 4 roots of grouped Broadcast (all_gatherv) and of grouped Reduce (reduce_scatterv)
    assert sum(n.startswith("ncclDevKernel_Broadcast_RING_LL") for n in kernels) == 8
    assert sum(n.startswith("ncclDevKernel_Reduce_Sum_bf16_RING_LL") for n in kernels) == 8
    assert not any(e.get("name") == "record_param_comms" for e in doc["traceEvents"])


def test_planted_straggler_waits_least(tmp_path: Path) -> None:
    # GIVEN rank 3 computing 1.6x slower WHEN the others reach a collective first
    cfg = SynthConfig(tp=4, steps=3, stragglers=(3,), custom_ar=False, cuda_graph=False,
                      shape=SMALL)
    synth_run(cfg, tmp_path, jobs=1)

    def comm_time(r: int) -> float:
        ev = _load(tmp_path / trace_name(cfg, r))["traceEvents"]
        return sum(e["dur"] for e in ev if e.get("cat") == "kernel"
                   and e["name"].startswith("nccl"))

    # THEN its collectives are the shortest (the others wait for it inside theirs)
    times = [comm_time(r) for r in range(4)]
    assert times[3] < min(times[:3])


def test_invalid_configs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multiple of ep"):
        synth_run(SynthConfig(tp=6, ep=4), tmp_path)
    with pytest.raises(ConfigError, match="enable-dp-attention"):
        synth_run(SynthConfig(tp=4, dp=2), tmp_path)
    with pytest.raises(ConfigError, match="NCCL"):
        synth_run(SynthConfig(tp=2, nccl="2.7"), tmp_path)


def test_target_size_sets_the_step_count(tmp_path: Path) -> None:
    cfg = SynthConfig(tp=2, cuda_graph=False, shape=SMALL)
    manifest = synth_run(cfg, tmp_path, target_mb=1.0, jobs=1)
    size = manifest["synth"]["json_bytes"]["0"]
    assert 0.8e6 < size < 1.2e6


def test_cli_writes_the_same_run_and_reports_bad_configs(tmp_path: Path, capsys) -> None:
    from tracekit.cli import main

    # GIVEN the CLI with the options of BASE WHEN run THEN it writes the API's bytes
    args = ["synth", "--out", str(tmp_path / "cli"), "--tp", "4", "--dp", "2",
            "--enable-dp-attention", "--ep", "4", "--steps", "3", "--hidden", "256",
            "--tokens", "8", "--extend-tokens", "32", "--layers", "2", "-j", "1"]
    with pytest.raises(SystemExit) as ok:
        main(args)
    assert ok.value.code == 0
    synth_run(BASE, tmp_path / "api", jobs=1)
    cli_files, api_files = _files(tmp_path / "cli"), _files(tmp_path / "api")
    assert {k: v for k, v in cli_files.items() if k != "manifest.json"} == {
        k: v for k, v in api_files.items() if k != "manifest.json"}
    # a bad parallel config is one line on stderr and exit 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as bad:
        main(["synth", "--out", str(tmp_path / "bad"), "--tp", "6", "--ep", "4"])
    assert bad.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: ") and err.count("\n") == 1


def test_long_rank_lists_are_truncated_as_torch_does() -> None:
    from tracekit.synth.comm_args import ranks_text

    assert ranks_text(tuple(range(4))) == "[0, 1, 2, 3]"
    assert ranks_text(tuple(range(30))).endswith(", 29]")
    text = ranks_text(tuple(range(64)))
    assert text == "[" + ", ".join(str(i) for i in range(30)) + ", ...]"
