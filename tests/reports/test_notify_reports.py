"""Every report says that the DeepEP notify kernels' time is wait (synchronisation).

The analysis is measured from a 2-rank trace of DeepEP's real kernel names with planted
durations (tests/measure/test_notify_wait.py); the figures expected here are computed from
those durations.
"""

from __future__ import annotations

import pytest
from measure.test_notify_wait import DURS, _analysis
from rules.test_deepep import DPSK, LAYOUT_DPSK

from tracekit import reports
from tracekit import schema as s
from tracekit.api import Analysis
from tracekit.reports import fmt, views
from tracekit.reports import json as json_report
from tracekit.rules.labels import PathLabel

LAYERS = 2
NOTIFY = LAYERS * sum(d[1] + d[3] for d in DURS.values())  # notify_dispatch + cached_notify


@pytest.fixture(scope="module")
def deepep() -> Analysis:
    return _analysis(DPSK, LAYOUT_DPSK, layers=LAYERS)


def test_text_says_wait_includes_notify(deepep: Analysis) -> None:
    # GIVEN the DeepEP run WHEN rendered as text
    text = reports.render("text", deepep)
    # THEN the wait line names the notify time, and the phase and path tables show it
    wait = next(v for k, v in views.summary(deepep) if k == "wait for peers")
    assert f"includes {fmt.ns(NOTIFY)} of DeepEP notify (sync) kernels" in wait
    head = next(v for k, v in views.headline(deepep) if k == "wait for peers")
    assert f"includes {fmt.ns(NOTIFY)} of DeepEP notify (sync) kernels" in head
    assert text.count(views.NOTIFY_HEADER) >= 2
    assert "reported as wait, not" in text


def test_json_totals_phases_and_paths_carry_notify(deepep: Analysis) -> None:
    doc = json_report.build(deepep)
    assert doc["totals"][s.NOTIFY_NS] == NOTIFY
    by_phase = {p[s.PHASE]: p for p in doc["phases"]}
    assert by_phase[s.Phase.DISPATCH][s.NOTIFY_NS] == LAYERS * (DURS[0][1] + DURS[1][1])
    assert by_phase[s.Phase.COMBINE][s.NOTIFY_NS] == LAYERS * (DURS[0][3] + DURS[1][3])
    by_path = {p[s.PATH]: p for p in doc["paths"]}
    combine = by_path[PathLabel.DEEPEP_NORMAL_COMBINE]
    # the path's wait holds its notify time, its transfer none of it
    data = [d[4] for d in DURS.values()]
    assert combine[s.TRANSFER_NS] == LAYERS * len(data) * min(data)
    assert combine[s.WAIT_NS] == LAYERS * (sum(data) - len(data) * min(data)) + combine[
        s.NOTIFY_NS]


def test_html_tables_show_the_notify_column_and_note(deepep: Analysis) -> None:
    html = reports.render("html", deepep)
    assert views.NOTIFY_HEADER in html and "DeepEP notify (sync)" in html


def test_runs_without_notify_kernels_show_no_notify_column(analysis: Analysis) -> None:
    # GIVEN the NCCL fixture run (no DeepEP) WHEN its sections are built
    secs = {sec.key: sec for sec in views.sections(analysis)}
    # THEN neither table grows a notify column nor the note
    for key in ("phases", "paths"):
        assert s.NOTIFY_NS not in secs[key].columns and "notify" not in secs[key].note
