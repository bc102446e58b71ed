"""Hardware profiles: packaged files load, bad files fail naming the file, user files win."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracekit.errors import ConfigError
from tracekit.measure import hardware

GOOD = {
    "name": "lab",
    "ranks_per_node": 4,
    "intra": "nv",
    "links": {"nv": {"nominal_gbps": 100, "achievable_gbps": 80, "alpha_us": 10}},
}


def test_every_packaged_profile_loads() -> None:
    """GIVEN the YAML package data WHEN loading each profile THEN all validate, including
    the issue's list, and the intra/inter link classes exist."""
    names = hardware.packaged_profiles()
    for expected in ("h100", "h200", "a100", "h800", "b200", "pcie-gen4", "pcie-gen5",
                     "ascend-910b", "ascend-910c", "cpu-gloo"):
        assert expected in names
    for name in names:
        p = hardware.load_profile(name)
        assert p.intra_link.achievable_gbps > 0 and p.inter_link.alpha_us >= 0


def test_h200_numbers_from_the_reference() -> None:
    """GIVEN the H200 profile WHEN reading it THEN NVLink4 450 GB/s nominal per direction,
    370 achievable busbw, NVLS about 480 (475 measured on H200), NDR 50 / 48."""
    p = hardware.load_profile("h200")
    nv = p.intra_link
    assert (nv.nominal_gbps, nv.achievable_gbps, nv.nvls_gbps) == (450, 370, 475)
    assert (p.inter_link.nominal_gbps, p.inter_link.achievable_gbps) == (50, 48)


def test_unverified_numbers_are_marked() -> None:
    """GIVEN profiles resting on secondary sources WHEN reading THEN marked unverified."""
    assert "achievable_gbps" in hardware.load_profile("ascend-910c").intra_link.unverified
    assert "alpha_us" in hardware.load_profile("ascend-910b").intra_link.unverified
    assert hardware.load_profile("h100").intra_link.unverified == ()


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_user_file_by_path(tmp_path: Path) -> None:
    """GIVEN a valid profile file WHEN loading by path THEN it is used as written."""
    p = hardware.load_profile(_write(tmp_path, GOOD))
    assert p.name == "lab" and p.inter == "nv" and p.ranks_per_node == 4


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(colour="red"), "unknown key"),
        (lambda d: d["links"]["nv"].update(speed=1), "unknown key"),
        (lambda d: d["links"]["nv"].pop("alpha_us"), "missing field"),
        (lambda d: d.pop("intra"), "missing field"),
        (lambda d: d.update(inter="ib"), "does not define"),
        (lambda d: d["links"]["nv"].update(achievable_gbps="fast"), "must be a number"),
        (lambda d: d["links"]["nv"].update(topology="ring"), "topology"),
        (lambda d: d.update(ranks_per_node=0), "positive integer"),
    ],
)
def test_bad_profiles_name_the_file(tmp_path: Path, mutate, message: str) -> None:
    """GIVEN a profile with one defect WHEN loading THEN ConfigError naming the file."""
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=message) as info:
        hardware.load_profile(path)
    assert info.value.path == str(path)


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    """GIVEN broken YAML or a missing file WHEN loading THEN ConfigError naming it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("links: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        hardware.load_profile(bad)
    with pytest.raises(ConfigError, match="not found"):
        hardware.load_profile(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="unknown hardware profile"):
        hardware.load_profile("no-such-machine")


def test_user_config_dir_overrides_packaged(tmp_path: Path, monkeypatch) -> None:
    """GIVEN a calibrated cpu-gloo.yaml in $XDG_CONFIG_HOME/tracekit/hardware
    WHEN loading 'cpu-gloo' by name THEN the user's file wins over the packaged one."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    target = tmp_path / "tracekit" / "hardware" / "cpu-gloo.yaml"
    target.parent.mkdir(parents=True)
    data = dict(GOOD, name="cpu-gloo")
    target.write_text(yaml.safe_dump(data))
    assert hardware.load_profile("cpu-gloo").path == str(target)


def test_alpha_scales_with_ring_steps() -> None:
    """GIVEN the H100 NVLink class (alpha 15 us; NCCL ring LL model 6.6 + steps x 0.6 us)
    WHEN asking alpha per op and group size THEN min(15, model): AllReduce on 2 ranks 7.8 us,
    on 8 ranks 15 us (model 15.0), AllGather on 4 ranks 8.4 us, all-to-all 7.2 us; InfiniBand
    (no model) keeps its 25 us."""
    p = hardware.load_profile("h100")
    got = p.intra_link.alpha_ns(["all_reduce", "all_reduce", "all_gather", "all_to_all"],
                                [2, 8, 4, 8])
    assert list(got) == pytest.approx([7_800, 15_000, 8_400, 7_200])
    assert list(p.inter_link.alpha_ns(["all_reduce"], [16])) == [25_000]
