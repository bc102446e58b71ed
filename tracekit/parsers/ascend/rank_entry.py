"""One parsed Ascend rank (RankData) as parse-cache tables, and back.

The entry (tracekit.parsers.cache) holds the rank's columns (``columns``: EVENTS columns and
the private ``_`` ones, as read), its communication side tables when the export has them
(``comm_ops``, ``comm_bw``, ``comm_matrix``) and one row of JSON (``rank``) with the rest:
rank, paths, device, NPU model, host, the db's raw group names and RankMeta with its
parallel groups. Arrow types, dictionaries included, come back as they were written (Parquet
keeps the Arrow schema), and so do the chunks of every column (kept in the JSON row): the
steps after the read encode dictionaries chunk by chunk, so a rank from the cache gives
the tables of a rank just read, to the dictionary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.parsers.ascend.meta import RankMeta
from tracekit.parsers.ascend.ops import CommGroup
from tracekit.parsers.ascend.rank import RankData

COLUMNS, RANK = "columns", "rank"
_SIDE = ("comm_ops", "comm_bw", "comm_matrix")
_JSON = "json"


def to_entry(data: RankData) -> dict[str, pa.Table]:
    meta = data.meta
    doc = {
        "rank": data.rank, "directory": str(data.directory), "source": str(data.source),
        "device": data.device, "raw_groups": data.raw_groups, "model": data.model,
        "host": data.host,
        "meta": {"rank": meta.rank,
                 "info_path": None if meta.info_path is None else str(meta.info_path),
                 "export_type": meta.export_type, "world_size": meta.world_size,
                 "groups": [asdict(g) for g in meta.groups]},
    }
    out = {COLUMNS: pa.table(data.columns)}
    for part in _SIDE:
        table = getattr(data, part)
        if table is not None:
            out[part] = table
    doc["chunks"] = {part: _chunks(table) for part, table in out.items()}
    doc["arrays"] = [k for k, v in data.columns.items() if isinstance(v, pa.Array)]
    out[RANK] = pa.table({_JSON: [json.dumps(doc)]})
    return out


def _chunks(table: pa.Table) -> dict[str, list[int]]:
    return {name: [len(c) for c in table.column(name).chunks] for name in table.column_names}


def _rechunked(table: pa.Table, chunks: Mapping[str, list[int]]) -> pa.Table:
    """``table`` with each column cut into the chunks it had when it was written."""
    cols = []
    for name in table.column_names:
        whole = table.column(name).combine_chunks()
        starts = [sum(chunks[name][:i]) for i in range(len(chunks[name]))]
        cols.append(pa.chunked_array([whole.slice(s, n) for s, n in zip(
            starts, chunks[name], strict=True)], whole.type))
    return pa.Table.from_arrays(cols, schema=table.schema)


def from_entry(entry: Mapping[str, pa.Table]) -> RankData:
    doc: dict[str, Any] = json.loads(entry[RANK].column(_JSON)[0].as_py())
    m = doc["meta"]
    meta = RankMeta(
        rank=m["rank"], info_path=None if m["info_path"] is None else Path(m["info_path"]),
        export_type=m["export_type"], world_size=m["world_size"],
        groups=[CommGroup(g["comm_name"], g["group_name"], g["group_rank"],
                          tuple(g["global_ranks"])) for g in m["groups"]])
    tables = {part: _rechunked(entry[part], chunks) for part, chunks in doc["chunks"].items()}
    table = tables[COLUMNS]
    arrays = set(doc["arrays"])
    columns: dict[str, Any] = {
        name: table.column(name).combine_chunks() if name in arrays else table.column(name)
        for name in table.column_names}
    return RankData(
        rank=doc["rank"], directory=Path(doc["directory"]), source=Path(doc["source"]),
        columns=columns, meta=meta, device=doc["device"], raw_groups=doc["raw_groups"],
        comm_ops=tables.get("comm_ops"), comm_bw=tables.get("comm_bw"),
        comm_matrix=tables.get("comm_matrix"), model=doc["model"], host=doc["host"])
