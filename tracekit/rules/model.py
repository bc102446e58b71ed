"""Rule files: the YAML format, validated into frozen dataclasses.

Every rule tracekit applies is data (ARCHITECTURE.md "Rules are data"). The packaged files
live in ``tracekit/rules/data/*.yaml``; users add their own with ``--rules FILE``. User rules
are tried before packaged ones, so a user rule with a matching pattern wins; a user rule
whose ``id`` equals a packaged one replaces it.

Format (version 1). One YAML mapping per file; every key below is optional except
``version``; an unknown key anywhere is an error (``ConfigError`` naming the file and key)::

    version: 1                    # format version; this engine reads 1
    name: nccl                    # a label for messages
    priority: 50                  # packaged files are tried in (priority, file name) order;
                                  #   lower first; catch-all rules use a high number (user
                                  #   files always come before every packaged file)

    kernel_classes:               # what an event IS; first matching rule wins (file order)
      - id: nccl.all_reduce       # unique id, written to ATTRIBUTED.rule_id
        match: '^nccl(Dev|Symk)?Kernel_AllReduce'   # Python regex, re.search on the event name
        kinds: [kernel]           # schema.Kind values it applies to (default: every kind)
        class: communication      # schema.KernelClass: communication | fused | compute | memcpy
        op: all_reduce            # schema.Op it performs (fills a null EVENTS.op)
        library: nccl             # free text: nccl, custom_ar, deep_ep, gloo, hccl, fuseep...
        role: collective          # role inside the library: collective, layout, notify,
                                  #   dispatch, combine, wrapper, p2p, barrier...
        mode: normal              # normal | low_latency (DeepEP) or null
        instance: true            # this row carries the collective's time on its rank
                                  #   (device kernel, gloo runloop annotation, HCCL op);
                                  #   false for CPU wrappers (c10d::*, record_param_comms)
        group: TP                 # default communicator (weakest evidence), schema.Group
        group_ep: MOE_EP          # default communicator when the layout has ep > 1
        group_npu: MOE_EP         # default communicator when the topology is npu
        path: deepep.ll.dispatch  # path implied by the kernel alone, schema.PathLabel
        grouped: true             # back-to-back kernels of this rule on one stream (or
                                  #   consecutive CPU calls from one call site) are ONE
                                  #   logical collective (pynccl reduce_scatterv / all_gatherv)
        grouped_op: reduce_scatterv   # the op of that logical collective
        runs_as: gloo:all_reduce  # c10d wrapper on gloo: the runloop annotation it causes
        prepares: [dispatch, combine]  # this kernel is the synchronisation part of the next
                                  #   kernel of one of these ops on its stream (same library):
                                  #   it takes that operation's op (when it has none), logical
                                  #   collective, group, path and layer (DeepEP notify kernels)

    group_descs:                  # process-group description -> communicator
      - id: desc.tp
        match: '^tp(:|$)'         # regex on pg_desc ('tp:device', 'attention_tp:cpu', HCCL name)
        group: TP                 # schema.Group; omit (null) for 'undefined': no evidence

    call_sites:                   # Python call site -> communicator and/or path
      - id: call.attn_tp_all_reduce
        match: '\\battn_tp_all_reduce\\b'  # regex on EVENTS.call_site (frames ' <- ' joined)
        group: ATTN_TP            # optional
        path: attn_reduce.attn_tp # optional
        op: [all_reduce]          # optional: only events of these ops (schema.Op)
        split: true               # optional: only events with (true) / without (false)
                                  #   split sizes (uneven all_to_all vs an even one)

    paths:                        # derived facts -> path, for events no call site named
      - id: path.all_gatherv
        path: dp_gather.gatherv
        when:                     # every given key must hold (lists mean "one of")
          op: [all_gatherv]       # schema.Op
          group: [TP]             # schema.Group decided so far
          library: [nccl]
          role: [dispatch]
          mode: [low_latency]
          call: 'regex'           # on call_site
          attn_tp: 'eq_tp'        # topology: one | eq_tp | between (1 < attn_tp < tp)
          dp_attention: true      # topology: DP attention on/off

    layer_markers:                # events that open a decoder layer
      - id: layer.annotation
        match: '^layer[_ .]?(?P<layer>\\d+)$'   # named group 'layer' gives the index
        kinds: [annotation]

    lints:                        # checks into FINDINGS; the logic is a named built-in check
      - id: double-reduction
        check: double_reduction   # one of tracekit.rules.lints.CHECKS
        severity: error           # error | warning | info
        message: 'post-expert AllReduce and {path} both ran in layer {layer}'
        params: {}                # check-specific parameters (strings or lists of strings)

Regexes are compiled when the file is read, so a bad pattern is reported with the file.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from tracekit import schema
from tracekit.errors import ConfigError

FORMAT_VERSION = 1

TOPO_ATTN_TP = ("one", "eq_tp", "between")
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class KernelRule:
    id: str
    match: str
    cls: str
    kinds: tuple[str, ...] = ()
    op: str | None = None
    library: str | None = None
    role: str | None = None
    mode: str | None = None
    instance: bool = True
    group: str | None = None
    group_ep: str | None = None
    group_npu: str | None = None
    path: str | None = None
    grouped: bool = False
    grouped_op: str | None = None
    runs_as: str | None = None
    prepares: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupDescRule:
    id: str
    match: str
    group: str | None = None


@dataclass(frozen=True)
class CallSiteRule:
    id: str
    match: str
    group: str | None = None
    path: str | None = None
    op: tuple[str, ...] = ()
    split: bool | None = None


@dataclass(frozen=True)
class When:
    op: tuple[str, ...] = ()
    group: tuple[str, ...] = ()
    library: tuple[str, ...] = ()
    role: tuple[str, ...] = ()
    mode: tuple[str, ...] = ()
    call: str | None = None
    attn_tp: str | None = None
    dp_attention: bool | None = None


@dataclass(frozen=True)
class PathRule:
    id: str
    path: str
    when: When = field(default_factory=When)


@dataclass(frozen=True)
class LayerMarker:
    id: str
    match: str
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class LintRule:
    id: str
    check: str
    severity: str = "warning"
    message: str = ""
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class RuleSet:
    """All rules in force: packaged files plus user files, in priority order."""

    kernel_classes: tuple[KernelRule, ...] = ()
    group_descs: tuple[GroupDescRule, ...] = ()
    call_sites: tuple[CallSiteRule, ...] = ()
    paths: tuple[PathRule, ...] = ()
    layer_markers: tuple[LayerMarker, ...] = ()
    lints: tuple[LintRule, ...] = ()
    sources: tuple[str, ...] = ()
    priority: int = 50

    def merged(self, other: RuleSet) -> RuleSet:
        """``other`` first (higher priority); a rule of ``other`` with the same id replaces ours."""

        def merge(mine: tuple[Any, ...], theirs: tuple[Any, ...]) -> tuple[Any, ...]:
            ids = {r.id for r in theirs}
            return tuple(theirs) + tuple(r for r in mine if r.id not in ids)

        return RuleSet(
            kernel_classes=merge(self.kernel_classes, other.kernel_classes),
            group_descs=merge(self.group_descs, other.group_descs),
            call_sites=merge(self.call_sites, other.call_sites),
            paths=merge(self.paths, other.paths),
            layer_markers=merge(self.layer_markers, other.layer_markers),
            lints=merge(self.lints, other.lints),
            sources=other.sources + self.sources,
        )


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------

_VOCAB: dict[str, tuple[str, ...]] = {
    "cls": schema.KernelClass.ALL,
    "kinds": schema.Kind.ALL,
    "op": schema.Op.ALL,
    "grouped_op": schema.Op.ALL,
    "group": schema.Group.ALL,
    "group_ep": schema.Group.ALL,
    "group_npu": schema.Group.ALL,
    "prepares": schema.Op.ALL,
    "path": schema.PathLabel.ALL,
    "attn_tp": TOPO_ATTN_TP,
    "severity": SEVERITIES,
}
_REGEX_KEYS = ("match", "call")
_YAML_NAME = {"cls": "class"}


def _yaml_key(name: str) -> str:
    return _YAML_NAME.get(name, name)


def _check_vocab(key: str, value: str, where: str) -> None:
    allowed = _VOCAB.get(key)
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{where}: {_yaml_key(key)} {value!r} is not one of {', '.join(allowed)}")


def _as_tuple(value: Any, key: str, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{where}: {_yaml_key(key)} must be a string or a list of strings")
    for v in items:
        _check_vocab(key, v, where)
    return tuple(items)


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {_yaml_key(f.name): f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    kwargs: dict[str, Any] = {}
    for yname, f in known.items():
        if yname not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"{where}: missing required key {yname!r}")
            continue
        value = data[yname]
        kwargs[f.name] = _convert(f.name, str(f.type), value, where)
    return cls(**kwargs)


def _convert(name: str, typ: str, value: Any, where: str) -> Any:
    label = _yaml_key(name)
    if name == "when":
        return _build(When, value or {}, f"{where}.when")
    if name == "params":
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: params must be a mapping")
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if typ.startswith("tuple[str"):
        return _as_tuple(value, name, where)
    if typ.startswith("bool"):
        if not isinstance(value, bool) and not (value is None and "None" in typ):
            raise ConfigError(f"{where}: {label} must be true or false")
        return value
    if value is None and "None" in typ:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where}: {label} must be a string")
    text = str(value)
    if name in _REGEX_KEYS:
        try:
            re.compile(text)
        except re.error as exc:
            raise ConfigError(f"{where}: {label} is not a valid regex ({exc})") from None
    _check_vocab(name, text, where)
    return text


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


_SECTIONS: dict[str, type] = {
    "kernel_classes": KernelRule,
    "group_descs": GroupDescRule,
    "call_sites": CallSiteRule,
    "paths": PathRule,
    "layer_markers": LayerMarker,
    "lints": LintRule,
}


def ruleset_from_mapping(data: Any, source: str) -> RuleSet:
    """Validate one parsed YAML document into a RuleSet (ConfigError on any problem)."""
    if not isinstance(data, dict):
        raise ConfigError("a rules file must be a YAML mapping", source)
    unknown = sorted(set(data) - set(_SECTIONS) - {"version", "name", "priority"})
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {', '.join(map(str, unknown))}", source)
    version = data.get("version")
    if version != FORMAT_VERSION:
        raise ConfigError(
            f"rules format version {version!r} is not supported (expected {FORMAT_VERSION})",
            source,
        )
    built: dict[str, tuple[Any, ...]] = {}
    for section, cls in _SECTIONS.items():
        items = data.get(section) or []
        if not isinstance(items, list):
            raise ConfigError(f"{section} must be a list", source)
        rules = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            where = f"{section}[{i}]"
            if isinstance(item, dict) and "id" in item:
                where = f"{section}[{i}] ({item['id']})"
            try:
                rule = _build(cls, item, where)
            except ConfigError as exc:
                raise ConfigError(exc.message, source) from None
            if rule.id in seen:
                raise ConfigError(f"{where}: duplicate id {rule.id!r}", source)
            seen.add(rule.id)
            rules.append(rule)
        built[section] = tuple(rules)
    priority = data.get("priority", 50)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ConfigError("priority must be an integer", source)
    return RuleSet(**built, sources=(source,), priority=priority)
