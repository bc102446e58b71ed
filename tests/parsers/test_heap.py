"""The allocation policy of building EVENTS and of the attribute stage
(tracekit/parsers/kineto/heap.py): set once by the outermost use, restored and trimmed when
the last one ends."""

from __future__ import annotations

from typing import Any

import pytest

from tracekit.parsers.kineto import heap


def test_nested_uses_set_the_policy_once_and_trim_at_the_end(libc: Any) -> None:
    with heap.reused_heap():
        assert libc.calls == [("mallopt", -3, heap.REUSED_BLOCK),
                              ("mallopt", -1, heap.KEPT_TOP)]
        with heap.reused_heap():
            pass
        assert len(libc.calls) == 2  # the inner use changes nothing
    assert libc.calls[2:] == [("mallopt", -1, heap.DEFAULT_TRIM),
                              ("mallopt", -3, heap.LARGE_BLOCK), ("malloc_trim", 0)]


def test_an_error_in_the_body_still_restores(libc: Any) -> None:
    with pytest.raises(ValueError), heap.reused_heap():
        raise ValueError("boom")
    assert libc.calls[-1] == ("malloc_trim", 0)
    with heap.reused_heap():  # the depth went back to zero: the next use sets it again
        pass
    assert libc.calls.count(("mallopt", -3, heap.REUSED_BLOCK)) == 2
    assert libc.calls.count(("mallopt", -3, heap.LARGE_BLOCK)) == 2


def test_without_a_c_library_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "c_library", lambda: None)
    with heap.reused_heap():
        pass


def test_numpy_huge_pages_are_off_inside_and_restored_after_the_last_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "c_library", lambda: None)
    before = heap.huge_pages(True)
    try:
        with heap.reused_heap():
            assert heap.huge_pages(False) is False  # off while the step runs
            with heap.reused_heap():
                assert heap.huge_pages(False) is False
            assert heap.huge_pages(False) is False  # an inner use does not restore
        assert heap.huge_pages(True) is True  # numpy's setting before the outermost use
        heap.huge_pages(False)
        with heap.reused_heap():
            pass
        assert heap.huge_pages(True) is False  # an off setting stays off
    finally:
        if before is not None:
            heap.huge_pages(before)


def test_without_trim_the_outermost_use_restores_but_keeps_the_pages(libc: Any) -> None:
    with heap.reused_heap(trim=False), heap.reused_heap():  # the inner use's trim is not
        pass  # the outermost's
    assert libc.calls[2:] == [("mallopt", -1, heap.DEFAULT_TRIM),
                              ("mallopt", -3, heap.LARGE_BLOCK)]
    libc.calls.clear()
    with heap.reused_heap(), heap.reused_heap(trim=False):
        pass
    assert libc.calls[-1] == ("malloc_trim", 0)
