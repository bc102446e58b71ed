"""tracekit.parsers.kineto.arrow_values gives what pa.array / pa.scalar / to_numpy give, and
reading a Kineto file (the native reader, small and large paths) never imports pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto import events_table, sparse_columns
from tracekit.parsers.kineto.native import accumulator

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "tp4_dp2_attn_tp"

CASES = [
    ([], pa.string()),
    (["a", None, "é", ""], pa.string()),
    ([1, None, -(1 << 63), (1 << 63) - 1], pa.int64()),
    ([0, (1 << 64) - 1, None], pa.uint64()),
    ([None, None], pa.int32()),
    ([[1, 2], None, [], [3]], pa.list_(pa.int64())),
    ([[0, 7], None], pa.list_(pa.int32())),
    ([], pa.list_(pa.int32())),
]


@pytest.mark.parametrize(("values", "type_"), CASES)
def test_array_equals_pa_array(values: list, type_: pa.DataType) -> None:
    # GIVEN values of a type the builders take
    # WHEN built both ways
    got = V.array(values, type_)
    want = pa.array(values, type_)
    # THEN the arrays are equal, nulls included
    got.validate(full=True)
    assert got.type == want.type and got.equals(want) and got.null_count == want.null_count


@pytest.mark.parametrize(("values", "type_"), [
    ([1 << 40], pa.int32()),  # out of range
    ([1, "x"], pa.int64()),  # not an int
    ([True], pa.int64()),  # a bool
    ([3], pa.string()),  # not a string
])
def test_what_the_builders_do_not_take_raises_as_pa_array(values: list,
                                                          type_: pa.DataType) -> None:
    # GIVEN values pa.array refuses
    with pytest.raises(Exception) as want:
        pa.array(values, type_)
    # WHEN built by the helper, THEN the same error is raised
    with pytest.raises(type(want.value)):
        V.array(values, type_)


@pytest.mark.parametrize(("value", "type_"), [
    (None, pa.int64()), (None, pa.string()), (True, pa.bool_()), (False, pa.bool_()),
    (-1, pa.int32()), (0, pa.uint64()), ("all_to_allv", pa.string())])
def test_scalar_equals_pa_scalar(value: object, type_: pa.DataType) -> None:
    assert V.scalar(value, type_).equals(pa.scalar(value, type_))


@pytest.mark.parametrize("arr", [
    pa.array([1, 2, 3], pa.int64()).slice(1), pa.array([5, 6], pa.uint64()),
    pa.array([1.5, 2.0]), pa.array([True, False, True] * 5).slice(3),
    pa.array([1, None]), pa.array(["a", None]), pa.chunked_array([[1, 2], [3]]),
    pa.array([], pa.int32())])
def test_numpy_equals_to_numpy(arr: pa.Array | pa.ChunkedArray) -> None:
    got, want = V.numpy(arr), arr.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_fill_null_and_from_numpy() -> None:
    arr = pa.array([1, None, 3], pa.int32())
    assert V.fill_null(arr, -1).equals(pc.fill_null(arr, -1))
    assert V.from_numpy(np.arange(4, dtype=np.int32)).equals(pa.array(np.arange(4, dtype=np.int32)))
    assert V.from_numpy(np.array([True, False])).equals(pa.array([True, False]))


def test_from_rows_equals_from_pylist() -> None:
    schema = pa.schema([("a", pa.int32()), ("b", pa.string()), ("c", pa.list_(pa.int32()))])
    rows = [{"a": 1, "b": "x", "c": [1, 2]}, {"a": None, "c": None}]
    assert V.from_rows(rows, schema).equals(pa.Table.from_pylist(rows, schema=schema))


_LOAD = r"""
import json, sys
from pathlib import Path
from tracekit.api import LoadOptions
from tracekit.parsers import load_run
if sys.argv[2] == "large":  # the code of a large rank file on a small one
    from tracekit.parsers.kineto import events_table, sparse_columns
    sparse_columns.SMALL_ROWS = events_table.SMALL_ROWS = 0
run = load_run(Path(sys.argv[1]), LoadOptions(jobs=1))
print(json.dumps({"pandas": "pandas" in sys.modules, "rows": run.events.num_rows,
                  "reader": run.events.schema.metadata[b"reader"].decode()}))
"""


@pytest.mark.skipif(accumulator() is None, reason="native extension not built")
@pytest.mark.parametrize("path", ["small", "large"])
def test_reading_a_kineto_run_does_not_import_pandas(path: str) -> None:
    # GIVEN a sample run, read in a fresh process by the native reader
    out = subprocess.run([sys.executable, "-c", _LOAD, str(SAMPLE), path], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # THEN its events were read natively, and pandas (40 MiB, 0.3 s) was never imported
    assert got["rows"] > 0 and got["reader"] == "native"
    assert got["pandas"] is False


def test_absent_columns_of_a_large_file_are_lazy_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the EVENTS columns of a rank file, as a small file and as a large one
    from tracekit.api import LoadOptions
    from tracekit.parsers import load_run

    rank = SAMPLE / "rank0.trace.json.gz"
    small = load_run(rank, LoadOptions(jobs=1)).events
    monkeypatch.setattr(sparse_columns, "SMALL_ROWS", 0)
    monkeypatch.setattr(events_table, "SMALL_ROWS", 0)
    large = load_run(rank, LoadOptions(jobs=1)).events
    # THEN both read the same table; the profiler-time columns are all null
    assert large.equals(small)
    for key in (S.PROF_TRANSIT_NS, S.PROF_WAIT_NS, S.PROF_SYNC_NS, S.PROF_IDLE_NS):
        assert large.column(key).null_count == large.num_rows
