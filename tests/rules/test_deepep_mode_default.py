"""SGLang's `--deepep-mode` defaults to `auto`: DeepEP's normal kernels for prefill (extend)
and its low-latency kernels for decode (sglang server_args: `deepep_mode = "auto"`). A config
that does not set it must accept both; one that says `normal` must not accept decode's
low-latency paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.cli import main


def _findings(run: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
              ) -> list[str]:
    out = tmp_path / f"{config.stem}.report.json"
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(run), "--config", str(config), "--json", str(out)])
    assert exc.value.code in (0, None), capsys.readouterr().err
    capsys.readouterr()
    return [f["rule_id"] for f in json.loads(out.read_text())["findings"]]


def test_an_unset_deepep_mode_is_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    # GIVEN a DeepEP run with an extend step (normal kernels) and decode steps (low latency)
    run = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["synth", "--out", str(run), "--tp", "4", "--ep", "4", "--a2a", "deepep",
              "--steps", "3", "--extend-steps", "1", "--layers", "2"])
    capsys.readouterr()
    manifest = json.loads((run / "manifest.json").read_text())
    assert "deepep_mode" not in manifest["config"]
    # WHEN analysed with its manifest as config (deepep_mode not set)
    # THEN no path mismatch: auto allows both modes
    assert "path-mismatch" not in _findings(run, run / "manifest.json", tmp_path, capsys)
    # AND with deepep_mode normal, decode's low-latency paths are a mismatch
    normal = tmp_path / "normal.json"
    manifest["config"]["deepep_mode"] = "normal"
    normal.write_text(json.dumps(manifest))
    assert "path-mismatch" in _findings(run, normal, tmp_path, capsys)
