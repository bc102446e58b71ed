"""`tracekit topo`: the grids of seed 002, SGLang flag spellings, errors in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracekit.cli import cli
from tracekit.cli.topo import topology_from_kwargs, topology_options
from tracekit.topology import Topology


def test_topo_prints_seed_002_grid() -> None:
    # GIVEN `tracekit topo --tp 16 --dp 8 --enable-dp-attention`
    result = CliRunner().invoke(cli, ["topo", "--tp", "16", "--dp", "8", "--enable-dp-attention"])
    # THEN the attention grid puts TP10 and TP11 on row attn_dp_rank = 5
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("attn_dp_rank = 5"))
    assert "│ TP10 │ TP11 │" in row
    assert "ATTN_TP  [0, 1], [2, 3]" in result.output


def test_topo_accepts_sglang_spellings_and_one_rank() -> None:
    # GIVEN SGLang's own flag names and --rank
    args = ["topo", "--tp-size", "16", "--moe-dp-size", "2", "--ep-size", "4", "--rank", "10"]
    result = CliRunner().invoke(cli, args)
    # THEN rank 10's MoE coordinates are printed with its groups
    assert result.exit_code == 0, result.output
    assert "moe_dp_rank=1, moe_ep_rank=1, moe_tp_rank=0" in result.output
    assert "MOE_EP=[8, 10, 12, 14]" in result.output


def test_impossible_config_exits_2_with_one_line() -> None:
    # GIVEN sizes that do not divide WHEN the real entry point runs
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit", "topo", "--tp", "6", "--dp", "4",
         "--enable-dp-attention"], capture_output=True, text=True, check=False)
    # THEN exit code 2 and a single 'tracekit: error:' line, no traceback
    assert proc.returncode == 2
    assert proc.stderr.startswith("tracekit: error:") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_topo_infers_from_a_trace(sample_traces: Path) -> None:
    # GIVEN a sample run with SGLang group descriptions in its pg_config
    run_dir = sample_traces / "tp4_dp2_attn_tp"
    if not run_dir.is_dir():
        pytest.skip("scenario tp4_dp2_attn_tp not generated")
    # WHEN `tracekit topo --trace DIR` runs THEN it rebuilds TP4 / DP2 with ATTN_TP [0,1],[2,3]
    result = CliRunner().invoke(cli, ["topo", "--trace", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "tp=4 dp=2 enable_dp_attention=True" in result.output
    assert "ATTN_TP  [0, 1], [2, 3]" in result.output


def test_shared_options_build_a_topology_for_other_commands() -> None:
    # GIVEN a command using the shared options (as `tracekit analyze` will)
    seen: dict[str, object] = {}

    @click.command()
    @topology_options
    def probe(**kwargs: object) -> None:
        seen["topo"] = topology_from_kwargs(kwargs)
        seen["left"] = dict(kwargs)

    # WHEN given SGLang spellings THEN a Topology comes out and no option is left over
    result = CliRunner().invoke(probe, ["--tp-size", "8", "--dp-size", "4",
                                        "--enable-dp-attention", "--npu"])
    assert result.exit_code == 0, result.output
    topo = seen["topo"]
    assert isinstance(topo, Topology) and topo.config.attn_tp == 2 and topo.config.npu
    assert seen["left"] == {}
    CliRunner().invoke(probe, [])
    assert seen["topo"] is None
