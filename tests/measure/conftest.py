"""Builders for hand-made ATTRIBUTED tables and runs (the measure tests' inputs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from tracekit import api, schema


def make_attributed(rows: list[dict[str, Any]]) -> pa.Table:
    """ATTRIBUTED from dicts keyed by schema constants; event ids numbered per rank."""
    counters: dict[int, int] = {}
    filled = []
    for row in rows:
        rank = int(row[schema.RANK])
        r = dict(row)
        r.setdefault(schema.EVENT_ID, counters.get(rank, 0))
        counters[rank] = counters.get(rank, 0) + 1
        filled.append(r)
    columns = {f.name: [r.get(f.name) for r in filled] for f in schema.ATTRIBUTED}
    arrays = []
    for f in schema.ATTRIBUTED:
        typ = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        arrays.append(pa.array(columns[f.name], type=typ))
    table = pa.Table.from_arrays(arrays, names=[f.name for f in schema.ATTRIBUTED])
    return schema.conform(table, schema.ATTRIBUTED)


def make_run(attributed: pa.Table, hosts: dict[int, str] | None = None) -> api.Run:
    ranks = sorted(set(attributed.column(schema.RANK).to_pylist()))
    info = pa.table({
        schema.RANK: pa.array(ranks, pa.int32()),
        schema.HOST: pa.array([(hosts or {}).get(r) for r in ranks], pa.string()),
    })
    return api.Run(
        events=schema.conform(attributed, schema.EVENTS),
        process_groups=schema.empty(schema.PROCESS_GROUPS),
        rank_info=schema.conform(info, schema.RANK_INFO),
    )


@pytest.fixture
def attributed_builder() -> Callable[[list[dict[str, Any]]], pa.Table]:
    return make_attributed


@pytest.fixture
def run_builder() -> Callable[..., api.Run]:
    return make_run
