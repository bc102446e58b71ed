"""`tracekit check` on a real sample: a barrier (no bound) is skipped and listed, not failed."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "tp4_full_tp"


def test_clean_sample_with_a_barrier_passes_min_efficiency() -> None:
    # GIVEN a gloo sample whose step starts with a barrier (sidecar: op barrier, phase other)
    # WHEN gated at efficiency 0.01 with the gloo profile
    res = CliRunner().invoke(cli, ["check", str(SAMPLE), "--hardware", "cpu-gloo",
                                   "--min-efficiency", "0.01"])
    # THEN it passes and lists the barrier's phase as skipped
    assert res.exit_code == 0, res.output
    assert "SKIP efficiency [other]" in res.output
    assert "FAIL" not in res.output
