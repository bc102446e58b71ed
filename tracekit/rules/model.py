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
        library: nccl             # free text: nccl, custom_ar, deep_ep, gloo, hccl...
        role: collective          # role inside the library: collective, layout, notify,
                                  #   dispatch, combine, wrapper, p2p, barrier...
        mode: normal              # normal | low_latency (DeepEP) or null
        instance: true            # this row carries the collective's time on its rank
                                  #   (device kernel, gloo runloop annotation, HCCL op);
                                  #   false for CPU wrappers (c10d::*, record_param_comms)
        group: TP                 # default communicator (weakest evidence), schema.Group
        group_ep: MOE_EP          # default communicator when the layout has ep > 1
        group_npu: MOE_EP         # default communicator when the topology is npu
        path: mylib.dispatch      # path implied by the kernel alone (a declared path label)
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
        path: mylib.combine       # optional (a declared path label)
        op: [all_reduce]          # optional: only events of these ops (schema.Op)
        split: true               # optional: only events with (true) / without (false)
                                  #   split sizes (uneven all_to_all vs an even one)

    paths:                        # derived facts -> path, for events no call site named
      - id: path.mylib_gather
        path: mylib.gather
        when:                     # every given key must hold (lists mean "one of")
          op: [all_gatherv]       # schema.Op
          group: [TP]             # schema.Group decided so far
          library: [nccl]
          role: [dispatch]
          mode: [low_latency]
          call: 'regex'           # on call_site
          attn_tp: 'eq_tp'        # topology: one | eq_tp | between (1 < attn_tp < tp)
          dp_attention: true      # topology: DP attention on/off

    phase_order: [attention_reduce, dp_gather, dispatch, experts, combine]
                                  # per-layer phase order (schema.Phase): inside a layer a
                                  #   path's phase never goes back

    path_families:                # variants of one per-layer step
      - id: mylib_a2a
        one_per_layer: true       # a layer uses one variant of the family
        required:                 # when every decoder layer must hold one of its paths
          attn_tp: [eq_tp]        # topology attn_tp cases (one | eq_tp | between)
          dp_attention: true      # DP attention on/off
          tp_above_one: true      # tp > 1
          seen: true              # once any of the family's paths ran
          unless_seen: [other_family]   # not when a path of these families ran

    path_labels:                  # the values of `path` (every path named anywhere must be
                                  #   declared here, in a packaged or a user file)
      - id: mylib.dispatch
        phase: dispatch           # schema.Phase
        const: MYLIB_DISPATCH     # Python constant name (tracekit.rules.labels.PathLabel)
        family: mylib_a2a         # a declared path family
        single_use: true          # at most once per decoder layer
        slot: {op: [all_reduce], group: [TP], dp_attention: true}
                                  # a collective of this op / group (topology) may fill this
                                  #   path by its position in the layer
        expected: {attn_tp: eq_tp}    # the topology where it is the expected path
        possible: {attn_tp: between}  # the topology where it can occur at all

    layer_markers:                # events that open a decoder layer
      - id: layer.annotation
        match: '^layer[_ .]?(?P<layer>\\d+)$'   # named group 'layer' gives the index
        kinds: [annotation]

    lints:                        # checks into FINDINGS; the logic is a generic check
      - id: double-reduction
        check: same_layer         # same_layer | group_in_slot | config_paths | participants
        severity: error           # error | warning | info
        message: '{path} and a post-expert reduction both ran in layer {layer}'
        params: {}                # the check's parameters; path labels or family ids
                                  #   (docs/rules.md lists each check's parameters)

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
# the generic lint checks of tracekit.rules.lints (CHECKS)
LINT_CHECKS = ("same_layer", "group_in_slot", "config_paths", "participants")


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
class PathLabelRule:
    """A path label: the values of ``path`` (ATTRIBUTED, FINDINGS, ground-truth sidecars)."""

    id: str
    phase: str
    const: str | None = None
    family: str | None = None
    single_use: bool = False
    slot: When | None = None
    expected: When | None = None
    possible: When | None = None


