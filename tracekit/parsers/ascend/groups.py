"""Who is in each HCCL communicator: every piece of evidence an Ascend export has, joined.

A communicator is known by its hash (``double_hash(comm name)``, TRACE_FORMATS.md B.4) or,
when no file gives the full hash, only by the 3 digits the op names carry. Evidence, most
exact first:

* ``parallel_group_info`` (profiler_metadata.json or the db's META_DATA, B.3): the comm name,
  group_name and the global ranks;
* msprof-analyze ``cluster_analysis_output/`` beside the rank directories (B.4):
  ``communication_group.json`` ``comm_group_parallel_info`` (group hash -> rank_set, 2025 form)
  and ``cluster_communication.json``, whose top-level keys are the rank sets
  ``"(0, 1, ..., 7)"`` holding ``"<op>@<hash>"`` entries;
* ``communication_matrix.json`` / analysis.db CommAnalyzerMatrix (B.6): links ``src-dst``
  between *group-local* ranks. It gives the size only, and only where it proves it: a rank
  that linked directly to every local rank 0..N-1 of the group (a mesh) shows all N members,
  while a group that crosses servers (an RDMA link) may hide members behind hierarchical
  algorithms, and a ring shows neighbours only; those stay unknown. The src of a rank's own
  links is its group-local rank.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S

if TYPE_CHECKING:
    from tracekit.parsers.ascend.ops import CommGroup

CLUSTER_DIR = "cluster_analysis_output"
CLUSTER_COMMUNICATION = "cluster_communication.json"
COMMUNICATION_GROUP = "communication_group.json"
TAIL_PREFIX = "*"  # pg_name of a communicator known only by the 3 hash digits of its op names
_RANK_SET_RE = re.compile(r"^\(\s*\d+(?:\s*,\s*\d+)*\s*,?\s*\)$")
LOCAL = "LOCAL"
CROSS_SERVER = ("RDMA", "ROCE")


@dataclass(frozen=True)
class Members:
    """What is known of one communicator's membership."""

    size: int | None
    ranks: tuple[int, ...] | None  # global ranks, when a file lists them
    source: str  # parallel_group_info, cluster_analysis_output or communication_matrix


def tail_identity(hash3: str) -> str:
    """The pg_name of a communicator known only by its hash tail (``*868``)."""
    return TAIL_PREFIX + hash3


def from_groups(groups: list[CommGroup]) -> dict[str, Members]:
    return {g.hash: Members(len(g.global_ranks), tuple(g.global_ranks), "parallel_group_info")
            for g in groups}


def _load(path: Path) -> object:
    """A small msprof-analyze JSON file, or None when unreadable (it is optional evidence:
    a bad one must not stop the ranks from loading; the ranks' own files still do)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def from_cluster(dirs: list[Path]) -> dict[str, Members]:
    """Group hash -> members from cluster_analysis_output/ in any of ``dirs``."""
    out: dict[str, Members] = {}
    for d in dirs:
        base = d / CLUSTER_DIR
        if not base.is_dir():
            continue
        doc = _load(base / COMMUNICATION_GROUP)
        infos = doc.get("comm_group_parallel_info") if isinstance(doc, dict) else None
        for info in infos if isinstance(infos, list) else []:
            ranks = info.get("rank_set") if isinstance(info, dict) else None
            group = info.get("group_name") if isinstance(info, dict) else None
            if isinstance(group, str) and _int_list(ranks):
                out.setdefault(group, Members(len(ranks), tuple(sorted(ranks)),
                                              CLUSTER_DIR))
        doc = _load(base / CLUSTER_COMMUNICATION)
        for key, steps in (doc.items() if isinstance(doc, dict) else []):
            if not _RANK_SET_RE.match(str(key)) or not isinstance(steps, dict):
                continue
            ranks = sorted(int(x) for x in re.findall(r"\d+", key))
            for ops in steps.values():
                for op_key in (ops if isinstance(ops, dict) else {}):
                    _, _, group = str(op_key).partition("@")
                    if group:
                        out.setdefault(group, Members(len(ranks), tuple(ranks), CLUSTER_DIR))
    return out


def _int_list(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and bool(value) and all(
        isinstance(r, int) and not isinstance(r, bool) for r in value)


def from_matrix(matrix: pa.Table) -> dict[str, Members]:
    """Group hash -> size proven by the links (see the module doc), over every rank's matrix."""
    if matrix.num_rows == 0:
        return {}
    df = matrix.select([S.RANK, S.GROUP_HASH, S.SRC_RANK, S.DST_RANK, S.TRANSPORT]).to_pandas()
    df = df.dropna(subset=[S.GROUP_HASH, S.SRC_RANK, S.DST_RANK])
    df[S.TRANSPORT] = df[S.TRANSPORT].astype(str).str.upper()
    out: dict[str, Members] = {}
    for group, links in df.groupby(S.GROUP_HASH, sort=False):
        if links[S.TRANSPORT].isin(CROSS_SERVER).any():
            continue
        if (links[S.TRANSPORT] == LOCAL).all():
            continue  # only self links: nothing about the others
        size = int(max(links[S.SRC_RANK].max(), links[S.DST_RANK].max())) + 1
        for _, own in links.groupby(S.RANK, sort=False):
            peers = set(own[S.SRC_RANK].astype(int)) | set(own[S.DST_RANK].astype(int))
            if peers == set(range(size)):
                out[str(group)] = Members(size, None, "communication_matrix")
                break
    return out


def local_ranks(matrix: pa.Table) -> dict[tuple[int, str], int]:
    """(rank, group hash) -> the rank's group-local index: the one src of its own links."""
    if matrix.num_rows == 0:
        return {}
    t = matrix.select([S.RANK, S.GROUP_HASH, S.SRC_RANK]).drop_null()
    t = t.set_column(1, S.GROUP_HASH, pc.cast(t[S.GROUP_HASH], pa.string()))
    g = t.group_by([S.RANK, S.GROUP_HASH]).aggregate([(S.SRC_RANK, "min"), (S.SRC_RANK, "max")])
    one = g.filter(pc.equal(g[f"{S.SRC_RANK}_min"], g[f"{S.SRC_RANK}_max"])).to_pydict()
    return {(int(r), str(h)): int(s) for r, h, s in zip(
        one[S.RANK], one[S.GROUP_HASH], one[f"{S.SRC_RANK}_min"], strict=True)}


def merge(*sources: dict[str, Members]) -> dict[str, Members]:
    """First source wins per group (pass the most exact first)."""
    out: dict[str, Members] = {}
    for src in sources:
        for k, v in src.items():
            out.setdefault(k, v)
    return out
