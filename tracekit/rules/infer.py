"""The parallel config a trace's own process groups imply: the ``pg_config`` descriptions the
rules name (``group_descs``) and their member lists, fitted to each layout in turn."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.rules.groups import desc_to_group, member_groups
from tracekit.schema import Group
from tracekit.topology import LAYOUTS, Topology, topology_of
from tracekit.topology.config import config_from_sizes
from tracekit.topology.layouts import DEFAULT


def infer_topology(process_groups: pa.Table, rules: Any, world_size: int | None,
                   layout: str | None = None) -> Topology | None:
    """Rebuild the parallel config from ``pg_config`` descriptions and member lists.

    Only groups whose description names a communicator (rules' ``group_descs``) count. The
    result is checked: every declared group's members must be a member list of the rebuilt
    topology, else None (the trace does not follow the layout and nothing is assumed).
    ``layout`` None: SGLang's, else the first other layout whose groups fit (its ``reason``
    says so).
    """
    if process_groups.num_rows == 0:
        return None
    # a handful of rows per rank: plain lists, not a frame
    descs = process_groups.column(schema.PG_DESC).to_pylist()
    named = desc_to_group(pd.Series(descs, dtype="object"), rules).tolist()
    declared_groups = [(str(g), tuple(r or ())) for g, r in zip(
        named, process_groups.column(schema.PG_RANKS).to_pylist(), strict=True) if g]
    if not declared_groups:
        return None
    sizes: dict[str, int] = {}
    for g, ranks in declared_groups:
        sizes[g] = max(sizes.get(g, 0), len(ranks))
    world = world_size or sizes.get(Group.WORLD)
    for name in ([layout] if layout else LAYOUTS):
        config = config_from_sizes(name, sizes, world)
        if config is None:
            continue
        topo = topology_of(config)
        if _fits(topo, declared_groups):
            if layout is None and name != DEFAULT:
                return Topology(config, reason=f"layout {name} chosen: the trace's process "
                                "groups fit no SGLang layout and fit this one")
            return topo
    return None


def _fits(topo: Topology, declared: list[tuple[str, tuple[int, ...]]]) -> bool:
    return all(len(set(ranks)) <= 1 or topo.canonical(g) in member_groups(topo, ranks)
               for g, ranks in declared)