@dataclass(frozen=True)
class FamilyNeed:
    """When every decoder layer must hold one of a family's paths."""

    attn_tp: tuple[str, ...] = ()
    dp_attention: bool | None = None
    tp_above_one: bool | None = None
    seen: bool = False
    unless_seen: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathFamily:
    """A group of path labels that are variants of one per-layer step."""

    id: str
    one_per_layer: bool = False
    required: FamilyNeed | None = None


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
    path_labels: tuple[PathLabelRule, ...] = ()
    path_families: tuple[PathFamily, ...] = ()
    phase_order: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    priority: int = 50

    def label(self, path: str) -> PathLabelRule | None:
        return self._labels().get(path)

    def phase_rank(self) -> dict[str, int]:
        """Position of each phase in ``phase_order``."""
        cached = self.__dict__.get("_phase_rank")
        if cached is None:
            cached = {phase: i for i, phase in enumerate(self.phase_order)}
            object.__setattr__(self, "_phase_rank", cached)
        return cached

    def one_per_layer(self) -> frozenset[str]:
        """Families with one variant per layer."""
        cached = self.__dict__.get("_one_per_layer")
        if cached is None:
            cached = frozenset(f.id for f in self.path_families if f.one_per_layer)
            object.__setattr__(self, "_one_per_layer", cached)
        return cached

    def _labels(self) -> dict[str, PathLabelRule]:
        cached = self.__dict__.get("_label_index")
        if cached is None:
            cached = {lab.id: lab for lab in self.path_labels}
            object.__setattr__(self, "_label_index", cached)
        return cached

    def phase_of(self, path: str | None) -> str | None:
        """The phase of a path label (None for a null or undeclared path)."""
        phases = self.__dict__.get("_phase_index")  # called once per row: one lookup
        if phases is None:
            phases = {lab.id: lab.phase for lab in self._labels().values()}
            object.__setattr__(self, "_phase_index", phases)
        return phases.get(path) if isinstance(path, str) else None

    def family_paths(self, family: str) -> tuple[str, ...]:
        """The labels of one family, in declaration order."""
        return tuple(lab.id for lab in self._labels().values() if lab.family == family)

    def expand_paths(self, names: Any) -> tuple[str, ...]:
        """Path labels from a list of labels and family ids (a family stands for its labels)."""
        families = {f.id for f in self.path_families}
        out: list[str] = []
        for name in (names,) if isinstance(names, str) else tuple(names or ()):
            out.extend(self.family_paths(name) if name in families else (name,))
        return tuple(dict.fromkeys(out))

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
            path_labels=merge(self.path_labels, other.path_labels),
            path_families=merge(self.path_families, other.path_families),
            phase_order=other.phase_order or self.phase_order,
            sources=other.sources + self.sources,
        )

    def check_paths(self, file: RuleSet, source: str) -> None:
        """Every path and family named by ``file`` is declared in these rules (ConfigError)."""
        labels = self._labels()
        families = {f.id for f in self.path_families}
        named: list[tuple[str, str]] = []
        named += [(f"kernel_classes ({r.id})", r.path) for r in file.kernel_classes if r.path]
        named += [(f"call_sites ({r.id})", r.path) for r in file.call_sites if r.path]
        named += [(f"paths ({r.id})", r.path) for r in file.paths]
        for lint in file.lints:
            for key, value in lint.params:
                named += [(f"lints ({lint.id}) {key}", v) for v in lint_param_paths(key, value)
                          if v not in families]
                fams: list[Any] = []
                if key == "expect" and isinstance(value, FrozenMap):
                    fams = [k for k, _ in value]
                elif key in LINT_FAMILY_PARAMS:
                    fams = list(value) if isinstance(value, tuple) else [value]
                for fam in fams:
                    if str(fam) not in families:
                        raise ConfigError(f"lints ({lint.id}) {key}: {fam!r} is not a declared "
                                          f"path family ({', '.join(sorted(families))})", source)
        for where, path in named:
            if path not in labels:
                raise ConfigError(f"{where}: path {path!r} is not a declared path label "
                                  f"(path_labels: {', '.join(labels)})", source)
        for lab in file.path_labels:
            if lab.family is not None and lab.family not in families:
                raise ConfigError(f"path_labels ({lab.id}): family {lab.family!r} is not a "
                                  f"declared path family ({', '.join(sorted(families))})", source)
        for fam in file.path_families:
            for other in fam.required.unless_seen if fam.required else ():
                if other not in families:
                    raise ConfigError(f"path_families ({fam.id}): unless_seen {other!r} is not "
                                      "a declared path family", source)


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
    "phase": schema.Phase.ALL,
    "phase_order": schema.Phase.ALL,
    "attn_tp": TOPO_ATTN_TP,
    "severity": SEVERITIES,
    "check": LINT_CHECKS,
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
    if name in ("when", "slot", "expected", "possible"):
        return _build(When, value or {}, f"{where}.{name}")
    if name == "required":
        return _build(FamilyNeed, value or {}, f"{where}.required")
    if name == "params":
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: params must be a mapping")
        return tuple(sorted(((str(k), _freeze(v)) for k, v in value.items()),
                            key=lambda kv: kv[0]))
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


