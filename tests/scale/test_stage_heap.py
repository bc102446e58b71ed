"""The allocation policy of the steps after the parse (tracekit.pipeline.in_memory): one
heap.reused_heap from the summary to the last report.

GIVEN a run analysed in memory WHEN the stages after the parse run THEN each runs inside the
one policy, set once; AND it ends with the execution (its heap given back), or, where the
caller gave a scope of its own (the CLI), when the caller closes it, without the trim.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from tracekit.model import AnalyzeOptions, LoadOptions
from tracekit.parsers.kineto import heap
from tracekit.pipeline import stages
from tracekit.pipeline.in_memory import InMemory

SET = ("mallopt", -3, heap.REUSED_BLOCK)
TRIM = ("malloc_trim", 0)




class _Watched(InMemory):
    """Records the heap's depth while each stage after the parse runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.depths: dict[str, int] = {}

    def attribute(self) -> None:
        self.depths["attribute"] = heap._depth[0]
        super().attribute()

    def measure(self) -> None:
        self.depths["measure"] = heap._depth[0]
        super().measure()

    def cross_rank(self) -> None:
        self.depths["cross-rank"] = heap._depth[0]
        super().cross_rank()

    def findings(self) -> None:
        self.depths["findings"] = heap._depth[0]
        super().findings()


def test_one_policy_from_the_parse_to_the_result(libc: Any, run_dir: Path) -> None:
    ex = _Watched(AnalyzeOptions(hardware="h200"), source=run_dir, load=LoadOptions(jobs=1),
                  summarize=True)
    stages.analyze(ex)
    # THEN every stage after the parse ran inside the policy, and it was set once (the
    # attribute stage's own use nested in it), then restored and trimmed once
    assert ex.depths == {"attribute": 1, "measure": 1, "cross-rank": 1, "findings": 1}
    assert libc.calls.count(SET) == 1
    assert libc.calls.count(TRIM) == 1 and libc.calls[-1] == TRIM
    assert heap._depth[0] == 0


def test_the_callers_scope_holds_it_until_closed_without_a_trim(
        libc: Any, run_dir: Path) -> None:
    with contextlib.ExitStack() as scope:
        ex = InMemory(AnalyzeOptions(hardware="h200"), source=run_dir,
                      load=LoadOptions(jobs=1), scope=scope)
        stages.analyze(ex)
        # the reports would run here: the policy still holds
        assert heap._depth[0] == 1
        assert libc.calls.count(SET) == 1
    assert heap._depth[0] == 0
    assert TRIM not in libc.calls  # the process ends next: no system time spent on it
    assert libc.calls[-1] == ("mallopt", -3, heap.LARGE_BLOCK)  # the parse's threshold again


def test_a_stage_that_fails_still_ends_the_policy(libc: Any, run_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: InMemory) -> None:
        raise RuntimeError("measure failed")

    monkeypatch.setattr(InMemory, "measure", boom)
    with pytest.raises(RuntimeError, match="measure failed"):
        stages.analyze(InMemory(AnalyzeOptions(hardware="h200"), source=run_dir,
                                load=LoadOptions(jobs=1)))
    assert heap._depth[0] == 0
    assert libc.calls[-1] == TRIM


def test_a_run_read_already_enters_it_at_the_attribute_stage(libc: Any,
                                                             run_dir: Path) -> None:
    run = InMemory(AnalyzeOptions(), source=run_dir, load=LoadOptions(jobs=1))
    run.parse()
    run.close()
    assert heap._depth[0] == 0
    libc.calls.clear()
    ex = _Watched(AnalyzeOptions(hardware="h200"), run=run.run)
    stages.analyze(ex, first="attribute")
    assert ex.depths["measure"] == 1
    assert libc.calls.count(SET) == 1 and libc.calls[-1] == TRIM
    assert heap._depth[0] == 0


def test_a_partitioned_worker_attributes_and_measures_inside_it(
        libc: Any, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.pipeline import per_rank
    from tracekit.pipeline.partitioned import Partitioned

    depths: list[int] = []
    measure = per_rank.measure_ranks

    def watched(attributed: Any) -> Any:
        depths.append(heap._depth[0])
        return measure(attributed)

    monkeypatch.setattr(per_rank, "measure_ranks", watched)
    stages.analyze(Partitioned(run_dir, tmp_path / "parts", AnalyzeOptions(hardware="h200"),
                               LoadOptions(jobs=1)))
    # THEN each rank group (the worker runs in this process with one job) was measured under
    # the policy, set and trimmed once per group
    assert depths and all(d >= 1 for d in depths)
    assert libc.calls.count(TRIM) == libc.calls.count(SET) >= 1
    assert heap._depth[0] == 0
