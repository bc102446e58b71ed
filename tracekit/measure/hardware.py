"""Hardware profiles: per link class nominal and achievable bandwidth and latency alpha.

Profiles are YAML files shipped as package data (``tracekit/measure/data/<name>.yaml``) or
given by path (``--hardware FILE``); a profile written by ``tracekit calibrate`` into the user
config directory (``$XDG_CONFIG_HOME/tracekit/hardware/<name>.yaml``) takes precedence over the
packaged one of the same name. Files are validated into frozen dataclasses: unknown keys,
missing fields and wrong types raise ConfigError naming the file.

Bandwidths are GB/s with GB = 1e9 B, one direction, per rank (nccl-tests convention,
BOUNDS_AND_PEERS.md section 1.1). ``achievable_gbps`` is the bus bandwidth a good
implementation reaches (what busbw is compared against); ``nominal_gbps`` the line rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from tracekit.errors import ConfigError
from tracekit.measure.bounds import Ops, ring_steps_v
from tracekit.measure.profile_source import (  # noqa: F401 (user_config_dir: re-exported)
    is_file_spec,
    named_profile,
    packaged_dir,
    user_config_dir,
)

TOPOLOGIES = ("switch", "mesh", "loopback")
LOCAL = "local"  # pseudo link class of a rank's traffic to itself

_PROFILE_KEYS = {
    "name", "description", "ranks_per_node", "nics_per_node", "intra", "inter", "links",
    "measured", "source", "tolerance",
}
# bound / transfer may exceed 1 by this much before it is taken for a wrong input rather than
# timing noise or a bandwidth a little above the profile's achievable one (profile key
# ``tolerance`` overrides it)
DEFAULT_TOLERANCE = 0.10
_PROFILE_REQUIRED = {"name", "links", "intra"}
_LINK_KEYS = {
    "nominal_gbps", "achievable_gbps", "nvls_gbps", "alpha_us", "latency_base_us",
    "latency_hop_us", "topology", "max_peers", "source", "unverified",
}
_LINK_REQUIRED = {"nominal_gbps", "achievable_gbps", "alpha_us"}


@dataclass(frozen=True)
class LinkClass:
    """One link class (NVLink, InfiniBand, HCCS, loopback...), per rank and direction.

    On a ``mesh`` (switchless full mesh, Ascend 910B HCCS) ``achievable_gbps`` is per peer
    link and a rank talking to g-1 peers in the box gets (g-1) x that (BOUNDS 2.6).
    """

    name: str
    nominal_gbps: float
    achievable_gbps: float
    alpha_us: float
    nvls_gbps: float | None = None  # in-network (NVLS) all-reduce busbw, may exceed the link
    topology: str = "switch"
    max_peers: int | None = None  # mesh: peer links per rank in the box
    latency_base_us: float | None = None  # NCCL ring model: base + steps x hop
    latency_hop_us: float | None = None
    source: str = ""
    unverified: tuple[str, ...] = ()

    def alpha_ns(self, ops: Ops, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Per-op latency in ns: ``alpha_us``, or when the link gives the NCCL ring latency
        model (tuning.cc: base + nsteps x per-hop latency), the smaller of the two, so small
        groups are not charged an 8-rank latency."""
        nn = np.asarray(n, dtype=np.float64)
        alpha = np.full(nn.shape, self.alpha_us * 1e3)
        if self.latency_base_us is None or self.latency_hop_us is None:
            return alpha
        model = (self.latency_base_us + ring_steps_v(ops, nn) * self.latency_hop_us) * 1e3
        return np.fmin(alpha, model)

    def effective_gbps(self, peers_in_box: int = 1) -> float:
        """Achievable per-rank bandwidth when talking to ``peers_in_box`` peers (mesh aware)."""
        if self.topology != "mesh":
            return self.achievable_gbps
        peers = max(1, peers_in_box)
        if self.max_peers is not None:
            peers = min(peers, self.max_peers)
        return self.achievable_gbps * peers


@dataclass(frozen=True)
class HardwareProfile:
    """A machine: which link class joins ranks inside a node and across nodes."""

    name: str
    links: dict[str, LinkClass]
    intra: str
    inter: str
    ranks_per_node: int | None = None  # None: every rank on one node
    nics_per_node: int | None = None
    description: str = ""
    measured: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    tolerance: float = DEFAULT_TOLERANCE  # efficiency above 1 + tolerance: an input is wrong

    def link(self, name: str) -> LinkClass:
        return self.links[name]

    @property
    def intra_link(self) -> LinkClass:
        return self.links[self.intra]

    @property
    def inter_link(self) -> LinkClass:
        return self.links[self.inter]


