"""Where a ParallelConfig comes from: CLI options, a YAML/JSON file, a sample_traces manifest,
or the process groups a trace declares (``distributedInfo.pg_config``).

The analyser never reads ground-truth sidecars. A manifest's ``config`` is accepted because it
is a config file the user hands over explicitly (``--config manifest.json``); it is never
picked up on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tracekit.errors import ConfigError
from tracekit.schema import Group
from tracekit.topology import LAYOUTS, ParallelConfig, Topology
from tracekit.topology.layouts import DEFAULT

# every spelling accepted for each ParallelConfig field (SGLang ServerArgs names first, then
# vLLM's EngineArgs and Megatron-core's initialize_model_parallel / argument names)
ALIASES: dict[str, tuple[str, ...]] = {
    "tp": ("tp_size", "tp", "tensor_parallel_size", "tensor_model_parallel_size"),
    "dp": ("dp_size", "dp", "data_parallel_size"),
    "enable_dp_attention": ("enable_dp_attention", "dp_attention", "dpa"),
    "attn_cp": ("attn_cp_size", "attn_cp", "attention_context_parallel_size", "cp", "cp_size",
                "context_parallel_size", "prefill_context_parallel_size"),
    "ep": ("ep_size", "ep", "moe_ep_size", "expert_parallel_size", "expert_model_parallel_size"),
    "moe_dp": ("moe_dp_size", "moe_dp", "expert_data_parallel_size"),
    "pp": ("pp_size", "pp", "pipeline_parallel_size", "pipeline_model_parallel_size"),
    "nnodes": ("nnodes", "num_nodes"),
    "devices_per_node": ("devices_per_node", "gpus_per_node", "nproc_per_node"),
    "npu": ("npu", "is_npu"),
    "layers": ("layers", "num_layers", "num_hidden_layers"),
    "layout": ("layout",),
    "etp": ("etp", "etp_size", "expert_tensor_parallel_size"),
    "enable_expert_parallel": ("enable_expert_parallel", "expert_parallel"),
}
BOOL_FIELDS = ("enable_dp_attention", "npu", "enable_expert_parallel")
# path switches kept for the path-mismatch lint
EXPECT_KEYS = ("attn_reduce", "dp_gather", "combine", "a2a", "deepep_mode")
# keys a config or manifest may carry that say nothing about the topology
IGNORED_KEYS = ("bug", "device", "backend", "seed", "tokens", "hidden", "ffn", "experts", "topk",
                "dtype", "steps", "cpu_groups")
# derived widths a config may state: checked against the formulas, never trusted blindly
DERIVED_KEYS = {"attn_dp_size": "attn_dp", "attn_tp_size": "attn_tp", "moe_tp_size": "moe_tp"}

Expect = tuple[tuple[str, str], ...]


def config_from_mapping(data: Mapping[str, Any], source: str = "config",
                        strict: bool = True) -> ParallelConfig:
    """SGLang-style keys (``tp_size``, ``enable_dp_attention``, ...) -> ParallelConfig.

    An unknown key is an error (a typo must not silently change the topology), except inside
    a sample_traces manifest's ``config``, a record written by the workload whose extra keys
    (model sizes, new switches) say nothing about the topology. Without a ``layout`` key the
    layout is chosen as ``build_topology`` does.
    """
    given, expect, derived = given_from_mapping(data, source, strict)
    config = build_topology(given, expect, source).config
    check_derived(config, derived, source)
    return config


def given_from_mapping(data: Mapping[str, Any], source: str = "config", strict: bool = True
                       ) -> tuple[dict[str, Any], Expect, dict[str, Any]]:
    """The fields a mapping states (by ParallelConfig name), its path switches and the
    derived widths it states (checked once the config is built)."""
    if "config" in data and isinstance(data["config"], Mapping):  # a sample_traces manifest
        return given_from_mapping(data["config"], source, strict=False)
    known = {alias: name for name, spellings in ALIASES.items() for alias in spellings}
    kwargs: dict[str, Any] = {}
    expect: list[tuple[str, str]] = []
    unknown = []
    derived: dict[str, Any] = {}
    for key, value in data.items():
        k = str(key).replace("-", "_").lower()
        if k in DERIVED_KEYS:
            derived[k] = value
        elif k in known:
            kwargs[known[k]] = _coerce(known[k], value, source)
        elif k in EXPECT_KEYS:
            if value is not None:
                expect.append((k, str(value)))
        elif k not in IGNORED_KEYS:
            unknown.append(str(key))
    if unknown and strict:
        raise ConfigError(f"unknown parallel-config key(s): {', '.join(sorted(unknown))}", source)
    if kwargs.get("layout") is None:
        kwargs.pop("layout", None)
    return kwargs, tuple(sorted(expect)), derived


def check_derived(config: ParallelConfig, derived: Mapping[str, Any], source: str) -> None:
    for key, value in derived.items():
        actual = getattr(config, DERIVED_KEYS[key])
        if value is not None and int(value) != actual:
            raise ConfigError(f"{key}={value} contradicts the sizes (they give {actual})", source)


def _coerce(name: str, value: Any, source: str) -> Any:
    if name in BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off", "none"):
            return False
        raise ConfigError(f"{name} must be true or false, got {value!r}", source)
    if name == "layout":
        if value is None:
            return None
        if str(value).lower() not in LAYOUTS:
            raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}, got {value!r}",
                              source)
        return str(value).lower()
    if value is None and name in ("devices_per_node", "layers"):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name} must be an integer, got {value!r:.40}", source) from None
    if not -MAX_SIZE <= number <= MAX_SIZE:
        raise ConfigError(f"{name} = {value!r:.40} is out of range (at most {MAX_SIZE})",
                          source)
    return number


MAX_SIZE = 1 << 20  # a parallel size or node count beyond a million ranks is no real run


def _read_mapping(path: Path) -> Mapping[str, Any]:
    from tracekit.limits import read_options_file

    is_json = str(path).endswith(".json")
    text = read_options_file(Path(path), "config", yaml=not is_json, error=ConfigError)
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except RecursionError:
        raise ConfigError("config is nested too deeply", path) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"not valid JSON/YAML ({exc})", path) from None
    if not isinstance(data, Mapping):
        raise ConfigError("a parallel config must be a mapping of options", path)
    return data


def config_from_file(path: Path) -> ParallelConfig:
    """A YAML or JSON file of SGLang keys, or a sample_traces ``manifest.json``."""
    return config_from_mapping(_read_mapping(path), str(path))


def build_topology(given: Mapping[str, Any], expect: Expect = (),
                   source: str | Path | None = None) -> Topology:
    """The Topology of the stated fields. With a ``layout`` that layout; without one SGLang's,
    and when SGLang's refuses the sizes the one other layout that allows them (its
    ``reason`` says so). Two layouts that allow them with the same groups: the first of
    LAYOUTS; with different groups: a ConfigError asking for ``--layout``."""
    fields = dict(given)
    try:
        if fields.get("layout"):
            return Topology(ParallelConfig(**fields, expect=expect))
        first_try = Topology(ParallelConfig(**fields, expect=expect))
    except ConfigError as exc:
        if fields.get("layout"):
            raise ConfigError(exc.message, source) from None
        refused = exc.message
    else:
        return first_try
    fits: dict[str, Topology] = {}
    for name in LAYOUTS:
        if name == DEFAULT:
            continue
        try:
            fits[name] = Topology(ParallelConfig(**fields, layout=name, expect=expect))
        except ConfigError:
            continue
    if not fits:
        raise ConfigError(refused, source)
    names = list(fits)
    chosen = fits[names[0]]
    if any(not same_groups(chosen, fits[n]) for n in names[1:]):
        raise ConfigError(f"{refused} (SGLang); --layout {' and --layout '.join(names)} allow "
                          "these sizes with different groups: give --layout", source)
    why = (f"only the {names[0]} layout allows them" if len(names) == 1 else
           f"the {' and '.join(names)} layouts both allow them and give the same groups, so "
           f"{names[0]} is used")
    reason = (f"layout {names[0]} chosen: SGLang's layout refuses these sizes ({refused}); "
              f"{why} (give --layout to choose)")
    return Topology(chosen.config, reason=reason)


def same_groups(a: Topology, b: Topology) -> bool:
    """Whether two topologies give the same communicators (member sets and their labels)."""
    return (a.config.world_size == b.config.world_size
            and a.groups_by_member_set == b.groups_by_member_set)


def topology_from_options(
    *,
    config: Path | None = None,
    tp: int | None = None,
    dp: int | None = None,
    enable_dp_attention: bool | None = None,
    attn_cp: int | None = None,
    ep: int | None = None,
    moe_dp: int | None = None,
    pp: int | None = None,
    nnodes: int | None = None,
    devices_per_node: int | None = None,
    npu: bool | None = None,
    layout: str | None = None,
    etp: int | None = None,
    enable_expert_parallel: bool | None = None,
) -> Topology | None:
    """The CLI's view: a config file, overridden by explicit flags; None when no size and no
    file is given (a ``layout`` alone says how to read a trace's groups, not a topology)."""
    flags = {
        "tp": tp, "dp": dp, "enable_dp_attention": enable_dp_attention, "attn_cp": attn_cp,
        "ep": ep, "moe_dp": moe_dp, "pp": pp, "nnodes": nnodes,
        "devices_per_node": devices_per_node, "npu": npu, "etp": etp,
        "enable_expert_parallel": enable_expert_parallel,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if config is None and not given:
        return None
    values: dict[str, Any] = {}
    expect: Expect = ()
    derived: dict[str, Any] = {}
    if config is not None:
        values, expect, derived = given_from_mapping(_read_mapping(config), str(config))
    values.update(given)
    if layout is not None:
        values["layout"] = layout
    source = str(config) if config is not None else None
    topo = build_topology(values, expect, source)
    check_derived(topo.config, derived, source or "config")
    return topo


# ------------------------------------------------------------------------------------------
# inference from the trace's process groups
# ------------------------------------------------------------------------------------------


def config_from_sizes(layout: str, sizes: dict[str, int], world: int | None
                      ) -> ParallelConfig | None:
    """The parallel config of ``layout`` that has these group sizes (``sizes``: group name ->
    member count, as a trace's process groups declare them), or None when none fits."""
    if layout == DEFAULT:
        return _sglang_from_sizes(sizes, world)
    return _other_from_sizes(layout, sizes, world)


def _sglang_from_sizes(sizes: dict[str, int], world: int | None) -> ParallelConfig | None:
    tp = sizes.get(Group.TP) or world
    if not tp:
        return None
    attn_cp = sizes.get(Group.ATTN_CP, 1)
    attn_tp = sizes.get(Group.ATTN_TP, tp)
    moe_dp = sizes.get(Group.MOE_DP, 1)
    # no moe_ep group: ep == 1, or ep == tp on GPU (aliased); a moe_tp group tells which
    moe_tp = sizes.get(Group.MOE_TP)
    ep = sizes.get(Group.MOE_EP) or (tp // moe_dp // moe_tp if moe_tp else 1)
    pp = sizes.get(Group.PP, 1)
    attn_dp = tp // max(1, attn_tp * attn_cp)
    dp = attn_dp if attn_dp > 1 else max(1, (world or tp) // (tp * pp))
    npu = Group.MOE_EP in sizes and sizes[Group.MOE_EP] == tp
    try:
        return ParallelConfig(tp=tp, dp=dp, enable_dp_attention=attn_dp > 1, attn_cp=attn_cp,
                              ep=ep, moe_dp=moe_dp, pp=pp, npu=npu)
    except ConfigError:
        return None


def _other_from_sizes(layout: str, sizes: dict[str, int], world: int | None
                      ) -> ParallelConfig | None:
    """vLLM / Megatron sizes from the named groups: dp = world / (tp * cp * pp)."""
    tp = sizes.get(Group.TP)
    if not tp or not world:
        return None
    cp, pp = sizes.get(Group.ATTN_CP, 1), sizes.get(Group.PP, 1)
    if world % (tp * cp * pp):
        return None
    etp = sizes.get(Group.MOE_TP, 0) if layout == "megatron" else 0
    try:
        return ParallelConfig(layout=layout, tp=tp, dp=world // (tp * cp * pp), attn_cp=cp,
                              pp=pp, ep=sizes.get(Group.MOE_EP, 1), etp=etp)
    except ConfigError:
        return None
