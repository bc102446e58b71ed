"""path-mismatch reads both config spellings (workload: sum_len/max_len/a/b/c; synth and
path labels: allreduce/rs_ag/a_allreduce/...) and never flags a value it does not know."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.rules.labels import PathLabel
from tracekit.synth import ModelShape, SynthConfig, synth_run
from tracekit.topology.config import topology_from_options

SHAPE = ModelShape(hidden=256, tokens=8, extend_tokens=32, layers=2)


@pytest.mark.parametrize(("dp_gather", "combine"), [
    ("rs_ag", "a_allreduce"),
    ("allgather", "a_allreduce"),
])
def test_clean_synth_run_with_its_own_config_has_no_path_mismatch(
        tmp_path: Path, dp_gather: str, combine: str) -> None:
    # GIVEN a clean synthetic run and the config its manifest states (synth spellings)
    attn_dp = 2 if dp_gather == "rs_ag" else 4
    cfg = SynthConfig(tp=4, dp=attn_dp, enable_dp_attention=True, ep=4, steps=1,
                      dp_gather=dp_gather, combine=combine, shape=SHAPE)
    synth_run(cfg, tmp_path, jobs=1)
    topo = topology_from_options(config=tmp_path / "manifest.json")
    # WHEN analysed with that config
    _, findings = api.attribute(api.load(tmp_path), api.AnalyzeOptions(topology=topo))
    # THEN the lint sees the configured paths as what ran
    rules = findings.column(S.RULE_ID).to_pylist()
    assert "path-mismatch" not in rules, findings.to_pylist()[:2]


def test_config_value_the_lint_does_not_know_is_not_checked() -> None:
    # GIVEN a config whose combine switch has a spelling the lint does not know
    from tracekit.rules.lints import expected_paths
    from tracekit.topology import Topology
    from tracekit.topology.config import config_from_mapping

    cfg = config_from_mapping({"tp_size": 4, "dp_size": 2, "enable_dp_attention": True,
                               "combine": "something-new", "dp_gather": "sum_len"})
    expected = expected_paths(Topology(cfg))
    # THEN that family is not checked, while a known one is
    assert expected["combine"] is None
    assert expected["dp_gather"] == {PathLabel.GATHER_AR}
