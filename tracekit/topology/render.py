"""Text pictures of a topology: the coordinate grids as seed 002 draws them (SGLang), the
rank grids of the vLLM and Megatron layouts, and member lists.

Pure functions from a Topology to a string; the CLI prints them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from tracekit.schema import Group
from tracekit.topology import Topology

MAX_ROWS = 64  # rows drawn per grid; the rest are counted


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
            lines.append(f"  {g:<8} = {alias} ({topo.alias_note(g)})")
            continue
        if not members:
            continue
        shown = ", ".join(str(list(m)) for m in members[:8])
        more = f", ... ({len(members)} groups)" if len(members) > 8 else ""
        lines.append(f"  {g:<8} {shown}{more}")
    c = topo.config
    if c.layout == "sglang" and c.npu and c.ep == c.tp:
        lines.append("  note: npu: MOE_EP is its own communicator with TP's members")
    return "\n".join(lines)


def rank_line(topo: Topology, rank: int) -> str:
    row = topo.coords().slice(rank, 1).to_pylist()[0]
    coords = ", ".join(f"{k}={v}" for k, v in row.items())
    groups = [f"{g}={list(m)}" for g in Group.ALL if (m := topo.group_of(rank, g)) and len(m) > 1]
    return f"rank {rank}: {coords}\n  " + "\n  ".join(groups)


def _grid(head: str, axes: list[tuple[str, int]], cols: tuple[str, int],
          cell: Callable[[dict[str, int]], str]) -> str:
    """Rows: every combination of ``axes`` (slowest first); columns: the fastest axis."""
    shown = [(name, size) for name, size in axes if size > 1] or axes[:1]
    rows = []
    combos = list(itertools.product(*[range(size) for _, size in shown]))
    for combo in combos[:MAX_ROWS]:
        at = dict(zip([n for n, _ in shown], combo, strict=True))
        label = ", ".join(f"{n} = {v}" for n, v in at.items())
        rows.append((label, [cell({**at, cols[0]: j}) for j in range(cols[1])]))
    lines = [head, "", *_box(cols[0], [str(j) for j in range(cols[1])], rows)]
    if len(combos) > MAX_ROWS:
        lines.append(f"  ... {len(combos) - MAX_ROWS} more rows")
    return "\n".join(lines)


def vllm_grid(topo: Topology) -> str:
    c = topo.config
    tp, pcp, pp = c.tp, c.attn_cp, c.pp
    ep_on = c.enable_expert_parallel

    def cell(at: dict[str, int]) -> str:
        d, p, k, t = (at.get(n, 0) for n in ("dp_rank", "pp_rank", "pcp_rank", "tp_rank"))
        rank = ((d * pp + p) * pcp + k) * tp + t
        flat = (d * pcp + k) * tp + t
        return f"{rank} {'e' if ep_on else 'm'}{flat}"

    moe = (f"ep_rank = (dp_rank * pcp + pcp_rank) * tp + tp_rank (ep={c.ep})" if ep_on else
           f"no expert parallel: experts tensor-sharded over the same ranks, moe_tp={c.etp}")
    head = (f"Ranks (vllm parallel_state: dp x pp x pcp x tp, tp fastest): rank = ((dp_rank *"
            f" pp + pp_rank) * pcp + pcp_rank) * tp + tp_rank\nMoE spans DP x PCP x TP of each"
            f" PP stage (FusedMoEParallelConfig): {moe}; a cell is 'rank "
            f"{'e<ep_rank>' if ep_on else 'm<moe_tp_rank>'}'")
    return _grid(head, [("dp_rank", c.dp), ("pp_rank", pp), ("pcp_rank", pcp)],
                 ("tp_rank", tp), cell)


def megatron_grids(topo: Topology) -> str:
    c = topo.config
    tp, cp, dp, pp = c.tp, c.attn_cp, c.dp, c.pp
    etp, ep, edp = c.etp, c.ep, c.moe_dp

    def dense(at: dict[str, int]) -> str:
        t, k, d, p = (at.get(n, 0) for n in ("tp_rank", "cp_rank", "dp_rank", "pp_rank"))
        return str(t + tp * (k + cp * (d + dp * p)))

    def expert(at: dict[str, int]) -> str:
        t, e, d, p = (at.get(n, 0) for n in ("etp_rank", "ep_rank", "edp_rank", "pp_rank"))
        return str(t + etp * (e + ep * (d + edp * p)))

    head_d = (f"Dense (Megatron order tp-cp-ep-dp-pp, tp fastest): tp={tp} cp={cp} dp={dp} "
              f"pp={pp}; rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))")
    head_e = (f"Experts (same order, expert grid): etp={etp} ep={ep} expert_dp={edp} pp={pp};"
              f" rank = etp_rank + etp * (ep_rank + ep * (edp_rank + expert_dp * pp_rank))")
    return "\n\n".join([
        _grid(head_d, [("pp_rank", pp), ("dp_rank", dp), ("cp_rank", cp)], ("tp_rank", tp),
              dense),
        _grid(head_e, [("pp_rank", pp), ("edp_rank", edp), ("ep_rank", ep)],
              ("etp_rank", etp), expert),
    ])


def render(topo: Topology) -> str:
    c = topo.config
    if c.layout == "vllm":
        head = (f"layout=vllm tp={c.tp} dp={c.dp} pcp={c.attn_cp} pp={c.pp} ep={c.ep} "
                f"enable_expert_parallel={c.enable_expert_parallel}: {c.world_size} ranks")
        parts = [head, vllm_grid(topo), group_lines(topo)]
        return "\n\n".join(parts) + "\n"
    if c.layout == "megatron":
        head = (f"layout=megatron tp={c.tp} cp={c.attn_cp} dp={c.dp} pp={c.pp} ep={c.ep} "
                f"etp={c.etp} expert_dp={c.moe_dp}: {c.world_size} ranks")
        parts = [head, megatron_grids(topo), group_lines(topo)]
        return "\n\n".join(parts) + "\n"
    head = (f"tp={c.tp} dp={c.dp} enable_dp_attention={c.enable_dp_attention} "
            f"attn_cp={c.attn_cp} ep={c.ep} moe_dp={c.moe_dp} pp={c.pp} npu={c.npu}: "
            f"{c.world_size} ranks (layout=sglang)")
    parts = [head]
    if c.replicas > 1:
        parts.append(f"native DP: {c.replicas} full replicas of {c.tp * c.pp} ranks, each "
                     f"with its own TP group (TP ranks repeat; dp_rank names the replica)")
    parts += [attention_grid(topo), moe_grid(topo), group_lines(topo)]
    return "\n\n".join(parts) + "\n"
