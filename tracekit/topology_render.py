"""Text pictures of a topology: the coordinate grids as seed 002 draws them, and member lists.

Pure functions from a Topology to a string; the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracekit.schema import Group
from tracekit.topology import Topology


def _box(title_cols: str, col_labels: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]
         ) -> list[str]:
    """A box-drawn grid: row labels on the left, column labels above."""
    width = max([len(c) for c in col_labels] + [len(x) for _, cells in rows for x in cells]) + 2
    label_w = max(len(label) for label, _ in rows) + 7
    pad = " " * label_w
    lines = [pad + " " + title_cols.center(len(col_labels) * (width + 1)).rstrip(), ""]
    lines.append(pad + " " + "".join(c.center(width + 1) for c in col_labels).rstrip())
    lines.append(pad + "┌" + "┬".join("─" * width for _ in col_labels) + "┐")
    for label, cells in rows:
        body = "│".join(f" {c}".ljust(width) for c in cells)
        lines.append(label.ljust(label_w) + "│" + body + "│")
    lines.append(pad + "└" + "┴".join("─" * width for _ in col_labels) + "┘")
    return lines


def attention_grid(topo: Topology) -> str:
    c = topo.config
    cols = [str(t) for t in range(c.attn_tp)]
    rows = []
    for d in range(c.attn_dp):
        for cp in range(c.attn_cp):
            label = f"attn_dp_rank = {d}" + (f", attn_cp_rank = {cp}" if c.attn_cp > 1 else "")
            base = (d * c.attn_cp + cp) * c.attn_tp
            rows.append((label, [f"TP{base + t}" for t in range(c.attn_tp)]))
    head = (f"Attention: attn_dp={c.attn_dp} x attn_cp={c.attn_cp} x attn_tp={c.attn_tp}"
            f"  (tp_rank = (attn_dp_rank * attn_cp + attn_cp_rank) * attn_tp + attn_tp_rank)")
    return "\n".join([head, "", *_box("attn_tp_rank", cols, rows)])


def moe_grid(topo: Topology) -> str:
    c = topo.config
    cols = [str(e) for e in range(c.ep)]
    rows = []
    for d in range(c.moe_dp):
        cells = []
        for e in range(c.ep):
            base = (d * c.ep + e) * c.moe_tp
            cells.append("/".join(f"TP{base + t}" for t in range(c.moe_tp)))
        rows.append((f"moe_dp_rank = {d}", cells))
    head = (f"MoE: moe_dp={c.moe_dp} x ep={c.ep} x moe_tp={c.moe_tp}"
            f"  (tp_rank = (moe_dp_rank * ep + moe_ep_rank) * moe_tp + moe_tp_rank;"
            f" a cell lists its moe_tp ranks)")
    return "\n".join([head, "", *_box("moe_ep_rank", cols, rows)])


def group_lines(topo: Topology) -> str:
    lines = ["Groups (global ranks; an alias is the same communicator):"]
    for g in Group.ALL:
        alias = topo.alias.get(g)
        members = topo.members_of(g)
        if alias is not None:
            lines.append(f"  {g:<8} = {alias} (alias, no separate communicator)")
            continue
        if not members:
            continue
        shown = ", ".join(str(list(m)) for m in members[:8])
        more = f", ... ({len(members)} groups)" if len(members) > 8 else ""
        lines.append(f"  {g:<8} {shown}{more}")
    if topo.config.npu and topo.config.ep == topo.config.tp:
        lines.append("  note: npu: MOE_EP is its own communicator with TP's members")
    return "\n".join(lines)


def rank_line(topo: Topology, rank: int) -> str:
    row = topo.coords().slice(rank, 1).to_pylist()[0]
    coords = ", ".join(f"{k}={v}" for k, v in row.items())
    groups = [f"{g}={list(m)}" for g in Group.ALL if (m := topo.group_of(rank, g)) and len(m) > 1]
    return f"rank {rank}: {coords}\n  " + "\n  ".join(groups)


def render(topo: Topology) -> str:
    c = topo.config
    head = (f"tp={c.tp} dp={c.dp} enable_dp_attention={c.enable_dp_attention} "
            f"attn_cp={c.attn_cp} ep={c.ep} moe_dp={c.moe_dp} pp={c.pp} npu={c.npu}: "
            f"{c.world_size} ranks")
    parts = [head]
    if c.replicas > 1:
        parts.append(f"native DP: {c.replicas} full replicas of {c.tp * c.pp} ranks, each "
                     f"with its own TP group (TP ranks repeat; dp_rank names the replica)")
    parts += [attention_grid(topo), moe_grid(topo), group_lines(topo)]
    return "\n\n".join(parts) + "\n"
