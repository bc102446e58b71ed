"""Parallel config -> rank coordinates and every group's member lists (SGLang layout).

Formulas (../shared/DOMAIN.md section 2, SGLang ``runtime_context.py`` / ``parallel_state.py``):

* DP attention on: ``attn_dp = dp``, ``attn_tp = tp // attn_dp // attn_cp`` and
  ``tp_rank = (attn_dp_rank * attn_cp + attn_cp_rank) * attn_tp + attn_tp_rank``.
  Off: ``attn_dp = 1`` and ``dp`` full replicas, each with its own TP group (native DP).
* MoE: ``moe_tp = tp // moe_dp // ep`` and
  ``tp_rank = (moe_dp_rank * ep + moe_ep_rank) * moe_tp + moe_tp_rank``.
* world rank = ``(dp_replica * pp + pp_rank) * tp + tp_rank``.

Aliases (same communicator, SGLang creates no separate process group): ATTN_CP is TP when
``attn_cp == tp``; ATTN_TP is TP when ``attn_tp == tp``; MOE_DP is ATTN_CP when
``attn_cp > moe_dp``, else TP when ``moe_dp == tp``; MOE_EP is TP when ``ep == tp`` and not
npu (on NPU MOE_EP is always its own communicator, even with TP's members); MOE_TP is TP when
``moe_tp == tp``.

Building a topology from CLI options, files and traces lives in ``tracekit.topology_config``.
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

Members = tuple[int, ...]


@dataclass(frozen=True)
class ParallelConfig:
    """SGLang's parallel options (names follow its ServerArgs without the ``_size`` suffix).

    ``expect`` holds optional path switches of the run (``attn_reduce``, ``dp_gather``,
    ``combine``, ``a2a``) so that a lint can compare what ran with what was configured;
    ``layers`` is the number of decoder layers per forward step when known.
    """

    tp: int = 1
    dp: int = 1
    enable_dp_attention: bool = False
    attn_cp: int = 1
    ep: int = 1
    moe_dp: int = 1
    pp: int = 1
    nnodes: int = 1
    devices_per_node: int | None = None
    npu: bool = False
    layers: int | None = None
    expect: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "attn_cp", "ep", "moe_dp", "pp", "nnodes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        attn_dp = self.dp if self.enable_dp_attention else 1
        if self.tp % (attn_dp * self.attn_cp):
            raise ConfigError(
                f"tp={self.tp} is not divisible by attn_dp*attn_cp={attn_dp}*{self.attn_cp}"
                " (attn_tp = tp / attn_dp / attn_cp must be an integer)"
            )
        if self.tp % (self.ep * self.moe_dp):
            raise ConfigError(
                f"tp={self.tp} is not divisible by ep*moe_dp={self.ep}*{self.moe_dp}"
                " (moe_tp = tp / moe_dp / ep must be an integer)"
            )
        world = self.world_size
        if world % self.nnodes:
            raise ConfigError(f"world size {world} is not divisible by nnodes={self.nnodes}")
        if self.devices_per_node is not None and self.devices_per_node * self.nnodes != world:
            raise ConfigError(
                f"nnodes={self.nnodes} x devices_per_node={self.devices_per_node} "
                f"!= world size {world}"
            )

    @property
    def attn_dp(self) -> int:
        return self.dp if self.enable_dp_attention else 1

    @property
    def attn_tp(self) -> int:
        return self.tp // self.attn_dp // self.attn_cp

    @property
    def moe_tp(self) -> int:
        return self.tp // self.moe_dp // self.ep

    @property
    def replicas(self) -> int:
        """Native DP replicas (each a full TP x PP model); 1 with DP attention."""
        return 1 if self.enable_dp_attention else self.dp

    @property
    def world_size(self) -> int:
        return self.replicas * self.pp * self.tp

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
    """Coordinates of every rank and the member lists of every group of one config."""

    config: ParallelConfig

    # ---------------------------------------------------------------- aliases
    @cached_property
    def alias(self) -> dict[str, str]:
        """group -> the group it IS (same communicator); absent when it is its own."""
        c = self.config
        out: dict[str, str] = {}
        if c.attn_cp == c.tp:
            out[Group.ATTN_CP] = Group.TP
        if c.attn_tp == c.tp:
            out[Group.ATTN_TP] = Group.TP
        if c.attn_cp > c.moe_dp:
            out[Group.MOE_DP] = out.get(Group.ATTN_CP, Group.ATTN_CP)
        elif c.moe_dp == c.tp:
            out[Group.MOE_DP] = Group.TP
        if c.ep == c.tp and not c.npu:
            out[Group.MOE_EP] = Group.TP
        if c.moe_tp == c.tp:
            out[Group.MOE_TP] = Group.TP
        return out

    def canonical(self, group: str) -> str:
        return self.alias.get(group, group)

    def same_communicator(self, a: str | None, b: str | None) -> bool:
        return a is not None and b is not None and self.canonical(a) == self.canonical(b)

    # ---------------------------------------------------------------- members
    @cached_property
    def members(self) -> dict[str, tuple[Members, ...]]:
        """Every group's instances (global ranks in group order), aliases included."""
        c = self.config
        out: dict[str, list[Members]] = {g: [] for g in Group.ALL}
        stage = c.pp * c.tp  # ranks of one native-DP replica
        for rep in range(c.replicas):
            rbase = rep * stage
            out[Group.DP].append(tuple(range(rbase, rbase + stage)))
            for i in range(c.tp):
                out[Group.PP].append(tuple(range(rbase + i, rbase + stage, c.tp)))
            for p in range(c.pp):
                self._stage_groups(out, rbase + p * c.tp)
        out[Group.WORLD].append(tuple(range(c.world_size)))
        if c.enable_dp_attention or c.dp == 1:
            out[Group.DP] = []
        if c.pp == 1:
            out[Group.PP] = []
        return {g: tuple(v) for g, v in out.items()}

    def _stage_groups(self, out: dict[str, list[Members]], base: int) -> None:
        c = self.config
        at, acp, adp = c.attn_tp, c.attn_cp, c.attn_dp
        mt, ep, mdp = c.moe_tp, c.ep, c.moe_dp
        out[Group.TP].append(tuple(range(base, base + c.tp)))
        for blk in range(acp * adp):
            out[Group.ATTN_TP].append(tuple(range(base + blk * at, base + (blk + 1) * at)))
        for d in range(adp):
            for t in range(at):
                start = base + d * at * acp + t
                out[Group.ATTN_CP].append(tuple(range(start, start + at * acp, at)))
        for blk in range(ep * mdp):
            out[Group.MOE_TP].append(tuple(range(base + blk * mt, base + (blk + 1) * mt)))
        for d in range(mdp):
            for t in range(mt):
                start = base + d * ep * mt + t
                out[Group.MOE_EP].append(tuple(range(start, start + ep * mt, mt)))
        if c.attn_cp > c.moe_dp:  # MOE_DP is ATTN_CP: same member lists
            return
        for k in range(mt * ep):
            out[Group.MOE_DP].append(tuple(range(base + k, base + c.tp, mt * ep)))

    def members_of(self, group: str) -> tuple[Members, ...]:
        """Instances of ``group`` (the aliased group's lists where SGLang reuses one)."""
        if group == Group.MOE_DP and self.config.attn_cp > self.config.moe_dp:
            return self.members[Group.ATTN_CP]
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

    def groups_with_members(self, ranks: frozenset[int] | set[int] | list[int]) -> tuple[str, ...]:
        """Distinct communicators whose member set equals ``ranks`` (aliases folded)."""
        return self._by_member_set.get(frozenset(int(r) for r in ranks), ())

    # ---------------------------------------------------------------- tables
    def coords(self) -> pa.Table:
        """RANK_COORDS: one row per global rank."""
        c = self.config
        rank = np.arange(c.world_size, dtype=np.int64)
        tp_rank = rank % c.tp
        pp_rank = (rank // c.tp) % c.pp
        replica = rank // (c.tp * c.pp)
        at, acp, mt = c.attn_tp, c.attn_cp, c.moe_tp
        cols = {
            schema.RANK: rank,
            schema.NODE: rank // c.per_node,
            schema.LOCAL_DEVICE: rank % c.per_node,
            schema.DP_RANK: replica,
            schema.PP_RANK: pp_rank,
            schema.TP_RANK: tp_rank,
            schema.ATTN_DP_RANK: tp_rank // (at * acp),
            schema.ATTN_CP_RANK: (tp_rank // at) % acp,
            schema.ATTN_TP_RANK: tp_rank % at,
            schema.MOE_DP_RANK: tp_rank // (c.ep * mt),
            schema.MOE_EP_RANK: (tp_rank // mt) % c.ep,
            schema.MOE_TP_RANK: tp_rank % mt,
        }
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