def packaged_profiles() -> list[str]:
    """Names of the profiles shipped with tracekit."""
    root = packaged_dir()
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def _number(value: Any, where: str, path: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}", path)
    if positive and value <= 0:
        raise ConfigError(f"{where} must be > 0, got {value!r}", path)
    if value < 0:
        raise ConfigError(f"{where} must be >= 0, got {value!r}", path)
    return float(value)


def _optional(data: dict[str, Any], key: str, where: str, path: str) -> float | None:
    value = data.get(key)
    return None if value is None else _number(value, f"{where}.{key}", path, positive=False)


def _check_keys(data: Any, allowed: set[str], required: set[str], where: str, path: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping", path)
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}", path)
    missing = sorted(required - set(data))
    if missing:
        raise ConfigError(f"{where}: missing field(s) {', '.join(missing)}", path)


def _link(name: str, data: Any, path: str) -> LinkClass:
    where = f"links.{name}"
    _check_keys(data, _LINK_KEYS, _LINK_REQUIRED, where, path)
    topology = data.get("topology", "switch")
    if topology not in TOPOLOGIES:
        raise ConfigError(f"{where}.topology must be one of {', '.join(TOPOLOGIES)}", path)
    unverified = data.get("unverified", [])
    if not isinstance(unverified, list) or not set(unverified) <= _LINK_KEYS:
        raise ConfigError(f"{where}.unverified must list keys of this link", path)
    nvls = data.get("nvls_gbps")
    peers = data.get("max_peers")
    if peers is not None and (not isinstance(peers, int) or peers < 1):
        raise ConfigError(f"{where}.max_peers must be a positive integer", path)
    return LinkClass(
        name=name,
        nominal_gbps=_number(data["nominal_gbps"], f"{where}.nominal_gbps", path),
        achievable_gbps=_number(data["achievable_gbps"], f"{where}.achievable_gbps", path),
        alpha_us=_number(data["alpha_us"], f"{where}.alpha_us", path, positive=False),
        nvls_gbps=None if nvls is None else _number(nvls, f"{where}.nvls_gbps", path),
        topology=topology,
        max_peers=peers,
        latency_base_us=_optional(data, "latency_base_us", where, path),
        latency_hop_us=_optional(data, "latency_hop_us", where, path),
        source=str(data.get("source", "")),
        unverified=tuple(str(k) for k in unverified),
    )


def parse_profile(data: Any, path: str) -> HardwareProfile:
    """Validate a loaded YAML document into a HardwareProfile (ConfigError naming ``path``)."""
    _check_keys(data, _PROFILE_KEYS, _PROFILE_REQUIRED, "profile", path)
    links_data = data["links"]
    if not isinstance(links_data, dict) or not links_data:
        raise ConfigError("links must be a non-empty mapping of link classes", path)
    links = {str(k): _link(str(k), v, path) for k, v in links_data.items()}
    if LOCAL in links:
        raise ConfigError(f"links: '{LOCAL}' is reserved for a rank's traffic to itself", path)
    intra = str(data["intra"])
    inter = str(data.get("inter", intra))
    for key, value in (("intra", intra), ("inter", inter)):
        if value not in links:
            raise ConfigError(f"{key} names link class {value!r}, which links does not define",
                              path)
    counts: dict[str, int | None] = {}
    for key in ("ranks_per_node", "nics_per_node"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ConfigError(f"{key} must be a positive integer or null", path)
        counts[key] = value
    tolerance = data.get("tolerance", DEFAULT_TOLERANCE)
    tolerance = _number(tolerance, "tolerance", path, positive=False)
    measured = data.get("measured") or {}
    if not isinstance(measured, dict):
        raise ConfigError("measured must be a mapping", path)
    return HardwareProfile(
        name=str(data["name"]),
        links=links,
        intra=intra,
        inter=inter,
        ranks_per_node=counts["ranks_per_node"],
        nics_per_node=counts["nics_per_node"],
        description=str(data.get("description", "")),
        measured=dict(measured),
        path=path,
        tolerance=tolerance,
    )


def read_profile(path: Path) -> HardwareProfile:
    """Read and validate one profile file."""
    from tracekit.limits import read_options_file

    text = read_options_file(path, "hardware profile", yaml=True, error=ConfigError)
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError("hardware profile is nested too deeply", path) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {' '.join(str(exc).split())}", path) from exc
    return parse_profile(data, str(path))


def load_profile(spec: str | Path) -> HardwareProfile:
    """A profile by name ('h200', 'cpu-gloo') or by the path of a YAML file."""
    candidate = Path(spec)
    if is_file_spec(candidate):
        if not candidate.exists():
            raise ConfigError("hardware profile file not found", candidate)
        return read_profile(candidate)
    name = str(spec)
    found = named_profile(name)
    if found is not None:
        with resources.as_file(found[1]) as real:
            return read_profile(Path(real))
    known = ", ".join(packaged_profiles())
    raise ConfigError(f"unknown hardware profile {name!r} (known: {known}; or give a YAML file)")
