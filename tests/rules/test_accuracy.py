"""Accuracy on every sample_traces scenario against its ground-truth sidecars.

Every collective has the right group and path (or is ambiguous with the truth among the
candidates), and the right layer; none is wrong; both planted bugs are flagged; clean
scenarios have no finding. The comparison is benchmarks/accuracy.py's, loaded from the
repository so that the test and the benchmark cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
SCENARIOS = sorted(p.parent.name for p in SAMPLES.glob("*/manifest.json"))
BUG_RULE = {"double-reduce": "double-reduction", "global-tp-reduce": "attention-global-tp-reduce"}


def _accuracy() -> ModuleType:
    path = REPO / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("tk_accuracy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def accuracy() -> ModuleType:
    return _accuracy()


@pytest.mark.parametrize("use_config", [False, True], ids=["inferred", "manifest-config"])
@pytest.mark.parametrize("scenario", SCENARIOS or ["(none)"])
def test_scenario_is_attributed_without_a_wrong_answer(
    accuracy: ModuleType, scenario: str, use_config: bool
) -> None:
    if not SCENARIOS:
        pytest.skip("sample_traces/ has no scenarios yet (make sample-traces)")
    run_dir = SAMPLES / scenario
    bug = json.loads((run_dir / "manifest.json").read_text())["config"].get("bug", "none")
    # GIVEN a scenario with ground truth WHEN it is scored (topology inferred from the
    # trace's process groups, or taken from the manifest's config)
    score = accuracy.score_run(run_dir, use_config)
    report = accuracy.report(score)
    # THEN every collective was found and none got a wrong group, path or layer
    assert not score.count_mismatch, report
    assert score.group["wrong"] == 0 and score.path["wrong"] == 0, report
    assert score.layer["wrong"] == 0, report
    assert score.group["missing"] == 0 and score.path["missing"] == 0, report
    rules = {f.split()[0] for f in score.findings}
    if bug == "none":
        # AND a clean scenario has no finding
        assert not score.findings, report
    else:
        # AND the planted bug is flagged
        assert BUG_RULE[bug] in rules, report


def test_planted_bugs_are_both_present() -> None:
    # GIVEN the bundled scenarios THEN both planted bugs are among them (or none exist yet)
    if not SCENARIOS:
        pytest.skip("sample_traces/ has no scenarios yet")
    bugs = {json.loads((SAMPLES / s / "manifest.json").read_text())["config"].get("bug")
            for s in SCENARIOS}
    assert set(BUG_RULE) <= bugs
