"""The attribute stage's categorical of an EVENTS text column (``engine._categorical``)
holds, row for row, the text pyarrow decodes, with the distinct values in order of first
appearance over the chunks' dictionaries."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from tracekit.rules.engine import _categorical


def _dictionary(indices: list[int | None], values: list[str | None]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()),
                                          pa.array(values, pa.string()))


CHUNKS = [
    # per rank: dictionaries of their own, a value repeated inside one dictionary and
    # across them, a null index, a null dictionary value, an empty chunk
    _dictionary([0, 1, 2, 1, None], ["kernel", "runtime", "kernel"]),
    _dictionary([], []),
    _dictionary([2, 0, None, 1, 3], ["annotation", None, "runtime", "cpu_op"]),
    _dictionary([0, 0], ["cpu_op"]),
]


@pytest.mark.parametrize("chunks", [CHUNKS, CHUNKS[:1], CHUNKS[1:2], []])
def test_the_categorical_is_the_decoded_text(chunks: list[pa.DictionaryArray]) -> None:
    kind = pa.dictionary(pa.int32(), pa.string())
    table = pa.table({"kind": pa.chunked_array(chunks, kind)})
    got = _categorical(table, "kind")
    want = table.column("kind").cast(pa.string()).to_pylist()
    assert [None if pd.isna(v) else v for v in got] == want
    # the distinct values in order of first appearance over the dictionaries, none repeated
    seen: list[str] = []
    for chunk in chunks:
        for v in chunk.dictionary.to_pylist():
            if v is not None and v not in seen:
                seen.append(v)
    assert list(got.categories) == seen


def test_a_plain_text_column_is_coded_too() -> None:
    table = pa.table({"name": pa.chunked_array([pa.array(["b", None, "a"]),
                                                pa.array(["a", "c"])])})
    got = _categorical(table, "name")
    assert [None if pd.isna(v) else v for v in got] == ["b", None, "a", "a", "c"]
    assert list(got.categories) == ["b", "a", "c"]
