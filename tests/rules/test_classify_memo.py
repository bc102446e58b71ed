"""kernels.classify_table keeps its last answer for the same columns and rules, and only
for them: the first summary and the attribution of one run classify the same events."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.rules.kernels import classify, classify_table, forget_last
from tracekit.rules.loader import load_rules


def _events(names: list[str]) -> pa.Table:
    return pa.table({S.NAME: pa.array(names).dictionary_encode(),
                     S.KIND: pa.array([S.Kind.KERNEL] * len(names)).dictionary_encode()})


def test_the_same_columns_reuse_the_answer_and_other_columns_do_not() -> None:
    rules = load_rules()
    events = _events(["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "gemm", "ncclKernel_x"])
    first = classify_table(events, rules)
    # a selection of the same columns (what the summary passes) is the same data
    again = classify_table(events.select([S.NAME, S.KIND]), rules)
    assert again is first and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0] = 5  # read-only: a caller cannot change the kept answer
    # other data (equal length, other names), a slice, other rules: computed anew
    other = _events(["gemm", "gemm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"])
    assert classify_table(other, rules).tolist() == first[[1, 1, 0]].tolist()
    sliced = classify_table(events.slice(1), rules)
    assert sliced.tolist() == first[1:].tolist()
    assert classify_table(events, rules.merged(rules)) is not first
    # and every answer is the plain classification's
    frame = events.to_pandas()
    frame[S.NAME] = frame[S.NAME].astype(object)
    frame[S.KIND] = frame[S.KIND].astype(object)
    assert np.array_equal(classify(frame, rules), first)


def test_forgetting_drops_the_kept_answer() -> None:
    rules = load_rules()
    events = _events(["gemm", "ncclKernel_x"])
    first = classify_table(events, rules)
    forget_last()
    again = classify_table(events, rules)
    assert again is not first and again.tolist() == first.tolist()
