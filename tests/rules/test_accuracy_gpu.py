"""Accuracy on synthetic GPU runs (tracekit.synth): eager extend steps with NCCL metadata,
CUDA-graph decode steps without it, custom all-reduce, pynccl v-collectives, DeepEP.

The decode layers carry no process-group metadata; their groups and paths must come from the
layer structure (or stay missing), never be wrong.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

synth = pytest.importorskip("tracekit.synth")

REPO = Path(__file__).resolve().parents[2]

CASES: dict[str, dict[str, Any]] = {
    "tp4_no_dpa": {"tp": 4},
    "dpa_rs_ag": {"tp": 8, "dp": 4, "enable_dp_attention": True},
    "dpa_gatherv_rsv": {"tp": 8, "dp": 8, "enable_dp_attention": True, "dp_gather": "gatherv"},
    "dpa_equal_rs": {"tp": 8, "dp": 8, "enable_dp_attention": True, "dp_gather": "allgather",
                     "combine": "c_reduce_scatter"},
    "deepep": {"tp": 8, "ep": 8, "a2a": "deepep"},
    # issue 13: internode DeepEP with DP attention (attn_tp 1, and attn_tp 8 of 16 / 64)
    "deepep_dpa16": {"tp": 16, "dp": 16, "enable_dp_attention": True, "ep": 16, "a2a": "deepep"},
    "deepep_dpa2": {"tp": 16, "dp": 2, "enable_dp_attention": True, "ep": 16, "a2a": "deepep"},
    "deepep_tp64_dpa8": {"tp": 64, "dp": 8, "enable_dp_attention": True, "ep": 64,
                         "a2a": "deepep"},
    "old_nccl": {"tp": 4, "nccl": "2.18", "torch": "2.4"},
}


def _accuracy() -> ModuleType:
    path = REPO / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("tk_accuracy_gpu", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", sorted(CASES))
def test_synthetic_gpu_run_has_no_wrong_answer(case: str, tmp_path: Path) -> None:
    # GIVEN a synthetic 3-layer run: one eager extend step, then CUDA-graph decode steps
    cfg = synth.SynthConfig(steps=3, shape=synth.ModelShape(layers=3), **CASES[case])
    synth.synth_run(cfg, tmp_path / case)
    # WHEN it is scored against its ground truth (topology inferred from pg_config)
    accuracy = _accuracy()
    score = accuracy.score_run(tmp_path / case)
    report = accuracy.report(score)
    # THEN nothing is wrong or missing, and a clean run has no finding
    assert score.wrong == 0, report
    assert score.group["missing"] == 0 and score.path["missing"] == 0, report
    assert not score.findings, report


def test_without_metadata_nothing_is_guessed_and_a_config_fills_it(tmp_path: Path) -> None:
    # GIVEN a torch 2.2-era run: no process-group descriptions, no pg_config at all
    cfg = synth.SynthConfig(tp=4, steps=2, nccl="2.14", torch="2.2",
                            shape=synth.ModelShape(layers=2))
    synth.synth_run(cfg, tmp_path / "old")
    accuracy = _accuracy()
    # WHEN scored without a config THEN paths stay missing but nothing is wrong
    bare = accuracy.score_run(tmp_path / "old")
    assert bare.wrong == 0, accuracy.report(bare)
    # WHEN the manifest is given as the config THEN every path is right
    given = accuracy.score_run(tmp_path / "old", use_config=True)
    assert given.wrong == 0 and given.path["missing"] == 0, accuracy.report(given)
