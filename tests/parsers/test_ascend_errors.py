"""Malformed Ascend exports get one-line BadInputErrors that name the file (as Kineto input).

Each case breaks one documented fact of TRACE_FORMATS.md Part B in an export written by
tests/fixtures/make_ascend.py.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import fixtures.make_ascend as mk  # tests/ is on pytest's pythonpath (pyproject)
import pytest

from tracekit import api
from tracekit.errors import BadInputError
from tracekit.parsers import ascend, load_run

OUT = "ASCEND_PROFILER_OUTPUT"


def _empty_output(rdir: Path) -> None:
    for p in (rdir / OUT).iterdir():
        p.unlink()


def _truncate(path: Path, keep: float = 0.6) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _kernel_details_only(rdir: Path) -> None:
    for name in ("trace_view.json", "communication.json", "communication_matrix.json"):
        (rdir / OUT / name).unlink()


def _cut_csv(rdir: Path) -> None:
    _kernel_details_only(rdir)
    path = rdir / OUT / "kernel_details.csv"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 30])  # the copy stopped inside the last row


def _db_without_tables(rdir: Path) -> None:
    _kernel_details_only(rdir)
    with sqlite3.connect(rdir / OUT / "ascend_pytorch_profiler_0.db") as con:
        con.execute("CREATE TABLE NPU_INFO (id INTEGER, name TEXT)")


def _not_a_db(rdir: Path) -> None:
    (rdir / OUT / "ascend_pytorch_profiler_0.db").write_bytes(b"this is not SQLite " * 64)


def _bad_group_info(rdir: Path) -> None:
    (rdir / "profiler_metadata.json").write_text(
        json.dumps({"parallel_group_info": {"c": {"group_name": "tp", "global_ranks": "0,1"}}}))


CASES: list[tuple[str, Callable[[Path], object], str, str]] = [
    # (case, how to break rank 0, file named in the message, words in the message)
    ("no timeline files", lambda d: _empty_output(d),
     "_ascend_pt", "no trace_view.json, kernel_details.csv"),
    ("truncated trace_view", lambda d: _truncate(d / OUT / "trace_view.json"),
     "trace_view.json", "invalid JSON"),
    ("object where an array belongs",
     lambda d: (d / OUT / "trace_view.json").write_text('{"traceEvents": []}'),
     "trace_view.json", "expected a JSON array of trace events, got a JSON object"),
    ("empty trace_view", lambda d: (d / OUT / "trace_view.json").write_text(""),
     "trace_view.json", "empty file"),
    ("truncated kernel_details.csv", _cut_csv, "kernel_details.csv", "truncated"),
    ("communication.json is an array",
     lambda d: (d / OUT / "communication.json").write_text("[]"),
     "communication.json", "expected a JSON object keyed by step, got a JSON array"),
    ("truncated communication.json", lambda d: _truncate(d / OUT / "communication.json"),
     "communication.json", "invalid JSON"),
    ("db without the tables", _db_without_tables, "ascend_pytorch_profiler_0.db",
     "without table(s) STRING_IDS, COMMUNICATION_OP or TASK"),
    ("file that is not SQLite", _not_a_db, "ascend_pytorch_profiler_0.db",
     "not a readable SQLite database"),
    ("profiler_info is an array", lambda d: (d / "profiler_info_0.json").write_text("[1]"),
     "profiler_info_0.json", "expected a JSON object (profiler_info), got a JSON array"),
    ("malformed parallel_group_info", _bad_group_info, "profiler_metadata.json",
     "global_ranks is not a list of integers"),
]


@pytest.mark.parametrize(("case", "breaker", "where", "words"), CASES, ids=[c[0] for c in CASES])
def test_malformed_export_one_line_error(
    tmp_path: Path, case: str, breaker: Callable[[Path], object], where: str, words: str
) -> None:
    # GIVEN a 2-rank export whose rank 0 is broken in one documented way
    truth = mk.write_export(tmp_path, world=2, export="text")
    breaker(truth.rank_dirs[0])
    # WHEN loaded with the default policy
    with pytest.raises(BadInputError) as info:
        load_run(tmp_path, api.LoadOptions())
    # THEN one line that names the broken file and the problem, nothing else
    text = str(info.value)
    assert "\n" not in text
    assert info.value.path is not None and where in Path(info.value.path).name + info.value.path
    assert words in info.value.message, text


def test_skip_policy_keeps_the_good_ranks(tmp_path: Path) -> None:
    # GIVEN rank 1 of a 2-rank export with a cut trace_view.json
    truth = mk.write_export(tmp_path, world=2, export="text")
    _truncate(truth.rank_dirs[1] / OUT / "trace_view.json")
    # WHEN loaded with on_error="skip"
    run = load_run(tmp_path, api.LoadOptions(on_error="skip"))
    # THEN rank 0 is there and the skipped file is reported with its reason
    assert run.ranks == [0]
    assert len(run.skipped) == 1 and run.skipped[0][0].endswith("trace_view.json")


def test_rank_must_be_known(tmp_path: Path) -> None:
    """B.2: the rank comes from profiler_info_{rank}.json; without it a single directory needs
    LoadOptions.rank."""
    truth = mk.write_export(tmp_path, world=1, export="text")
    (truth.rank_dirs[0] / "profiler_info_0.json").unlink()
    with pytest.raises(BadInputError, match="cannot tell the rank"):
        load_run(tmp_path, api.LoadOptions())
    assert load_run(tmp_path, api.LoadOptions(rank=5)).ranks == [5]


def test_duplicate_ranks_are_an_error(tmp_path: Path) -> None:
    truth = mk.write_export(tmp_path, world=2, export="text")
    info = truth.rank_dirs[1] / "profiler_info_1.json"
    info.write_text(info.read_text().replace('"rank_id": 1', '"rank_id": 0'))
    with pytest.raises(BadInputError, match="rank 0 appears twice"):
        load_run(tmp_path, api.LoadOptions())


def test_not_an_export(tmp_path: Path) -> None:
    # GIVEN an empty folder THEN the Ascend format finds no rank in it
    assert not ascend.sniff(tmp_path)
    with pytest.raises(BadInputError, match="not an Ascend export"):
        ascend.rank_inputs(tmp_path, api.LoadOptions())
    # AND the driver, which sniffs the formats, says there is no trace of either kind
    with pytest.raises(BadInputError, match="Kineto traces, or an Ascend"):
        load_run(tmp_path, api.LoadOptions())


def test_cli_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI contract for bad input: `tracekit: error: FILE: problem`, exit 2, no traceback."""
    from tracekit.cli import main

    # GIVEN an export whose trace_view.json holds an object instead of the event array (B.7)
    truth = mk.write_export(tmp_path, world=2, export="text")
    bad = truth.rank_dirs[1] / OUT / "trace_view.json"
    bad.write_text('{"traceEvents": []}')
    # WHEN analyzed from the command line
    with pytest.raises(SystemExit) as done:
        main(["analyze", str(tmp_path)])
    # THEN exit code 2 and exactly one line naming the file
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"tracekit: error: {bad}: ")


