"""`tracekit calibrate`: fit from a sweep, atomic write, and one real 2-process gloo run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tracekit.measure import calibrate, hardware


def _sweep(alpha_ns: float, p2p_gbps: float, ar_gbps: float) -> calibrate.Sweep:
    sizes = (16, 256, 4096, 65536, 1 << 20, 4 << 20)
    return calibrate.Sweep(
        sizes=sizes,
        p2p_ns=tuple(alpha_ns + s / p2p_gbps for s in sizes),
        allreduce_ns=tuple(2 * alpha_ns + s / ar_gbps for s in sizes),
    )


def test_profile_from_sweep_recovers_alpha_and_beta() -> None:
    """GIVEN exact sweeps: ping-pong 50 us + S / 2 GB/s, all-reduce 100 us + S / 1 GB/s
    WHEN building the profile THEN the fits come back exactly, the link class takes the
    smaller alpha and the larger bandwidth, and the document validates."""
    doc = calibrate.profile_from_sweep(_sweep(50_000, 2.0, 1.0))
    link = doc["links"]["loopback"]
    assert link["alpha_us"] == pytest.approx(50.0)
    assert link["achievable_gbps"] == pytest.approx(2.0)
    assert doc["measured"]["allreduce_alpha_us"] == pytest.approx(100.0)
    assert doc["measured"]["allreduce_busbw_gbps"] == pytest.approx(1.0)
    profile = hardware.parse_profile(doc, "memory")
    assert profile.intra == profile.inter == "loopback"


def test_write_profile_is_atomic_and_loadable(tmp_path: Path) -> None:
    """GIVEN a profile document WHEN writing to a path that exists THEN it is replaced in one
    rename (no temp file left) and loads back by path."""
    target = tmp_path / "mine.yaml"
    target.write_text("old")
    calibrate.write_profile(calibrate.profile_from_sweep(_sweep(10_000, 3.0, 1.5)), target)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.yaml"]
    assert hardware.load_profile(target).intra_link.achievable_gbps == pytest.approx(3.0)


def test_flat_sweep_is_an_error() -> None:
    """GIVEN times that do not grow with size WHEN building THEN a clear error, no profile."""
    flat = calibrate.Sweep(sizes=(1, 2, 3), p2p_ns=(5.0, 5.0, 5.0), allreduce_ns=(6.0, 6.0, 6.0))
    with pytest.raises(Exception, match="did not grow"):
        calibrate.profile_from_sweep(flat)


def test_cli_writes_and_prints(tmp_path: Path, monkeypatch) -> None:
    """GIVEN the calibrate command with the sweep replaced by a known one
    WHEN run with --out THEN it writes the file and prints the same YAML."""
    from tracekit.cli.calibrate import command

    monkeypatch.setattr(calibrate, "sweep", lambda sizes, iters: _sweep(20_000, 4.0, 2.0))
    out = tmp_path / "gloo.yaml"
    result = CliRunner().invoke(command, ["--out", str(out)])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output.split("\n", 1)[1])
    assert printed == yaml.safe_load(out.read_text())


@pytest.mark.slow
def test_real_gloo_sweep(tmp_path: Path) -> None:
    """GIVEN this machine WHEN running a short real 2-process gloo sweep
    THEN a valid profile with positive alpha and bandwidth comes out."""
    result = calibrate.sweep((64, 4096, 262144, 1 << 20, 4 << 20), iters=5)
    doc = calibrate.profile_from_sweep(result)
    path = calibrate.write_profile(doc, tmp_path / "cpu-gloo.yaml")
    link = hardware.load_profile(path).intra_link
    assert link.achievable_gbps > 0 and link.alpha_us >= 0
