"""Perfetto / chrome://tracing export: the JSON structure those viewers require, and args."""

from __future__ import annotations

import itertools
import json

import pyarrow.compute as pc

from tracekit import reports
from tracekit import schema as s

PHASE_KINDS = {"X", "M", "i"}


def _load(analysis):
    return json.loads(reports.render("perfetto", analysis))


def test_trace_event_structure(analysis):
    # GIVEN a full analysis WHEN exported THEN the object has a traceEvents array whose events
    # have the field types Perfetto and chrome://tracing require
    data = _load(analysis)
    assert isinstance(data["traceEvents"], list)
    assert data["displayTimeUnit"] in ("ms", "ns")
    for ev in data["traceEvents"]:
        assert ev["ph"] in PHASE_KINDS
        assert isinstance(ev["name"], str)
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "X":
            assert isinstance(ev["ts"], float | int) and isinstance(ev["dur"], float | int)
            assert ev["dur"] >= 0 and isinstance(ev["cat"], str)
        if ev["ph"] == "i":
            assert ev["s"] in ("t", "p", "g")
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "process_sort_index", "thread_name",
                                  "thread_sort_index")
            assert isinstance(ev["args"], dict)


def test_every_original_event_is_there_with_ns_precision(analysis):
    # GIVEN EVENTS with integer-ns times WHEN exported THEN each event appears once and
    # ts*1000 gives back the exact nanoseconds relative to the base
    data = _load(analysis)
    base = data["otherData"]["base_time_ns"]
    assert base == pc.min(analysis.run.events.column(s.TS_NS)).as_py()
    originals = [e for e in data["traceEvents"] if e["ph"] == "X" and not
                 e["cat"].startswith("tracekit.")]
    assert len(originals) == analysis.run.events.num_rows
    by_id = {e["args"]["event_id"]: e for e in originals}
    ts = analysis.run.events.column(s.TS_NS).to_pylist()
    dur = analysis.run.events.column(s.DUR_NS).to_pylist()
    for i, e_id in enumerate(analysis.run.events.column(s.EVENT_ID).to_pylist()):
        ev = by_id[e_id]
        assert round(ev["ts"] * 1000) == ts[i] - base
        assert round(ev["dur"] * 1000) == dur[i]


def test_collective_args_carry_group_path_bound_and_efficiency(analysis):
    # GIVEN measured collectives WHEN exported THEN their args hold tracekit's verdict
    data = _load(analysis)
    comm = [e for e in data["traceEvents"] if e["ph"] == "X" and "bound_ns" in e["args"]]
    assert len(comm) == analysis.measured.num_rows
    ev = next(e for e in comm if e["args"]["path"] == "deepep.normal.dispatch")
    assert ev["args"]["group"] == "MOE_EP" and 0 < ev["args"]["efficiency"] <= 1
    assert isinstance(ev["args"]["layer"], int) and isinstance(ev["args"]["wait_ns"], int)


def test_processes_threads_phase_and_finding_tracks_are_named(analysis):
    # GIVEN 8 ranks WHEN exported THEN each rank is a named process with named threads, phase
    # tracks and a findings track with instant events
    events = _load(analysis)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert procs == {r: f"rank {r}" for r in range(8)}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "i")}
    assert used <= set(threads)  # every track is named
    assert "tracekit phase: dispatch" in threads.values()
    phases = [e for e in events if e.get("cat") == "tracekit.phase"]
    assert {e["name"] for e in phases} >= {"attention_reduce", "dispatch", "combine"}
    found = [e for e in events if e["ph"] == "i"]
    assert {e["args"]["rule_id"] for e in found} == {"a2a-imbalance", "straggler",
                                                      "unattributed-comm"}


def test_slices_on_a_phase_track_do_not_overlap(analysis):
    # GIVEN phase tracks WHEN exported THEN slices on one track are disjoint (viewers drop
    # improperly nested slices)
    events = _load(analysis)["traceEvents"]
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") == "tracekit.phase":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_events_only_export_and_hostile_names(make_analysis):
    # GIVEN EVENTS only, and a run with a script as kernel name
    bare = json.loads(reports.render("perfetto", make_analysis(only_events=True)))
    assert sum(e["ph"] == "X" for e in bare["traceEvents"]) == 208
    out = reports.render("perfetto", make_analysis(evil="<script>alert(1)</script>\"\\"))
    # WHEN exported THEN valid JSON that keeps the name exactly
    names = {e["name"] for e in json.loads(out)["traceEvents"]}
    assert "<script>alert(1)</script>\"\\" in names
