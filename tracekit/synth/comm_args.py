"""``record_param_comms`` arguments and the keys Kineto copies onto the kernel, by torch era."""

from __future__ import annotations

import hashlib
import itertools

from tracekit.synth.config import ProcessGroup

DTYPE = "BFloat16"


def ranks_text(ranks: tuple[int, ...] | list[int]) -> str:
    """Kineto's list-as-string (torch ``format_list``): past 30 entries, the first 30 and
    ``...``."""
    items = [str(r) for r in ranks]
    if len(items) > 30:
        items = [*items[:30], "..."]
    return "[" + ", ".join(items) + "]"


def comms_id(pg_name: str, seq: int) -> int:
    """A stable uint64 that is the same on every rank of one collective."""
    digest = hashlib.blake2b(f"{pg_name}/{seq}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _stride(ranks: tuple[int, ...]) -> tuple[int, int] | None:
    if len(ranks) == 1:
        return ranks[0], 1
    step = ranks[1] - ranks[0]
    if step > 0 and all(b - a == step for a, b in itertools.pairwise(ranks)):
        return ranks[0], step
    return None


def param_comms(
    torch: tuple[int, int],
    coll_name: str,
    in_nelems: int,
    out_nelems: int,
    in_split: tuple[int, ...],
    out_split: tuple[int, ...],
    pg: ProcessGroup,
    uid: int,
    rank: int,
    seq: int,
) -> tuple[dict[str, object], dict[str, object]]:
    """(args of the record_param_comms op, keys copied onto its kernel) for ``torch`` (major,
    minor). Before 2.1 the op carries no metadata at all."""
    if torch < (2, 1):
        return {}, {}
    op: dict[str, object] = {"Collective name": coll_name, "dtype": DTYPE}
    if torch < (2, 2):
        op["In msg size"] = in_nelems
        op["Out msg size"] = out_nelems
    else:
        op["In msg nelems"] = in_nelems
        op["Out msg nelems"] = out_nelems
        st = _stride(pg.ranks)
        if st is not None:
            op["Global rank start"] = st[0]
            op["Global rank stride"] = st[1]
    op["Group size"] = len(pg.ranks)
    op["In split size"] = ranks_text(in_split) if in_split else "[]"
    op["Out split size"] = ranks_text(out_split) if out_split else "[]"
    if torch >= (2, 4):
        op["Process Group Name"] = pg.pg_name
        op["Process Group Description"] = pg.desc
    elif torch >= (2, 3):
        op["Process Group ID"] = uid
    if torch >= (2, 3):
        op["Process Group Ranks"] = ranks_text(pg.ranks)
    if torch >= (2, 4):
        op["Rank"] = pg.ranks.index(rank)
    if torch >= (2, 7):
        op["Is asynchronized op"] = "0"
    if torch >= (2, 12):
        op["Seq"] = seq
        op["Comms Id"] = comms_id(pg.pg_name, seq)
    copied = {k: v for k, v in op.items() if k not in
              ("Global rank start", "Global rank stride", "Rank", "Is asynchronized op")}
    return op, copied


def distributed_info(torch: tuple[int, int], nccl: str, rank: int, world: int,
                     groups: list[ProcessGroup], pg_count: int) -> dict[str, object]:
    """The ``distributedInfo`` block of the era."""
    info: dict[str, object] = {"backend": "nccl", "rank": rank, "world_size": world}
    if torch < (2, 3):
        return info
    info["pg_count"] = pg_count
    config = []
    for g in groups:
        entry: dict[str, object] = {"pg_name": g.pg_name}
        if torch >= (2, 4):
            entry["pg_desc"] = g.desc
        else:
            entry["uid"] = int(g.pg_name)
        entry.update({"backend_config": g.backend, "pg_size": len(g.ranks),
                      "ranks": list(g.ranks)})
        config.append(entry)
    info["pg_config"] = config
    info["nccl_version"] = nccl + ".5" if nccl.count(".") == 1 else nccl
    return info
