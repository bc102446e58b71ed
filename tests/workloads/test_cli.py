"""`python -m tracekit.workloads` arguments: bad configs exit 2, manifests' commands round-trip."""

from __future__ import annotations

import shlex

import pytest

from tracekit.workloads.cli import command_line, config_from_args, main, parser
from tracekit.workloads.samples import SCENARIOS


def test_impossible_config_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN reduce_scatterv asked with attn_tp = 2 WHEN run THEN exit 2 and one error line
    assert main(["--tp", "4", "--dp", "2", "--dp-attention", "--combine", "b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tracekit.workloads: error:") and "\n" not in err


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_manifest_command_reproduces_the_config(scenario: object) -> None:
    # GIVEN a scenario's flags WHEN turned into the manifest command and parsed back
    cfg = config_from_args(parser().parse_args(list(scenario.args)))  # type: ignore[attr-defined]
    argv = shlex.split(command_line(cfg))
    assert argv[:3] == ["python", "-m", "tracekit.workloads"]
    # THEN the same resolved configuration comes out
    assert config_from_args(parser().parse_args(argv[3:])) == cfg
