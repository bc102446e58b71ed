"""tracekit.pipeline.stages: one stage sequence, whichever execution runs it.

GIVEN an execution WHEN the pipeline executes it THEN its stages run in the one order, a stage
run inside another gets no call of its own, and each progress line comes from the
orchestration (named with the stages it also runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tracekit import progress
from tracekit import schema as S
from tracekit.model import Analysis, AnalyzeOptions, LoadOptions, Run
from tracekit.pipeline import stages
from tracekit.pipeline.in_memory import InMemory
from tracekit.pipeline.partitioned import Partitioned
from tracekit.schema import EVENTS, PROCESS_GROUPS, RANK_INFO, empty


class Recorder(stages.Execution):
    inside: ClassVar[dict[str, str]] = {"measure": "attribute"}

    def __init__(self) -> None:
        self.calls: list[str] = []

    def parse(self) -> None:
        self.calls.append("parse")

    def attribute(self) -> None:
        self.calls.append("attribute")

    def cross_rank(self) -> None:
        self.calls.append("cross-rank")

    def findings(self) -> None:
        self.calls.append("findings")

    def result(self) -> Analysis:
        return Analysis(run=Run(empty(EVENTS), empty(PROCESS_GROUPS), empty(RANK_INFO)))


@pytest.fixture()
def shown(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    progress.enable(True)
    try:
        yield capsys
    finally:
        progress.enable(False)


def _lines(err: str) -> list[str]:
    """The stage names of the progress lines (``name  1.2 s``)."""
    return [line.split()[0] for line in err.replace("\r", "\n").splitlines()
            if line.strip().endswith(" s")]


def test_stages_run_in_order_and_inner_ones_are_not_called(shown) -> None:
    ex = Recorder()
    stages.analyze(ex)
    assert ex.calls == ["parse", "attribute", "cross-rank", "findings"]
    assert _lines(shown.readouterr().err) == ["parse", "attribute+measure", "cross-rank",
                                              "findings"]


def test_a_slice_of_the_stages(shown) -> None:
    ex = Recorder()
    stages.execute(ex, first="attribute", last="cross-rank")
    assert ex.calls == ["attribute", "cross-rank"]


def test_a_stage_run_inside_another_refuses_a_call_of_its_own() -> None:
    with pytest.raises(NotImplementedError, match="measure inside attribute"):
        Recorder().measure()


def test_both_executions_show_the_same_sequence(run_dir: Path, tmp_path: Path, shown) -> None:
    # GIVEN one run WHEN it is analysed in memory and partitioned
    options = AnalyzeOptions(hardware="h200")
    whole = stages.analyze(InMemory(options, source=run_dir, load=LoadOptions(jobs=1)))
    in_memory = _lines(shown.readouterr().err)
    parts = stages.analyze(Partitioned(run_dir, tmp_path / "parts", options,
                                       LoadOptions(jobs=1)))
    partitioned = _lines(shown.readouterr().err)
    # THEN each shows the stage sequence once, joined where the execution joins stages: in
    # memory every stage has its own line (the measure's two halves too), and only the
    # orchestration prints one
    assert in_memory == ["parse", "attribute", "measure", "cross-rank", "findings"]
    assert partitioned == ["parse+attribute+measure", "cross-rank", "findings"]
    # AND the two agree on the collectives and the findings
    assert whole.measured is not None and parts.measured is not None
    assert whole.measured.num_rows == parts.measured.num_rows > 0
    assert whole.findings_table is not None and parts.findings_table is not None
    key = [S.RULE_ID, S.SEVERITY]
    assert sorted(whole.findings_table.select(key).to_pylist(), key=str) == sorted(
        parts.findings_table.select(key).to_pylist(), key=str)
