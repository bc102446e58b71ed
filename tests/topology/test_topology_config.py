"""Where a config comes from: SGLang flag names, files, manifests, the trace's process groups."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.errors import ConfigError
from tracekit.rules.infer import infer_topology
from tracekit.rules.loader import load_rules
from tracekit.schema import Group
from tracekit.topology.config import (
    config_from_file,
    config_from_mapping,
    topology_from_options,
)


def test_sglang_keys_and_manifest_config(tmp_path: Path) -> None:
    # GIVEN a sample_traces manifest (its "config" key) with SGLang names and derived widths
    manifest = {"scenario": "x", "config": {
        "tp_size": 4, "dp_size": 2, "enable_dp_attention": True, "ep_size": 1,
        "moe_dp_size": 1, "attn_cp_size": 1, "npu": False, "attn_reduce": "attn_tp",
        "dp_gather": "sum_len", "combine": "a", "a2a": "none", "bug": "none", "layers": 2,
        "steps": 1, "attn_tp_size": 2, "attn_dp_size": 2, "moe_tp_size": 4}}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    # WHEN it is read
    cfg = config_from_file(path)
    # THEN sizes, the layer count and the path switches are kept (the bug key is not)
    assert (cfg.tp, cfg.dp, cfg.enable_dp_attention, cfg.attn_tp, cfg.layers) == (4, 2, True, 2, 2)
    assert cfg.expected("combine") == "a" and cfg.expected("dp_gather") == "sum_len"
    assert "bug" not in dict(cfg.expect)


def test_contradicting_derived_width_and_unknown_key_are_errors(tmp_path: Path) -> None:
    # GIVEN a derived width that contradicts the sizes, and a misspelt key
    # THEN each is a ConfigError naming the problem
    with pytest.raises(ConfigError, match="attn_tp_size=4 contradicts"):
        config_from_mapping({"tp_size": 4, "dp_size": 2, "enable_dp_attention": True,
                             "attn_tp_size": 4})
    bad = tmp_path / "c.yaml"
    bad.write_text("tp_sise: 4\n")
    with pytest.raises(ConfigError, match="tp_sise"):
        config_from_file(bad)


def test_cli_flags_override_file(tmp_path: Path) -> None:
    # GIVEN a YAML file with tp 8 and a flag --ep 8
    path = tmp_path / "c.yaml"
    path.write_text("tp-size: 8\nenable_dp_attention: true\ndp_size: 4\n")
    # WHEN the CLI view combines them
    topo = topology_from_options(config=path, ep=8)
    # THEN flags win over the file and nothing given means no topology
    assert topo is not None and (topo.config.tp, topo.config.ep, topo.config.attn_tp) == (8, 8, 2)
    assert topology_from_options() is None


def _pgs(rows: list[tuple[int, str, str, list[int]]]) -> pa.Table:
    return S.conform(pa.table({
        S.RANK: [r[0] for r in rows], S.PG_NAME: [r[1] for r in rows],
        S.PG_DESC: [r[2] for r in rows], S.PG_RANKS: [r[3] for r in rows],
    }), S.PROCESS_GROUPS)


def test_infer_from_pg_config_descriptions() -> None:
    # GIVEN the pg_config of rank 0 in a TP4 / DP2 DPA run with an npu-style MOE_EP
    pgs = _pgs([
        (0, "0", "default_pg", [0, 1, 2, 3]), (0, "3", "tp:device", [0, 1, 2, 3]),
        (0, "4", "tp:cpu", [0, 1, 2, 3]), (0, "13", "attention_tp:device", [0, 1]),
        (0, "25", "moe_ep:device", [0, 1, 2, 3]), (0, "27", "moe_tp:device", [0]),
    ])
    # WHEN the topology is inferred
    topo = infer_topology(pgs, load_rules(), world_size=4)
    # THEN DP attention with attn_tp 2 is found, and MOE_EP with TP's members means npu
    assert topo is not None
    assert (topo.config.tp, topo.config.attn_tp, topo.config.enable_dp_attention) == (4, 2, True)
    assert topo.config.npu and topo.config.ep == 4
    assert topo.group_of(1, Group.ATTN_TP) == (0, 1)


def test_infer_gives_up_on_groups_that_do_not_fit() -> None:
    # GIVEN an attention_tp group whose members are not contiguous blocks
    pgs = _pgs([(0, "1", "tp", [0, 1, 2, 3]), (0, "2", "attn_tp", [0, 2])])
    # THEN no topology is assumed; and undescribed groups give none either
    assert infer_topology(pgs, load_rules(), world_size=4) is None
    assert infer_topology(_pgs([(0, "1", "undefined", [0, 1])]), load_rules(), 2) is None
