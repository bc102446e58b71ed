"""Parallel config -> rank coordinates and every group's member lists, in one of three layouts.

``ParallelConfig.layout`` picks how ranks are laid out (``tracekit.topology.layouts``):

* ``sglang`` (default; ../shared/DOMAIN.md section 2, SGLang ``runtime_context.py`` /
  ``parallel_state.py``): DP attention on: ``attn_dp = dp``, ``attn_tp = tp // attn_dp //
  attn_cp`` and ``tp_rank = (attn_dp_rank * attn_cp + attn_cp_rank) * attn_tp + attn_tp_rank``;
  off: ``attn_dp = 1`` and ``dp`` full replicas, each with its own TP group (native DP).
  MoE: ``moe_tp = tp // moe_dp // ep`` and ``tp_rank = (moe_dp_rank * ep + moe_ep_rank) *
  moe_tp + moe_tp_rank``. World rank = ``(dp_replica * pp + pp_rank) * tp + tp_rank``.
  Aliases (same communicator, SGLang creates no separate process group): ATTN_CP is TP when
  ``attn_cp == tp``; ATTN_TP is TP when ``attn_tp == tp``; MOE_DP is ATTN_CP when
  ``attn_cp > moe_dp``, else TP when ``moe_dp == tp``; MOE_EP is TP when ``ep == tp`` and not
  npu (on NPU MOE_EP is always its own communicator, even with TP's members); MOE_TP is TP
  when ``moe_tp == tp``.
* ``vllm``: rank = ``((dp_rank * pp + pp_rank) * pcp + pcp_rank) * tp + tp_rank``; the MoE
  (MOE_EP, vLLM's ``ep`` group) spans DP x PCP x TP of each PP stage.
* ``megatron``: Megatron-core order ``tp-cp-ep-dp-pp`` for the dense grid, and expert TP x EP
  x expert DP x PP over the same world for the experts.

``moe_dp`` and ``etp`` (expert tensor parallel) left at 0 take the layout's value; given,
they are checked against it. After construction every field holds the resolved value.

Building a topology from CLI options, files and traces lives in ``tracekit.topology.config``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.errors import ConfigError
from tracekit.schema import Group
from tracekit.topology.layouts import DEFAULT, NAMES, Layout, layout_of

Members = tuple[int, ...]
LAYOUTS = NAMES


@dataclass(frozen=True)
class ParallelConfig:
    """Parallel options (names follow SGLang's ServerArgs without the ``_size`` suffix).

    ``attn_cp`` is the context-parallel size (SGLang's attention CP, vLLM's prefill CP,
    Megatron's CP); ``etp`` the expert tensor-parallel size (Megatron's
    ``expert_tensor_parallel_size``; SGLang's and vLLM's are derived);
    ``enable_expert_parallel`` vLLM's switch (ep = DP x PCP x TP).
    ``expect`` holds optional path switches of the run (``attn_reduce``, ``dp_gather``,
    ``combine``, ``a2a``) so that a lint can compare what ran with what was configured;
    ``layers`` is the number of decoder layers per forward step when known.
    """

    tp: int = 1
    dp: int = 1
    enable_dp_attention: bool = False
    attn_cp: int = 1
    ep: int = 1
    moe_dp: int = 0  # 0: the layout's value (1 for SGLang and vLLM)
    pp: int = 1
    nnodes: int = 1
    devices_per_node: int | None = None
    npu: bool = False
    layers: int | None = None
    expect: tuple[tuple[str, str], ...] = field(default=())
    layout: str = DEFAULT
    etp: int = 0  # 0: the layout's value
    enable_expert_parallel: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "attn_cp", "ep", "pp", "nnodes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("moe_dp", "etp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name, value in self.layout_obj.resolve(self).items():
            object.__setattr__(self, name, value)
        world = self.world_size
        if world % self.nnodes:
            raise ConfigError(f"world size {world} is not divisible by nnodes={self.nnodes}")
        if self.devices_per_node is not None and self.devices_per_node * self.nnodes != world:
            raise ConfigError(
                f"nnodes={self.nnodes} x devices_per_node={self.devices_per_node} "
                f"!= world size {world}"
            )

    @property
    def layout_obj(self) -> Layout:
        return layout_of(self.layout)

    @property
    def attn_dp(self) -> int:
        return self.layout_obj.attn_dp(self)

    @property
    def attn_tp(self) -> int:
        return self.layout_obj.attn_tp(self)

    @property
    def moe_tp(self) -> int:
        return self.etp

    @property
    def replicas(self) -> int:
        """Full model replicas, each with its own TP group (1 with SGLang's DP attention)."""
        return self.layout_obj.replicas(self)

    @property
    def world_size(self) -> int:
        return self.layout_obj.world_size(self)

    @property
    def per_node(self) -> int:
        return self.devices_per_node or self.world_size // self.nnodes

    @property
    def attn_tp_case(self) -> str:
        """'one' (no attention reduction), 'eq_tp' (full TP) or 'between' (ATTN_TP subgroup)."""
        if self.attn_tp == 1:
            return "one"
        return "eq_tp" if self.attn_tp == self.tp else "between"

    def expected(self, key: str) -> str | None:
        return dict(self.expect).get(key)


@dataclass(frozen=True)
class Topology:
    """Coordinates of every rank and the member lists of every group of one config.

    ``reason`` says how the layout was chosen when tracekit chose it (empty otherwise)."""

    config: ParallelConfig
    reason: str = field(default="", compare=False)

    # ---------------------------------------------------------------- aliases
    @cached_property
    def alias(self) -> dict[str, str]:
        """group -> the group it IS (same communicator); absent when it is its own."""
        return self.config.layout_obj.alias(self.config)

    def alias_note(self, group: str) -> str:
        return self.config.layout_obj.alias_note(self.config, group)

    def canonical(self, group: str) -> str:
        return self.alias.get(group, group)

    def same_communicator(self, a: str | None, b: str | None) -> bool:
        return a is not None and b is not None and self.canonical(a) == self.canonical(b)

    # ---------------------------------------------------------------- members
    @cached_property
    def members(self) -> dict[str, tuple[Members, ...]]:
        """Every group's instances (global ranks in group order), aliases included (an
        aliased group lists the member lists of the group it is)."""
        built = self.config.layout_obj.members(self.config)
        return {g: tuple(built.get(g, ())) for g in Group.ALL}

    def members_of(self, group: str) -> tuple[Members, ...]:
        """Instances of ``group``."""
        return self.members[group]

    def group_of(self, rank: int, group: str) -> Members | None:
        """The member list of ``group`` that contains ``rank``."""
        by_rank = self._rank_index.get(group)
        if by_rank is None:
            by_rank = {r: m for m in reversed(self.members_of(group)) for r in m}
        return by_rank.get(rank)

    @cached_property
    def _rank_index(self) -> dict[str, dict[int, Members]]:
        """group -> rank -> the first member list holding it (one pass, not a scan a call)."""
        return {g: {r: m for m in reversed(self.members_of(g)) for r in m} for g in Group.ALL}

    @cached_property
    def _by_member_set(self) -> dict[frozenset[int], tuple[str, ...]]:
        found: dict[frozenset[int], set[str]] = {}
        for g in Group.ALL:
            for m in self.members_of(g):
                if len(m) > 1:
                    found.setdefault(frozenset(m), set()).add(self.canonical(g))
        order = {g: i for i, g in enumerate(Group.ALL)}
        return {k: tuple(sorted(v, key=order.__getitem__)) for k, v in found.items()}

    @property
    def groups_by_member_set(self) -> dict[frozenset[int], tuple[str, ...]]:
        """Member set (2 ranks or more) -> the distinct communicators with those members."""
        return self._by_member_set

    def groups_with_members(self, ranks: frozenset[int] | set[int] | list[int]) -> tuple[str, ...]:
        """Distinct communicators whose member set equals ``ranks`` (aliases folded)."""
        return self._by_member_set.get(frozenset(int(r) for r in ranks), ())

    # ---------------------------------------------------------------- tables
    def coords(self) -> pa.Table:
        """RANK_COORDS: one row per global rank."""
        c = self.config
        rank = np.arange(c.world_size, dtype=np.int64)
        cols = {schema.RANK: rank, schema.NODE: rank // c.per_node,
                schema.LOCAL_DEVICE: rank % c.per_node}
        cols.update(c.layout_obj.coords(c, rank))
        arrays = [pa.array(cols[f.name].astype(np.int32)) for f in schema.RANK_COORDS]
        return pa.Table.from_arrays(arrays, schema=schema.RANK_COORDS)

    def group_table(self) -> pa.Table:
        """GROUP_MEMBERS: every instance of every group (size > 0), with its alias."""
        groups, members, alias = [], [], []
        for g in Group.ALL:
            for m in self.members_of(g):
                groups.append(g)
                members.append(list(m))
                alias.append(self.alias.get(g))
        return schema.conform(
            pa.table({schema.GROUP: groups, schema.MEMBERS: members, schema.ALIAS_OF: alias}),
            schema.GROUP_MEMBERS,
        )


@functools.lru_cache(maxsize=32)
def topology_of(config: ParallelConfig) -> Topology:
    """The one Topology of ``config`` in this process: its member tables are built once
    however many traces imply the same config (every rank of a run does)."""
    return Topology(config)
