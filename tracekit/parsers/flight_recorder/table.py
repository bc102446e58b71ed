"""Flight Recorder dumps -> the FR table (tracekit.schema.FR), one row per entry.

The rank of a dump comes from its file name (torch names them ``<prefix><rank>``, e.g.
``nccl_trace_rank_3``; ``tracekit capture`` writes ``rank3.fr_trace.pkl``). Group members come
from the dump's ``pg_config`` (NCCL fills it) or, where that is empty (gloo in torch 2.13
records ``{'': {'ranks': '[]'}}``), from the ``rank{r}.fr_groups.json`` file that
``tracekit capture`` writes beside the dump.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.kineto.call_sites import DEPTH, frame_label
from tracekit.parsers.kineto.comm import COLLECTIVE_OPS
from tracekit.schema import Op

# profiling_name spellings that only the Flight Recorder uses (torch fr_trace types.py
# COLLECTIVES / P2P), on top of the record_param_comms vocabulary
_FR_OPS: dict[str, str] = {
    "all_gather_single": Op.ALL_GATHER, "all_gather_v": Op.ALL_GATHERV,
    "reduce_scatter_single": Op.REDUCE_SCATTER, "reduce_scatter_v": Op.REDUCE_SCATTERV,
    "all_to_all_v_single": Op.ALL_TO_ALLV, "all_reduce_barrier": Op.BARRIER,
    "ALLGATHER_coalesced": Op.ALL_GATHER, "REDUCE_SCATTER_coalesced": Op.REDUCE_SCATTER,
}
_RANK_IN_NAME = re.compile(r"rank[_.\-]?(\d+)", re.IGNORECASE)
_TRAILING = re.compile(r"(\d+)$")
GROUPS_SUFFIX = ".fr_groups.json"
MEMBERS_PG_CONFIG = "pg_config"
MEMBERS_GROUPS_FILE = "groups_file"


def rank_of(path: Path) -> int:
    """Global rank from a dump's file name: the last ``rank<N>``, else trailing digits."""
    found = _RANK_IN_NAME.findall(path.name)
    if found:
        return int(found[-1])
    stem = path.name.split(".", 1)[0]
    m = _TRAILING.search(stem)
    if m is None:
        raise BadInputError("cannot tell the rank from the file name (expected rank<N> or a "
                            "trailing number, as torch's <prefix><rank>)", path)
    return int(m.group(1))


def op_of(profiling_name: str) -> str:
    """schema.Op of a profiling_name such as ``gloo:all_reduce`` or ``nccl:send 0->1``."""
    base = profiling_name.split(":", 1)[-1].split(" ", 1)[0]
    return _FR_OPS.get(base) or COLLECTIVE_OPS.get(base, Op.OTHER)


def call_site(frames: Any) -> str | None:
    """``func (file:line) <- ...``: the first DEPTH user frames, innermost first."""
    if not isinstance(frames, list):
        return None
    labels: list[str] = []
    for f in frames:
        if not isinstance(f, dict):
            continue
        label = frame_label(f"{f.get('filename', '')}({f.get('line', 0)}): {f.get('name', '')}")
        if label is not None:
            labels.append(label)
            if len(labels) == DEPTH:
                break
    return " <- ".join(labels) if labels else None


def _ranks_value(value: Any) -> list[int] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, list) and value and all(isinstance(r, int) for r in value):
        return sorted(value)
    return None


def members_from_pg_config(pg_config: dict[str, Any]) -> dict[tuple[str, str], list[int]]:
    """(pg name, desc) -> global ranks from a dump's pg_config (entries without ranks skipped)."""
    out: dict[tuple[str, str], list[int]] = {}
    for key, cfg in pg_config.items():
        if not isinstance(cfg, dict):
            continue
        ranks = _ranks_value(cfg.get("ranks"))
        name = str(cfg.get("name") or key)
        if ranks and name:
            out[(name, str(cfg.get("desc", "")))] = ranks
    return out


def read_groups_file(path: Path) -> dict[tuple[str, str], list[int]]:
    """(pg name, desc) -> global ranks from a ``rank{r}.fr_groups.json`` written by capture."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        groups = doc["groups"]
        return {(str(g["pg_name"]), str(g["pg_desc"])): sorted(int(r) for r in g["ranks"])
                for g in groups}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInputError(f"not a readable Flight Recorder groups file ({exc})", path) from exc


def _nelems(sizes: list[list[int]]) -> int:
    return int(sum(math.prod(s) for s in sizes))


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value else None


def fr_table(rank: int, source: Path, dump: dict[str, Any],
             groups: dict[tuple[str, str], list[int]] | None = None) -> pa.Table:
    """The FR rows of one checked dump (see ``read.read_dump``)."""
    from_config = members_from_pg_config(dump["pg_config"])
    entries = dump["entries"]
    cols: dict[str, list[Any]] = {name: [] for name in S.names(S.FR)}
    for e in entries:
        name, desc = str(e["process_group"][0]), str(e["process_group"][1])
        op = op_of(e["profiling_name"])
        is_p2p = e.get("is_p2p")
        if not isinstance(is_p2p, bool):
            is_p2p = op in (Op.SEND, Op.RECV)
        ranks = from_config.get((name, desc))
        origin = MEMBERS_PG_CONFIG if ranks else None
        if not ranks and groups:
            ranks = groups.get((name, desc))
            origin = MEMBERS_GROUPS_FILE if ranks else None
        dur_ms = e.get("duration_ms")
        row = {
            S.RANK: rank, S.SOURCE: str(source), S.RECORD_ID: e.get("record_id"),
            S.PG_NAME: name, S.PG_DESC: desc, S.PG_RANKS: ranks, S.MEMBERS_SOURCE: origin,
            S.SEQ: e.get("p2p_seq_id") if is_p2p else e["collective_seq_id"],
            S.IS_P2P: is_p2p, S.OP: op, S.COLL_NAME: e["profiling_name"],
            S.IN_SIZES: e["input_sizes"], S.OUT_SIZES: e["output_sizes"],
            S.IN_DTYPES: e.get("input_dtypes"), S.OUT_DTYPES: e.get("output_dtypes"),
            S.IN_NELEMS: _nelems(e["input_sizes"]), S.OUT_NELEMS: _nelems(e["output_sizes"]),
            S.FR_STATE: e["state"], S.RETIRED: e.get("retired"),
            S.TS_NS: e["time_created_ns"],
            S.STARTED_NS: _int_or_none(e.get("time_discovered_started_ns")),
            S.COMPLETED_NS: _int_or_none(e.get("time_discovered_completed_ns")),
            S.DUR_NS: round(dur_ms * 1e6) if isinstance(dur_ms, (int, float)) else None,
            S.TIMEOUT_NS: e["timeout_ms"] * 1_000_000 if isinstance(e.get("timeout_ms"), int)
            else None,
            S.THREAD: e.get("thread_name"), S.CALL_SITE: call_site(e.get("frames")),
            S.FR_VERSION: dump["version"],
        }
        for key, value in row.items():
            cols[key].append(value)
    try:
        arrays = [pa.array(cols[f.name], f.type.value_type if pa.types.is_dictionary(f.type)
                           else f.type).dictionary_encode() if pa.types.is_dictionary(f.type)
                  else pa.array(cols[f.name], f.type) for f in S.FR]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise BadInputError(f"an entry has a value of the wrong type ({exc})", source) from exc
    return pa.Table.from_arrays(arrays, schema=S.FR)


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    tables = list(tables)
    if not tables:
        return S.empty(S.FR)
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()