class FrozenMap(tuple):  # type: ignore[type-arg]
    """A YAML mapping inside lint params: sorted (key, value) pairs, hashable."""

    def get(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self if k == key), default)


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return FrozenMap(sorted(((str(k), _freeze(v)) for k, v in value.items()),
                                key=lambda kv: kv[0]))
    return value


def lint_param_paths(key: str, value: Any) -> list[str]:
    """Path labels (or family ids) a lint parameter names: strings under the path keys, and
    the leaves of ``expect`` (config value -> paths, or options with ``paths``)."""
    if key in LINT_PATH_PARAMS:
        items = value if isinstance(value, tuple) else (value,)
        return [str(v) for v in items]
    if key != "expect" or not isinstance(value, FrozenMap):
        return []
    out: list[str] = []
    for _family, by_value in value:
        for _config, want in by_value if isinstance(by_value, FrozenMap) else ():
            for item in want if isinstance(want, tuple) else (want,):
                if isinstance(item, FrozenMap):
                    out.extend(str(v) for v in item.get("paths", ()))
                else:
                    out.append(str(item))
    return out


SECTIONS: dict[str, type] = {
    "kernel_classes": KernelRule,
    "group_descs": GroupDescRule,
    "call_sites": CallSiteRule,
    "paths": PathRule,
    "layer_markers": LayerMarker,
    "lints": LintRule,
    "path_labels": PathLabelRule,
    "path_families": PathFamily,
}
# lint params that name path labels (or path families)
LINT_PATH_PARAMS = ("paths", "with", "report_path")
# lint params that name path families
LINT_FAMILY_PARAMS = ("families", "at_most")


def ruleset_from_mapping(data: Any, source: str) -> RuleSet:
    """Validate one parsed YAML document into a RuleSet (ConfigError on any problem)."""
    if not isinstance(data, dict):
        raise ConfigError("a rules file must be a YAML mapping", source)
    unknown = sorted(set(data) - set(SECTIONS) - {"version", "name", "priority", "phase_order"})
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {', '.join(map(str, unknown))}", source)
    version = data.get("version")
    if version != FORMAT_VERSION:
        raise ConfigError(
            f"rules format version {version!r} is not supported (expected {FORMAT_VERSION})",
            source,
        )
    built: dict[str, tuple[Any, ...]] = {}
    for section, cls in SECTIONS.items():
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
    try:
        order = _as_tuple(data.get("phase_order") or [], "phase_order", "phase_order")
    except ConfigError as exc:
        raise ConfigError(exc.message, source) from None
    return RuleSet(**built, phase_order=order, sources=(source,), priority=priority)
