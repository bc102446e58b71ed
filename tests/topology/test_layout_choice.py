"""Choosing a layout: --layout on every command, config files, the auto-pick and its note."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from tracekit import schema as S
from tracekit.cli import cli
from tracekit.errors import ConfigError
from tracekit.rules.infer import infer_topology
from tracekit.rules.loader import load_rules
from tracekit.schema import Group
from tracekit.topology.config import (
    config_from_file,
    topology_from_options,
)


def test_training_layout_tp1_dp64_ep64_loads_with_a_note() -> None:
    # GIVEN the sizes the issue found refused: TP 1, DP 64, EP 64 (no --layout)
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit", "topo", "--tp", "1", "--dp", "64", "--ep", "64"],
        capture_output=True, text=True, check=False)
    # THEN they load; one note on stderr says SGLang refused them and which layout was used
    assert proc.returncode == 0, proc.stderr
    note = proc.stderr.strip().splitlines()
    assert len(note) == 1 and note[0].startswith("tracekit: note: layout vllm chosen")
    assert "SGLang's layout refuses these sizes" in note[0]
    assert "vllm and megatron layouts both allow them and give the same groups" in note[0]
    # AND the expert-parallel group is all 64 ranks, as it is the DP group
    assert f"MOE_EP   {list(range(64))}" in proc.stdout
    assert f"DP       {list(range(64))}" in proc.stdout


def test_explicit_sglang_layout_keeps_its_refusal() -> None:
    # GIVEN the same sizes with --layout: SGLang refuses, vLLM and Megatron load, no note
    with pytest.raises(ConfigError, match="not divisible by ep\\*moe_dp"):
        topology_from_options(tp=1, dp=64, ep=64, layout="sglang")
    for name in ("vllm", "megatron"):
        topo = topology_from_options(tp=1, dp=64, ep=64, layout=name)
        assert topo is not None and topo.config.layout == name and topo.reason == ""
        assert topo.group_of(5, Group.MOE_EP) == tuple(range(64))


def test_only_one_layout_allows_the_sizes() -> None:
    # GIVEN TP 2 x DP 4 with EP 8: SGLang (tp % ep) and Megatron (etp defaults to tp: 2*8 > 8)
    # refuse; vLLM's EP spans DP x TP = 8
    topo = topology_from_options(tp=2, dp=4, ep=8)
    assert topo is not None and topo.config.layout == "vllm"
    assert "only the vllm layout allows them" in topo.reason


def test_two_layouts_with_different_groups_ask_for_layout() -> None:
    # GIVEN TP 2, DP 2, PP 2, EP 4, ETP 1: vLLM puts PP between DP and TP (EP of stage 0 is
    # 0, 1, 4, 5), Megatron puts PP last (0, 1, 2, 3)
    with pytest.raises(ConfigError, match="different groups: give --layout"):
        topology_from_options(tp=2, dp=2, pp=2, ep=4, etp=1)
    v = topology_from_options(tp=2, dp=2, pp=2, ep=4, etp=1, layout="vllm")
    m = topology_from_options(tp=2, dp=2, pp=2, ep=4, etp=1, layout="megatron")
    assert v is not None and v.group_of(0, Group.MOE_EP) == (0, 1, 4, 5)
    assert m is not None and m.group_of(0, Group.MOE_EP) == (0, 1, 2, 3)


def test_sizes_no_layout_allows_keep_sglangs_message() -> None:
    with pytest.raises(ConfigError, match=r"not divisible by ep\*moe_dp=3"):
        topology_from_options(tp=8, ep=3)


def test_config_file_says_the_layout(tmp_path: Path) -> None:
    # GIVEN a YAML config in Megatron's own argument names with `layout: megatron`
    path = tmp_path / "megatron.yaml"
    path.write_text("layout: megatron\ntensor_model_parallel_size: 2\ncontext_parallel_size: 2\n"
                    "expert_model_parallel_size: 2\nexpert_tensor_parallel_size: 1\n"
                    "data_parallel_size: 2\n")
    cfg = config_from_file(path)
    assert (cfg.layout, cfg.tp, cfg.attn_cp, cfg.ep, cfg.etp, cfg.dp, cfg.moe_dp) == (
        "megatron", 2, 2, 2, 1, 2, 4)
    # AND a flag overrides the file's layout; a bad layout value is a one-line ConfigError
    topo = topology_from_options(config=path, layout="vllm", ep=1, etp=8)
    assert topo is not None and topo.config.layout == "vllm"
    bad = tmp_path / "bad.yaml"
    bad.write_text("layout: deepspeed\ntp: 2\n")
    with pytest.raises(ConfigError, match="layout must be one of sglang, vllm, megatron"):
        config_from_file(bad)
    # AND a vLLM config with its switch name
    vpath = tmp_path / "vllm.json"
    vpath.write_text('{"layout": "vllm", "tensor_parallel_size": 2, "data_parallel_size": 4, '
                     '"enable_expert_parallel": true}')
    vcfg = config_from_file(vpath)
    assert (vcfg.ep, vcfg.etp, vcfg.enable_expert_parallel) == (8, 1, True)


def test_topo_draws_the_megatron_layout() -> None:
    # GIVEN `tracekit topo --layout megatron` for tp 2, ep 2, dp 4, pp 2, expert TP 1
    args = ["topo", "--layout", "megatron", "--tp", "2", "--ep", "2", "--dp", "4", "--pp", "2",
            "--etp", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = result.output
    # THEN the dense grid puts ranks 8, 9 on (pp 1, dp 0) and the expert grid rank 3 on
    # (pp 0, expert dp 1, ep 1); the groups follow order tp-cp-ep-dp-pp
    assert out.startswith("layout=megatron tp=2 cp=1 dp=4 pp=2 ep=2 etp=1 expert_dp=4")
    row = next(line for line in out.splitlines() if line.startswith("pp_rank = 1, dp_rank = 0"))
    assert "│ 8  │ 9  │" in row
    erow = next(line for line in out.splitlines()
                if line.startswith("pp_rank = 0, edp_rank = 1, ep_rank = 1"))
    assert "│ 3  │" in erow
    assert "MOE_DP   [0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]" in out
    assert "PP       [0, 8], [1, 9]" in out
    assert "DP_CP    = DP (cp=1" in out


def test_topo_draws_the_vllm_layout_and_json() -> None:
    args = ["topo", "--layout", "vllm", "--tp", "2", "--dp", "2", "--enable-expert-parallel"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "MOE_EP   [0, 1, 2, 3]" in result.output
    assert "dp_rank = 1" in result.output and "│ 2 e2 │ 3 e3 │" in result.output
    js = CliRunner().invoke(cli, [*args, "--json"])
    import json

    data = json.loads(js.output)
    assert data["layout"] == "vllm" and data["config"]["ep"] == 4
    assert data["groups"]["MOE_EP"] == [[0, 1, 2, 3]]


def test_wrong_layout_flag_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit", "topo", "--layout", "vllm", "--tp", "2", "--dp",
         "2", "--ep", "2"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("tracekit: error:")
    assert len(proc.stderr.strip().splitlines()) == 1 and "ep must be 1 or 4" in proc.stderr


@pytest.mark.parametrize("command", ["analyze", "check", "diff", "export", "topo"])
def test_every_layout_command_takes_layout(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    for flag in ("--layout", "--tp", "--cp", "--etp", "--enable-expert-parallel"):
        assert flag in result.output, (command, flag)


@pytest.mark.parametrize("command", ["check", "export"])
def test_check_and_export_pass_the_topology(command: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN check / export with the training sizes (the analysis itself stubbed out)
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake(execution: Any, **_: Any) -> Any:
        seen["options"] = execution.options
        raise Stop

    monkeypatch.setattr("tracekit.pipeline.stages.analyze", fake)
    run = tmp_path / "trace.json"
    run.write_text("{}")
    extra = ["--json", str(tmp_path / "o.json")] if command == "export" else []
    result = CliRunner().invoke(cli, [command, str(run), *extra, "--tp", "1", "--dp", "64",
                                      "--ep", "64", "--layout", "megatron"])
    # THEN the analysis gets the Megatron topology and the layout
    assert isinstance(result.exception, Stop), result.output
    opts = seen["options"]
    assert opts.topology.config.layout == "megatron" and opts.layout == "megatron"
    assert opts.topology.config.world_size == 64


def _pgs(rows: list[tuple[int, str, str, list[int]]]) -> pa.Table:
    return S.conform(pa.table({
        S.RANK: [r[0] for r in rows], S.PG_NAME: [r[1] for r in rows],
        S.PG_DESC: [r[2] for r in rows], S.PG_RANKS: [r[3] for r in rows],
    }), S.PROCESS_GROUPS)


MEGATRON_DESCS = """version: 1
name: megatron-descs
priority: 20
group_descs:
  - {id: desc.mg.tp, match: '^TENSOR_MODEL_PARALLEL_GROUP$', group: TP}
  - {id: desc.mg.dp, match: '^DATA_PARALLEL_GROUP$', group: DP}
  - {id: desc.mg.pp, match: '^PIPELINE_MODEL_PARALLEL_GROUP$', group: PP}
  - {id: desc.mg.ep, match: '^EXPERT_MODEL_PARALLEL_GROUP$', group: MOE_EP}
  - {id: desc.mg.etp, match: '^EXPERT_TENSOR_PARALLEL_GROUP$', group: MOE_TP}
  - {id: desc.mg.edp, match: '^EXPERT_DATA_PARALLEL_GROUP$', group: MOE_DP}
