"""The shortcuts that cut the fixed cost of a small rank file give what the general code
gives: conform, the Python path of dictionary masks, the msgspec path of the header."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import nest as kineto_nest
from tracekit.parsers.kineto.comm import parse_int_list
from tracekit.parsers.kineto.dict_codes import conform
from tracekit.parsers.kineto.parse import _meta
from tracekit.parsers.kineto.sparse_columns import spread_fast, spread_small


def test_conform_equals_the_schema_conform() -> None:
    # GIVEN a table with a column to cast, a column EVENTS lacks and columns it lacks
    table = pa.table({
        "unrelated": pa.array(["x", "y"]),
        S.EVENT_ID: pa.array([3, 4], pa.int32()),  # EVENTS says int64
        S.NAME: pa.array(["a", None]),  # EVENTS says dictionary
    })
    # WHEN conformed both ways
    got = conform(table, S.EVENTS)
    want = S.conform(table, S.EVENTS)
    # THEN the tables are the same, schema metadata included
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.equals(want)


@pytest.mark.parametrize("values", [("b",), ("a", "zz"), ("nothing",)])
def test_dict_mask_small_and_large_paths_agree(values: tuple[str, ...],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a dictionary column with nulls and an unused dictionary entry
    col = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2, 0], pa.int32()),
                                         pa.array(["a", "b", "c", "zz"]))
    # WHEN masked by the Python path (small dictionary) and by the compute path
    small = kineto_nest.dict_mask(col, values)
    monkeypatch.setattr(kineto_nest, "_SMALL_DICT", -1)
    large = kineto_nest.dict_mask(col, values)
    # THEN both give the same rows, nulls never matching
    assert small.tolist() == large.tolist()
    assert small.tolist() == [v in values if v is not None else False
                              for v in col.to_pylist()]


def test_prefix_mask_small_and_large_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN names with and without the wrapper prefixes, and a null
    col = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 2, None, 3], pa.int32()),
        pa.array(["c10d::allreduce_", "aten::mm", "_c10d_functional::all_gather", "nccl:x"]))
    prefixes = kineto_nest.WRAPPER_PREFIXES
    # WHEN masked by both paths
    small = list(map(bool, kineto_nest._prefix_mask(col, prefixes)))
    monkeypatch.setattr(kineto_nest, "_SMALL_DICT", -1)
    large = list(map(bool, kineto_nest._prefix_mask(col, prefixes)))
    # THEN they agree: the two wrapper rows only
    assert small == large == [True, False, True, False, False]


def _head(*infos: str, extra: str = "") -> bytes:
    return ('{"schemaVersion": 1, ' + "".join(f'"distributedInfo": {i}, ' for i in infos)
            + extra + '"traceEvents": []}').encode()


def test_meta_equals_json_for_a_plain_header() -> None:
    # GIVEN a header with one distributedInfo holding rank lists and big numbers
    doc = _head('{"rank": 3, "pg_config": [{"pg_name": "0", "ranks": [0, 1, 2, 3]}]}',
                extra='"baseTimeNanoseconds": 1712195495520871000, "f": 0.125, ')
    # WHEN read
    # THEN it is what json reads
    assert _meta(doc) == json.loads(doc)


def test_meta_keeps_a_second_distributed_info_apart() -> None:
    # GIVEN a header with two distributedInfo blocks (kineto appends one)
    doc = _head('{"rank": 1}', '{"pg_config": []}')
    # WHEN read
    meta = _meta(doc)
    # THEN the first is the key and the second is kept apart
    assert meta["distributedInfo"] == {"rank": 1}
    assert meta["_distributedInfo_more"] == [{"pg_config": []}]


def test_meta_reads_what_only_json_reads() -> None:
    # GIVEN a header with a NaN and an out-of-range float (json reads both, msgspec neither)
    doc = _head('{"rank": 0}', extra='"x": NaN, "y": 1e400, ')
    # WHEN read
    meta = _meta(doc)
    # THEN json's values come back
    assert meta["y"] == float("inf")
    assert meta["x"] != meta["x"]


@pytest.mark.parametrize(("value", "expected"), [
    ([0, 1, True], [0, 1, 1]),  # bools are ints, as before
    ([0, "1"], None),
    ([1.0, 2], None),  # a float is no rank
    ([1 << 70, 2], None),  # beyond int64: no column could hold it
    ("[4, 5, 6]", [4, 5, 6]),
    ("[4, 99999999999999999999]", None),
    (list(range(1024)), list(range(1024))),
])
def test_parse_int_list_of_long_and_mixed_lists(value: object,
                                                expected: list[int] | None) -> None:
    # GIVEN a pg_config rank list (a list or its text)  WHEN parsed  THEN ints or None
    assert parse_int_list(value) == expected


def test_parse_int_list_checks_the_columns_width() -> None:
    # GIVEN rank lists for an int32 column  WHEN parsed with bits=32
    # THEN a value beyond int32 makes the list None, the bounds themselves are kept
    assert parse_int_list([0, 1 << 31], bits=32) is None
    assert parse_int_list([-(1 << 31), (1 << 31) - 1], bits=32) == [-(1 << 31), (1 << 31) - 1]
    assert parse_int_list("[]", bits=32) == []


def test_spread_small_equals_spread_fast_column_by_column() -> None:
    # GIVEN a side table with strings (one null), ints, lists and all-null columns
    side = pa.table({
        "s": pa.array(["a", None, "b"]),
        "i": pa.array([7, 8, None], pa.int64()),
        "u": pa.array([1, 2, 3], pa.uint64()),
        "l": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
        "ns": pa.nulls(3, pa.string()),
        "ni": pa.nulls(3, pa.int32()),
    })
    # and the side row of each of five events (-1: none)
    use = np.array([2, -1, 0, 0, 1], dtype=np.int32)
    take = pa.array([2, None, 0, 0, 1], pa.int32())
    # WHEN spread in one take and column by column
    small = spread_small(side, side.column_names, take)
    fast = {k: spread_fast(side.column(k), take, use) for k in side.column_names}
    # THEN every column has the same type and values
    for k in side.column_names:
        assert small[k].type == fast[k].type, k
        assert small[k].equals(fast[k]), k