def test_any_cut_or_mistyped_field_is_a_bad_input(tmp_path: Path) -> None:
    """B.7 robustness: every prefix of a trace_view.json and every wrongly typed field either
    loads or raises BadInputError, never another exception."""
    from tracekit.parsers.ascend.trace_view import read_trace_view

    # GIVEN a small generated trace_view.json
    truth = mk.write_export(tmp_path / "src", world=1, moe="fuseep", export="text")
    data = (truth.rank_dirs[0] / OUT / "trace_view.json").read_bytes()
    target = tmp_path / "trace_view.json"
    events = json.loads(data)
    first_x = next(i for i, e in enumerate(events) if e.get("ph") == "X")
    mutants = [
        {**events[first_x], "ts": [1]}, {**events[first_x], "ts": {"a": 1}},
        {**events[first_x], "dur": "soon"}, {**events[first_x], "args": "x"},
        {**events[first_x], "pid": 1.5}, {**events[first_x], "name": 7}, "not an event",
    ]
    outcomes: list[str] = []
    # WHEN it is cut at every 37th byte, or one event's field gets a wrong type
    cases = [data[:cut] for cut in range(0, len(data), 37)]
    cases += [json.dumps([*events[:first_x], m, *events[first_x + 1:]]).encode()
              for m in mutants]
    for raw in cases:
        target.write_bytes(raw)
        try:
            read_trace_view(target)
            outcomes.append("ok")
        except BadInputError as exc:
            assert "\n" not in str(exc)
            outcomes.append("bad")
    # THEN no other exception escaped, the cuts and the mutants were all refused
    assert outcomes.count("bad") == len(cases)


def test_worker_processes_give_the_same_run_and_errors(tmp_path: Path) -> None:
    """Rank directories parsed in worker processes (jobs=2) give the inline result, and a bad
    rank's one-line error comes back from the worker unchanged."""
    # GIVEN a 3-rank export whose rank 2 has a cut trace_view.json
    truth = mk.write_export(tmp_path, world=3, export="text")
    _truncate(truth.rank_dirs[2] / OUT / "trace_view.json")
    # WHEN loaded inline and with two workers, skipping the bad rank
    inline = load_run(tmp_path, api.LoadOptions(jobs=1, on_error="skip"))
    pooled = load_run(tmp_path, api.LoadOptions(jobs=2, on_error="skip"))
    # THEN the tables and the skip report are identical
    assert pooled.events.equals(inline.events)
    assert pooled.process_groups.equals(inline.process_groups)
    assert pooled.skipped == inline.skipped and len(pooled.skipped) == 1
    # and with the default policy the worker's error is raised here, one line
    with pytest.raises(BadInputError, match="invalid JSON") as info:
        load_run(tmp_path, api.LoadOptions(jobs=2))
    assert "\n" not in str(info.value)
