"""Dictionary columns built in code space equal Arrow's own encoding, and the allocation
policy of a parse is scoped to it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tracekit.parsers.kineto.dict_codes import dict_codes, encode_codes, masked
from tracekit.parsers.kineto.sparse_columns import lean_memory


@pytest.mark.parametrize(("codes", "values"), [
    ([2, 0, -1, 2, 1, 3], ["a", "b", "c", None]),  # nulls by code and by value
    ([1, 1, 0, 3], ["x", "y", "x", "y"]),  # equal values under several codes merge
    ([0, 0], ["only", "unused", "also unused"]),  # unused values leave no entry
    ([-1, -1], ["a"]),  # all null
    ([], ["a"]),
])
def test_encode_codes_equals_dictionary_encoding_of_the_strings(
        codes: list[int], values: list[str | None]) -> None:
    # GIVEN row codes into a list of values
    arr = np.array(codes, dtype=np.int32)
    # WHEN encoded in code space
    got = encode_codes(arr, values)
    # THEN it is exactly what Arrow's dictionary_encode gives for the strings themselves
    strings = pa.array([values[c] if c >= 0 else None for c in codes], pa.string())
    want = strings.dictionary_encode()
    assert got.type == want.type
    assert got.equals(want)
    assert got.dictionary.equals(want.dictionary)


def test_masked_shares_the_values_and_nulls_where_invalid() -> None:
    # GIVEN values and a validity
    values = np.array([5, 6, 7], dtype=np.int64)
    # WHEN wrapped
    arr = masked(values, np.array([True, False, True]), pa.int64())
    # THEN the invalid row is null, the others keep their values, and codes read back
    assert arr.to_pylist() == [5, None, 7]
    assert masked(values, None, pa.int64()).null_count == 0
    codes = dict_codes(pa.array(["a", None, "a"]).dictionary_encode())
    assert codes.tolist() == [0, -1, 0]


def test_lean_memory_restores_the_arrow_pool_even_when_nested() -> None:
    # GIVEN the process's Arrow pool
    before = pa.default_memory_pool().backend_name
    # WHEN a parse (and a nested one) runs under the lean allocation policy
    with lean_memory():
        inside = pa.default_memory_pool().backend_name
        with lean_memory():
            assert pa.default_memory_pool().backend_name == "system"
        assert pa.default_memory_pool().backend_name == "system"
    # THEN the system allocator was used inside and the previous pool is back after
    assert inside == "system"
    assert pa.default_memory_pool().backend_name == before