"""


def test_infer_a_megatron_topology_from_group_descriptions(tmp_path: Path) -> None:
    # GIVEN rank 0's groups of a Megatron run (tp 2, ep 2, dp 4, pp 2, etp 1) named with
    # Megatron's group_desc strings (parallel_state.py), and a rule file that names them
    rules_file = tmp_path / "megatron.yaml"
    rules_file.write_text(MEGATRON_DESCS)
    rules = load_rules((rules_file,))
    pgs = _pgs([
        (0, "0", "default_pg", list(range(16))),
        (0, "1", "TENSOR_MODEL_PARALLEL_GROUP", [0, 1]),
        (0, "2", "DATA_PARALLEL_GROUP", [0, 2, 4, 6]),
        (0, "3", "PIPELINE_MODEL_PARALLEL_GROUP", [0, 8]),
        (0, "4", "EXPERT_MODEL_PARALLEL_GROUP", [0, 1]),
        (0, "5", "EXPERT_TENSOR_PARALLEL_GROUP", [0]),
        (0, "6", "EXPERT_DATA_PARALLEL_GROUP", [0, 2, 4, 6]),
    ])
    # WHEN inferred with the layout given, and without
    given = infer_topology(pgs, rules, world_size=16, layout="megatron")
    picked = infer_topology(pgs, rules, world_size=16)
    # THEN both are that Megatron config; without --layout the reason says it was picked
    for topo in (given, picked):
        assert topo is not None and topo.config.layout == "megatron"
        assert (topo.config.tp, topo.config.dp, topo.config.ep, topo.config.etp,
                topo.config.pp, topo.config.moe_dp) == (2, 4, 2, 1, 2, 4)
    assert picked is not None and "fit no SGLang layout" in picked.reason
    # AND under SGLang's layout the same groups do not fit (its DP is a replica of tp * pp)
    assert infer_topology(pgs, rules, world_size=16, layout="sglang") is None
