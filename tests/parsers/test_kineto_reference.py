"""Conformance of the Kineto parser on the real HTA reference traces.

Every expected figure is computed here from the raw JSON with the stdlib ``json`` module
(floats read as ``Decimal``), independently of the parser.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import RankTables, load_kineto_file

FILES = [
    "nccl_parser_config/nccl_data.json.gz",
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "trace_filter/sampled_rank-0.json.gz",
    "trace_filter/sampled_rank-1.json.gz",
    "negative_queue_length_values_check/rank0.json.gz",
    "df_index_resolver/df_index_resolver.json.gz",
]
# c10 ScalarType sizes, written out here independently of the parser's table
SIZES = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Int": 4, "Byte": 1, "Char": 1,
         "Double": 8, "Bool": 1}
KERNEL_OPS = {"AllReduce": "all_reduce", "Broadcast": "broadcast", "SendRecv": "send_recv",
              "AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "Reduce": "reduce"}

_cache: dict[str, tuple[dict[str, Any], RankTables]] = {}


def load(kineto_hta: Path, rel: str) -> tuple[dict[str, Any], RankTables]:
    """(raw JSON document, parsed tables) of one reference trace, read once per session."""
    if rel not in _cache:
        path = kineto_hta / rel
        if not path.is_file():
            pytest.skip(f"{path} is absent")
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh, parse_float=Decimal)
        _cache[rel] = (doc, load_kineto_file(path))
    return _cache[rel]


def timed(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]


def exact_ns(v: Any) -> int:
    return int((Decimal(v) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


@pytest.mark.parametrize("rel", FILES)
def test_reference_trace_parses_into_valid_events(kineto_hta: Path, rel: str) -> None:
    # GIVEN a real trace WHEN it is parsed
    doc, tables = load(kineto_hta, rel)
    # THEN EVENTS validates, has one row per X / i event, and event_id is the array index
    S.validate(tables.events, S.EVENTS)
    expected_ids = [i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") in ("X", "i")]
    assert tables.events.column(S.EVENT_ID).to_pylist() == expected_ids
    assert tables.rank == doc["distributedInfo"]["rank"]
    assert tables.rank_info.column(S.WORLD_SIZE)[0].as_py() == doc["distributedInfo"]["world_size"]


@pytest.mark.parametrize("rel", FILES)
def test_category_counts_match_the_raw_json(kineto_hta: Path, rel: str) -> None:
    # GIVEN the raw events WHEN counted per category THEN EVENTS has the same counts
    doc, tables = load(kineto_hta, rel)
    expected = Counter(e.get("cat") for e in timed(doc))
    got = Counter(tables.events.column(S.CATEGORY).cast("string").to_pylist())
    assert got == expected


@pytest.mark.parametrize("rel", FILES)
def test_timestamps_equal_the_source_to_the_nanosecond(kineto_hta: Path, rel: str) -> None:
    # GIVEN ts / dur read as Decimal microseconds from the text
    doc, tables = load(kineto_hta, rel)
    events = timed(doc)
    # THEN every ts_ns / dur_ns is exactly 1000 x that decimal
    assert tables.events.column(S.TS_NS).to_pylist() == [exact_ns(e["ts"]) for e in events]
    assert tables.events.column(S.DUR_NS).to_pylist() == [
        exact_ns(e.get("dur", 0)) for e in events]


@pytest.mark.parametrize("rel", FILES)
def test_nccl_kernel_counts_per_op(kineto_hta: Path, rel: str) -> None:
    # GIVEN the NCCL kernels of the raw trace, their op read from the name by this test
    doc, tables = load(kineto_hta, rel)
    expected: Counter[str] = Counter()
    for e in timed(doc):
        m = re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)_", e["name"])
        if e.get("cat") == "kernel" and m:
            expected[KERNEL_OPS[m.group(1)]] += 1
    # WHEN the parsed kernels are grouped by op THEN the counts agree
    ev = tables.events
    kernels = ev.filter(pc.and_(pc.equal(ev.column(S.KIND).cast("string"), "kernel"),
                                pc.is_valid(ev.column(S.OP))))
    assert Counter(kernels.column(S.OP).cast("string").to_pylist()) == expected


@pytest.mark.parametrize("rel", FILES)
def test_kernel_dtype_and_bytes_come_from_the_args(kineto_hta: Path, rel: str) -> None:
    # GIVEN kernels whose args carry collective metadata (kineto copied it from
    # record_param_comms): bytes = In msg nelems x dtype size
    doc, tables = load(kineto_hta, rel)
    expected = [
        (i, e["args"]["dtype"], e["args"]["In msg nelems"] * SIZES[e["args"]["dtype"]])
        for i, e in enumerate(doc["traceEvents"])
        if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})
    ]
    ev = tables.events
    rows = ev.filter(pc.and_(pc.equal(ev.column(S.KIND).cast("string"), "kernel"),
                             pc.is_valid(ev.column(S.DTYPE))))
    got = list(zip(rows.column(S.EVENT_ID).to_pylist(),
                   rows.column(S.DTYPE).cast("string").to_pylist(),
                   rows.column(S.IN_BYTES).to_pylist(), strict=True))
    assert got == expected


def test_2024_trace_has_op_and_group_columns(kineto_hta: Path) -> None:
    # GIVEN the May-2024 trace (Process Group Name / Description / Ranks on rpc and kernels)
    _, tables = load(kineto_hta, FILES[0])
    ev = tables.events
    kernels = ev.filter(pc.and_(pc.equal(ev.column(S.KIND).cast("string"), "kernel"),
                                pc.is_valid(ev.column(S.OP))))
    # THEN every NCCL kernel carries its op, group name, description, ranks and size
    assert kernels.num_rows == 21
    assert set(kernels.column(S.PG_NAME).cast("string").to_pylist()) == {"0"}
    assert set(kernels.column(S.PG_DESC).cast("string").to_pylist()) == {"default_pg"}
    assert {tuple(r) for r in kernels.column(S.PG_RANKS).to_pylist()} == {(0, 1)}
    assert set(kernels.column(S.GROUP_SIZE).to_pylist()) == {2}
    assert set(kernels.column(S.META_SOURCE).cast("string").to_pylist()) == {"args"}
    # AND device rows are named after their stream, host rows after their thread
    assert set(kernels.column(S.THREAD).cast("string").to_pylist()) == {"stream 40"}
    assert set(kernels.column(S.STREAM).to_pylist()) == {40}
    rpc = ev.filter(pc.equal(ev.column(S.KIND).cast("string"), "comm_op"))
    assert all("(pt_main_thread)" in t for t in rpc.column(S.THREAD).cast("string").to_pylist())
    groups = tables.process_groups.to_pylist()
    assert [(g[S.PG_NAME], g[S.PG_DESC], g[S.PG_RANKS]) for g in groups] == [
        ("0", "default_pg", [0, 1])]
    assert tables.rank_info.column(S.BASE_TIME_NS)[0].as_py() == 1711964646000000000


def test_process_group_id_era_maps_the_id_through_pg_config_uid(kineto_hta: Path) -> None:
    # GIVEN the Apr-2024 trace: rpc args have "Process Group ID": 0, pg_config has uid 0
    doc, tables = load(kineto_hta, FILES[1])
    ev = tables.events
    rpc = ev.filter(pc.equal(ev.column(S.KIND).cast("string"), "comm_op"))
    with_op = rpc.filter(pc.is_valid(rpc.column(S.OP)))
    raw = [e for e in timed(doc) if e["name"] == "record_param_comms"
           and e["args"].get("Collective name") not in (None, "wait")]
    # THEN each such rpc has its op, the group name of that uid, and the ranks
    assert with_op.num_rows == len(raw) > 0
    assert set(with_op.column(S.PG_NAME).cast("string").to_pylist()) == {"0"}
    assert {tuple(r) for r in with_op.column(S.PG_RANKS).to_pylist()} == {(0,)}
    assert set(with_op.column(S.OP).cast("string").to_pylist()) == {"all_reduce", "broadcast"}
    assert tables.process_groups.column(S.PG_NAME).to_pylist() == ["0"]


def test_2023_trace_names_send_recv_kernels_without_args(kineto_hta: Path) -> None:
    # GIVEN a 2023 trace with SendRecv kernels and no collective metadata
    _, tables = load(kineto_hta, FILES[2])
    ev = tables.events
    kernels = ev.filter(pc.and_(pc.equal(ev.column(S.KIND).cast("string"), "kernel"),
                                pc.is_valid(ev.column(S.OP))))
    # THEN their op comes from the name alone, and the meta source says so
    assert set(kernels.column(S.OP).cast("string").to_pylist()) == {"send_recv"}
    assert set(kernels.column(S.META_SOURCE).cast("string").to_pylist()) == {"name"}
    assert tables.process_groups.num_rows == 0


def test_2022_bare_record_param_comms_take_the_op_of_their_nccl_title(kineto_hta: Path) -> None:
    # GIVEN the 2022 trace: record_param_comms without args; an all-reduce one encloses a
    # nccl:all_reduce title, the wait that follows encloses none
    doc, tables = load(kineto_hta, FILES[5])
    titles = sum(1 for e in timed(doc) if e["name"] == "nccl:all_reduce")
    rpcs = sum(1 for e in timed(doc) if e["name"] == "record_param_comms")
    ev = tables.events
    rpc = ev.filter(pc.equal(ev.column(S.KIND).cast("string"), "comm_op"))
    # THEN as many of them as there are titles carry all_reduce (from the name), the rest none
    ops = Counter(rpc.column(S.OP).cast("string").to_pylist())
    assert ops == {"all_reduce": titles, None: rpcs - titles}
    assert set(rpc.filter(pc.is_valid(rpc.column(S.OP))).column(S.META_SOURCE)
               .cast("string").to_pylist()) == {"name"}


def test_c10d_ops_take_the_sizes_of_the_record_param_comms_inside(kineto_hta: Path) -> None:
    # GIVEN c10d::allreduce_ (tensor-list input: no dtype of its own) enclosing a
    # record_param_comms with args WHEN parsed THEN the c10d op carries the rpc's bytes
    _, tables = load(kineto_hta, FILES[0])
    ev = tables.events.to_pylist()
    c10d = [e for e in ev if e[S.NAME] == "c10d::allreduce_"]
    rpc = [e for e in ev if e[S.KIND] == "comm_op" and e[S.OP] == "all_reduce"]
    assert len(c10d) == len(rpc) == 15
    assert [e[S.IN_BYTES] for e in c10d] == [e[S.IN_BYTES] for e in rpc]
    assert {e[S.META_SOURCE] for e in c10d} == {"linked"}
