"""The attribute stage's integer-code helpers give what the plain tuple formulation gives.

``_order_and_paths`` and its steps factorize columns once and compare, group and look up
integer codes instead of building a tuple per row; these tests hold each helper to the
straightforward Python or pandas reference on data with missing values (None and NaN),
repeated and unequal-length groups, and empty inputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit.rules.engine import _dictionary, _joined
from tracekit.rules.grouping import (
    as_objects,
    per_value,
    position_in_group,
    row_codes,
    sequence_ids,
)
from tracekit.rules.keys import first_rows
from tracekit.rules.layers import smallest_period


def _columns(rng: np.random.Generator, n: int) -> list[pd.Series]:
    text = pd.Series(rng.choice(np.array(["a", "b", None, "c"], dtype=object), n), dtype=object)
    arrow = pd.Series(rng.choice(np.array(["x", "y", None], dtype=object), n), dtype="str")
    number = pd.Series(rng.choice([1.0, 2.0, np.nan], n))
    small = pd.Series(rng.integers(0, 3, n))
    return [text, arrow, number, small]


def _plain(value: object) -> object:
    return None if pd.isna(value) else value


def test_row_codes_number_distinct_rows_in_order_of_appearance() -> None:
    rng = np.random.default_rng(11)
    for n in (0, 1, 7, 500):
        cols = _columns(rng, n)
        # WHEN rows are coded
        codes = row_codes(*cols)
        # THEN equal rows (None and NaN alike) share a code, numbered as they first appear
        tuples = [tuple(_plain(c.iloc[i]) for c in cols) for i in range(n)]
        reference: dict[tuple[object, ...], int] = {}
        expected = [reference.setdefault(t, len(reference)) for t in tuples]
        assert codes.tolist() == expected
        assert first_rows(codes).tolist() == [tuples.index(t) for t in reference]


def test_sequence_ids_equal_exactly_for_equal_sequences() -> None:
    # GIVEN groups of unequal length, some with the same sequence, codes unsorted
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 40, 400)
    groups = pd.factorize(groups)[0]
    values = rng.integers(0, 2, 400)
    # WHEN sequences are identified
    ids, examples = sequence_ids(values, groups)
    # THEN two groups share an id exactly when their values, in row order, are equal
    seqs = [tuple(values[groups == g].tolist()) for g in range(groups.max() + 1)]
    for a in range(len(seqs)):
        for b in range(len(seqs)):
            assert (ids[a] == ids[b]) == (seqs[a] == seqs[b])
        assert tuple(examples[ids[a]].tolist()) == seqs[a]
    assert sequence_ids(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))[1] == []


def test_position_in_group_equals_cumcount() -> None:
    codes = pd.factorize(np.random.default_rng(2).integers(0, 9, 300))[0]
    assert position_in_group(codes).tolist() == pd.Series(codes).groupby(codes).cumcount().tolist()


def _reference_period(tokens: list[object], prefer: int | None) -> int:
    n = len(tokens)
    candidates = list(range(1, n + 1))
    if prefer and n % prefer == 0:
        candidates.insert(0, n // prefer)
    return next(p for p in candidates
                if n % p == 0 and all(tokens[i] == tokens[i + p] for i in range(n - p)))


def test_smallest_period_on_codes_equals_tuple_comparison() -> None:
    rng = np.random.default_rng(9)
    for _ in range(200):
        unit = [tuple(t) for t in rng.integers(0, 2, (int(rng.integers(1, 4)), 2)).tolist()]
        tokens = unit * int(rng.integers(1, 5)) + ([("x", 0)] if rng.random() < 0.3 else [])
        codes = pd.factorize(pd.Series(tokens, dtype=object))[0]
        prefer = int(rng.choice([0, 1, 2, 3]))
        assert smallest_period(codes, prefer) == _reference_period(tokens, prefer)


def test_per_value_and_as_objects_keep_every_value() -> None:
    values = pd.Series(["p", None, "q", "p", np.nan], dtype=object)
    assert per_value(values, lambda v: v and v.upper()).tolist() == ["P", None, "Q", "P", None]
    shared = as_objects(pd.Series(["p", None, "p"], dtype="str"))
    assert shared.tolist() == ["p", None, "p"] and shared[0] is shared[2]


def test_joined_equals_the_pandas_formulation() -> None:
    # GIVEN rule and reason pairs with missing and empty parts
    first = pd.Series(["g", None, "g", "", "h", None], dtype=object)
    second = pd.Series([None, "p", "p", "q", "", None], dtype=object)
    # WHEN joined per distinct pair
    codes, values = _joined(first, second, "+")
    # THEN as the column-wise pandas expression gives
    plain = first.where(second.isna(), first.fillna("").str.cat(second, sep="+"))
    plain = plain.str.strip("+").replace("", None)
    assert [_plain(v) for v in values[codes]] == [_plain(v) for v in plain]


def test_dictionary_equals_arrow_encoding_of_the_strings() -> None:
    rng = np.random.default_rng(4)
    table = np.array(["b", None, "a", "b2", "a"], dtype=object)
    for n in (0, 1, 50):
        index = rng.integers(-1, len(table), n)
        # WHEN encoded from codes
        fast = _dictionary(index, table)
        # THEN the dictionary array Arrow makes from the strings themselves
        strings = pa.array([table[i] if i >= 0 else None for i in index.tolist()], pa.string())
        slow = strings.dictionary_encode()
        assert fast.dictionary.equals(slow.dictionary)
        assert fast.indices.cast(pa.int32()).equals(slow.indices.cast(pa.int32()))


def test_dictionary_of_repeated_and_missing_table_values() -> None:
    rng = np.random.default_rng(5)
    # GIVEN a table whose values repeat (two entries, one value) and a missing value
    table = np.array(["x", "y", None, "x", "z", "y", "w"], dtype=object)
    for n in (0, 1, 7, 400):
        for dtype in (np.int32, np.int64):
            index = rng.integers(-1, len(table), n).astype(dtype)
            # WHEN encoded from codes
            ours = _dictionary(index, table)
            # THEN it is Arrow's encoding of the strings
            strings = pa.array([table[i] if i >= 0 else None for i in index.tolist()],
                               pa.string())
            assert ours.equals(strings.dictionary_encode())


def test_dictionary_at_rows_equals_arrow_encoding_of_the_whole_column() -> None:
    from tracekit.rules.engine import _dictionary_at

    rng = np.random.default_rng(6)
    table = np.array(["x", "y", None, "x", "z"], dtype=object)
    for n, k in ((0, 0), (5, 0), (9, 4), (300, 120)):
        # GIVEN codes at some ascending rows of an n-row table (null elsewhere)
        rows = np.sort(rng.choice(n, k, replace=False)) if k else np.zeros(0, dtype=np.int64)
        codes = rng.integers(-1, len(table), k)
        ours = _dictionary_at(codes, table, rows, n)
        # THEN it is Arrow's encoding of the whole column's strings
        whole: list[object] = [None] * n
        for r, c in zip(rows.tolist(), codes.tolist(), strict=True):
            whole[r] = table[c] if c >= 0 else None
        assert ours.equals(pa.array(whole, pa.string()).dictionary_encode())
