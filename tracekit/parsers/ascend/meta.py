"""profiler_info_{rank}.json and profiler_metadata.json (TRACE_FORMATS.md B.2, B.3).

* ``profiler_info_{rank}.json`` (``profiler_info.json`` when not distributed) has ``rank_id``
  and the profiler config (``_export_type`` text / db); no parallel groups;
* ``profiler_metadata.json`` (optional) has ``parallel_group_info``: HCCL communicator name ->
  ``{"group_name", "group_rank", "global_ranks"}``, and MindSpeed's ``distributed_args``.
  The db keeps the same JSON in ``META_DATA``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracekit.errors import BadInputError
from tracekit.parsers.ascend.io import load_json
from tracekit.parsers.ascend.ops import CommGroup

_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")


@dataclass
class RankMeta:
    rank: int | None = None
    info_path: Path | None = None
    export_type: str | None = None
    world_size: int | None = None
    groups: list[CommGroup] = field(default_factory=list)


def read_rank_meta(rank_dir: Path) -> RankMeta:
    meta = RankMeta()
    infos = sorted(p for p in rank_dir.iterdir() if _INFO_RE.match(p.name))
    if infos:
        path = infos[0]
        doc = load_json(path, dict, "a JSON object (profiler_info)")
        meta.info_path = path
        rank_id = doc.get("rank_id")
        suffix = _INFO_RE.match(path.name).group(1)  # type: ignore[union-attr]
        if isinstance(rank_id, int) and not isinstance(rank_id, bool) and rank_id >= 1 << 31:
            raise BadInputError(f"rank_id {str(rank_id)[:30]} is out of range (0 to 2**31-1)",
                                path)
        if isinstance(rank_id, int) and not isinstance(rank_id, bool) and rank_id >= 0:
            meta.rank = rank_id
        elif suffix is not None:
            meta.rank = int(suffix)
        config = doc.get("config")
        exp = config.get("experimental_config") if isinstance(config, dict) else None
        if isinstance(exp, dict) and exp.get("_export_type") is not None:
            meta.export_type = str(exp.get("_export_type"))
    md = rank_dir / "profiler_metadata.json"
    if md.is_file():
        doc = load_json(md, dict, "a JSON object (profiler_metadata)")
        meta.groups = parse_group_info(doc.get("parallel_group_info"), md)
        args = doc.get("distributed_args")
        if isinstance(args, dict) and isinstance(args.get("world_size"), int):
            meta.world_size = args["world_size"]
    return meta


def parse_group_info(info: Any, path: Path) -> list[CommGroup]:
    """parallel_group_info -> CommGroup list; a malformed entry is a BadInputError."""
    if info is None:
        return []
    if not isinstance(info, dict):
        raise BadInputError("parallel_group_info is not a JSON object", path)
    groups = []
    for comm, entry in info.items():
        if not isinstance(entry, dict):
            raise BadInputError(f"parallel_group_info[{comm!r}] is not an object", path)
        ranks = entry.get("global_ranks")
        if not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 1 << 31 for r in ranks
        ):
            raise BadInputError(
                f"parallel_group_info[{comm!r}].global_ranks is not a list of integers"
                " (0 to 2**31-1)", path)
        grank = entry.get("group_rank")
        groups.append(CommGroup(
            comm_name=str(comm),
            group_name=str(entry.get("group_name") or ""),
            group_rank=grank if isinstance(grank, int) and not isinstance(grank, bool) else None,
            global_ranks=tuple(ranks),
        ))
    return groups
