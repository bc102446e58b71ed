"""The Perfetto export keeps the trace's own flow events (ac2g, fwdbwd: ph s / t / f)."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from tracekit import api
from tracekit.reports import perfetto

FLOW = ("s", "t", "f")


@pytest.fixture(scope="module")
def nccl_trace(kineto_hta: Path) -> Path:
    """HTA's NCCL parser test trace (1 rank, ac2g and fwdbwd flows)."""
    path = kineto_hta / "nccl_parser_config" / "nccl_data.json.gz"
    if not path.is_file():
        pytest.skip(f"reference trace {path} absent")
    return path


def _flows(events: list[dict]) -> collections.Counter:
    """(ph, cat, id, bp) of every flow event, counted."""
    return collections.Counter((e["ph"], e.get("cat"), e.get("id"), e.get("bp"))
                               for e in events if e.get("ph") in FLOW)


def test_flow_events_out_equal_flow_events_in(nccl_trace: Path) -> None:
    # GIVEN HTA's NCCL test trace, whose raw JSON has ac2g and fwdbwd flows
    with gzip.open(nccl_trace, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    want = _flows(raw)
    assert sum(want.values()) > 0 and {k[1] for k in want} >= {"ac2g", "fwdbwd"}
    # WHEN exported to Perfetto (events only: the flows do not depend on attribution)
    out = perfetto.build(api.Analysis(run=api.load(nccl_trace, api.LoadOptions(jobs=1))))
    # THEN every flow event is there, as many of each (ph, cat, id, bp) as in the file
    assert _flows(out["traceEvents"]) == want


def test_flow_starts_sit_on_the_thread_of_their_launch(nccl_trace: Path) -> None:
    # GIVEN the export WHEN an ac2g flow start is looked up THEN an X slice on its exported
    # (pid, tid) encloses its ts, so Perfetto binds the arrow to the launch
    out = perfetto.build(api.Analysis(run=api.load(nccl_trace, api.LoadOptions(jobs=1))))
    events = out["traceEvents"]
    start = next(e for e in events if e["ph"] == "s" and e.get("cat") == "ac2g")
    slices = [e for e in events if e["ph"] == "X" and e["pid"] == start["pid"]
              and e["tid"] == start["tid"] and e["ts"] <= start["ts"] <= e["ts"] + e["dur"]]
    assert slices
