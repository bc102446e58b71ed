"""Verdicts in code space (tracekit.rules.verdicts) against the five object columns they
replace, written row by row."""

from __future__ import annotations

import numpy as np

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.groups import Verdict
from tracekit.rules.verdicts import VERDICT_COLUMNS, Coded, reason_prefixed

A = Verdict("TP", S.Status.ATTRIBUTED, "desc", "description 'tp'", ("TP",))
B = Verdict(None, S.Status.AMBIGUOUS, "shape", "out/in 8", ("TP", "MOE_EP"))
C = Verdict(None, S.Status.UNATTRIBUTED, None, None, ())  # type: ignore[arg-type]


def _rows(coded: Coded) -> list[tuple[object, ...]]:
    return list(zip(*(coded.column(attr).tolist() for _, attr in VERDICT_COLUMNS), strict=True))


def _plain(verdicts: list[Verdict]) -> list[tuple[object, ...]]:
    return [tuple(getattr(v, attr) for _, attr in VERDICT_COLUMNS) for v in verdicts]


def test_columns_and_values() -> None:
    coded = Coded.of([A, B, C], np.array([2, 0, 0, 1]))
    assert [c for c, _ in VERDICT_COLUMNS] == [S.GROUP, S.STATUS, F.GROUP_RULE, F.GROUP_REASON,
                                               F.CANDIDATES]
    assert coded.column("candidates").dtype == object
    assert coded.column("candidates").tolist() == [(), ("TP",), ("TP",), ("TP", "MOE_EP")]
    assert _rows(coded) == _plain([C, A, A, B])
    # one shared object per verdict: the engine's factorize by reference relies on it
    groups = coded.column("group")
    assert groups[1] is groups[2]


def test_status_and_group_tests() -> None:
    coded = Coded.of([A, B, C], np.array([2, 0, 1, 0]))
    assert coded.has_status(S.Status.ATTRIBUTED).tolist() == [False, True, False, True]
    assert coded.lacks_group().tolist() == [True, False, True, False]
    empty = Coded.of((), np.zeros(0, dtype=np.int32))
    assert empty.has_status(S.Status.ATTRIBUTED).shape == (0,)
    assert empty.column("reason").shape == (0,)


def test_carried_matches_pairwise_copy_with_prefix() -> None:
    rows = [A, B, C, C, B]
    coded = Coded.of([A, B, C], np.array([0, 1, 2, 2, 1]))
    target, source = np.array([2, 3, 2]), np.array([0, 1, 4])
    out = coded.carried(target, source, reason_prefixed("nested: "))
    expected = list(rows)
    for t, s in zip(target.tolist(), source.tolist(), strict=True):  # the last write wins
        v = rows[s]
        expected[t] = Verdict(v.group, v.status, v.rule_id, "nested: " + v.reason,
                              v.candidates)
    assert _rows(out) == _plain(expected)
    assert _rows(coded) == _plain(rows)  # the input is not modified
    # a verdict without a text reason keeps none
    none_reason = Coded.of([C], np.array([0, 0])).carried(np.array([1]), np.array([0]),
                                                          reason_prefixed("x: "))
    assert none_reason.column("reason").tolist() == [None, None]


def test_borrowed_keeps_own_candidates() -> None:
    coded = Coded.of([A, B, C], np.array([1, 2, 1, 0]))
    donor = Verdict("MOE_EP", S.Status.ATTRIBUTED, "layer.signature", "same layer", ())
    out = coded.borrowed(np.array([0, 1, 2]), [donor], np.array([0, 0, 0]))
    lent = [Verdict("MOE_EP", S.Status.ATTRIBUTED, "layer.signature", "same layer", c)
            for c in (B.candidates, C.candidates, B.candidates)]
    assert _rows(out) == _plain([*lent, A])
    assert len(out.table) == 3 + 2  # one new verdict per distinct (donor, own verdict)


def test_written_subset_placed() -> None:
    coded = Coded.of([A, B], np.array([0, 1, 1, 0, 1]))
    rows = np.array([1, 2, 4])
    part = coded.subset(rows).written(np.array([0, 2]), [C, A], np.array([1, 0]))
    assert _rows(part) == _plain([A, B, C])
    whole = coded.placed(rows, part)
    assert _rows(whole) == _plain([A, A, B, A, C])


def test_issuers_are_the_ranks_of_each_call_dense_or_sparse() -> None:
    """groups._issuers against sets built row by row: dense codes (the marked pairs) and a
    sparse range (np.unique), ranks not starting at 0."""
    from tracekit.rules.groups import _issuers

    rng = np.random.default_rng(3)
    for calls_n, n, spread_ranks in ((5, 400, 8), (3, 10, 3), (40, 12, 64)):
        calls = rng.integers(0, calls_n, n)
        rank = rng.choice(np.arange(100, 100 + spread_ranks), n)
        want = [frozenset(int(r) for c2, r in zip(calls, rank, strict=True) if c2 == c)
                for c in range(int(calls.max()) + 1)]
        assert _issuers(calls, rank) == want
    assert _issuers(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)) == []


def test_group_codes_partition_rows_as_their_group_texts_do() -> None:
    a2 = Verdict("TP", S.Status.AMBIGUOUS, "shape", "another reason", ("TP",))  # TP again
    d = Verdict("MOE_EP", S.Status.ATTRIBUTED, "desc", "x", ("MOE_EP",))
    coded = Coded.of([A, B, a2, d, C], np.array([0, 1, 2, 3, 4, 2, 3, 0, 1]))
    codes = coded.group_codes()
    texts = coded.column("group")
    # equal groups equal codes, different groups different codes, no group -1
    for i in range(len(codes)):
        for j in range(len(codes)):
            assert (codes[i] == codes[j]) == (texts[i] == texts[j] or
                                             (texts[i] is None and texts[j] is None))
    assert [int(c) for c, t in zip(codes, texts, strict=True) if t is None] == [-1, -1, -1]
    assert Coded.of((), np.zeros(0, dtype=np.int32)).group_codes().shape == (0,)
