"""`tracekit analyze RUN --partitioned DIR`: the per-rank pipeline through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.cli import main
from tracekit.synth import ModelShape, SynthConfig, synth_run


def test_partitioned_analysis_writes_rank_partitions_and_a_bounded_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a synthetic 4-rank DP-attention run
    run = tmp_path / "run"
    synth_run(SynthConfig(tp=4, dp=2, enable_dp_attention=True, ep=4, steps=1,
                          shape=ModelShape(hidden=256, tokens=8, extend_tokens=32, layers=2)),
              run, jobs=1)
    out = tmp_path / "parts"
    # WHEN analysed partitioned against the h200 profile
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(run), "--partitioned", str(out), "--hardware", "h200",
              "--json", str(tmp_path / "r.json"), "--jobs", "2"])
    # THEN it succeeds, every rank has its partition and no bound is printed as 0
    assert exc.value.code == 0
    assert sorted(p.name for p in (out / "events").iterdir()) == [f"rank={r}" for r in range(4)]
    text = capsys.readouterr().out
    assert "partitioned into" in text and "attention_reduce" in text
    doc = json.loads((tmp_path / "r.json").read_text())
    # (synth's collectives beat h200's NCCL latency model: the bounds are withheld as
    # impossible, null rather than 0, and a finding names the inputs to check)
    assert all(p.get("bound_ns") is None or p["bound_ns"] > 0 for p in doc["phases"])
    exceeded = [f for f in doc["findings"] if f["rule_id"] == "measure.bound-exceeded"]
    assert exceeded and all("profile (h200" in f["message"] for f in exceeded)
