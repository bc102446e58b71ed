"""The hostile-input corpus (tests/bad_inputs/hostile.py) through the real CLI, issue 16.

Each case runs the CLI (``python -m tracekit ...``'s entry) in a child process on inputs built
in tmp_path and must give exit 2, exactly one stderr line ``tracekit: error: FILE: ...``
naming the file, no traceback, stay under its wall-time and peak-RSS ceilings (bombs below
1 GB), and leave every input file as it was (hashes before and after). The big cases
(gigabytes of NULs, bombs, 300 MB strings) are marked slow; they still run in `make test`,
each in a fresh interpreter (their peak RSS is the question). The small ones fork from one
launcher that has the CLI imported (tests/bad_inputs/runner.py), and a sample of them, one
per family and outcome, runs both ways and must give the same exit code and output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_inputs.hostile import CASES, COMM, EV, Case, trace_text
from bad_inputs.runner import REPO, Launcher, Result, run_case

from tracekit import api
from tracekit import schema as S

pytestmark = pytest.mark.timeout(300)


def _param(case: Case) -> object:
    marks = [pytest.mark.slow] if case.slow else []
    return pytest.param(case, id=f"{case.family}/{case.name}", marks=marks)


@pytest.fixture(scope="session")
def launcher() -> Iterator[Launcher]:
    """One forking launcher per test process (each xdist worker starts its own)."""
    server = Launcher()
    yield server
    server.close()


def test_every_family_of_the_issue_is_in_the_corpus() -> None:
    families = {c.family for c in CASES}
    assert {"kineto-numbers", "kineto-structure", "kineto-files", "gzip", "ascend-text",
            "ascend-db", "options-hardware", "options-config", "options-rules",
            "options-baseline"} <= families
    assert len({(c.family, c.name) for c in CASES}) == len(CASES)
    assert all(c.rss_mb < 1024 for c in CASES)


def _check(case: Case, res: Result) -> None:
    # THEN no traceback, within time and memory, and nothing it read was changed
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert not res.killed, f"killed: {res.killed}"
    assert res.wall_s <= case.wall_s, f"{res.wall_s:.1f} s"
    assert res.rss_mb <= case.rss_mb, f"{res.rss_mb:.0f} MB peak RSS"
    assert res.hashes_after == res.hashes_before
    assert res.rc == case.rc, res.stderr
    if case.rc == 0:
        return
    # and exactly one line that names the file and the problem
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"tracekit: error: {res.named}: "), lines[0]
    assert case.expect.lower() in lines[0].lower(), lines[0]
    assert res.stdout == ""


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path, launcher: Launcher) -> None:
    # GIVEN a hostile input WHEN the CLI reads it (a big case in a fresh interpreter)
    _check(case, run_case(case, tmp_path, None if case.slow else launcher))


def _sample() -> list[Case]:
    """The first small case of each family and outcome (exit 2, exit 0)."""
    seen: dict[tuple[str, int], Case] = {}
    for case in CASES:
        if not case.slow:
            seen.setdefault((case.family, case.rc), case)
    return list(seen.values())


@pytest.mark.parametrize("case", [_param(c) for c in _sample()])
def test_a_fresh_interpreter_gives_what_the_forked_child_gave(
        case: Case, tmp_path: Path, launcher: Launcher) -> None:
    # GIVEN a small case WHEN run by `python -c` afresh and forked from the launcher
    runs = {}
    for how, server in (("fresh", None), ("forked", launcher)):
        (tmp_path / how).mkdir()
        res = run_case(case, tmp_path / how, server)
        _check(case, res)
        where = str(tmp_path / how)
        runs[how] = (res.rc, res.stdout.replace(where, "T"), res.stderr.replace(where, "T"))
    # THEN the same exit code, stdout and stderr
    assert runs["fresh"] == runs["forked"]


# ------------------------------------------------------------------ null where allowed


def _load(tmp_path: Path, text: str) -> api.Run:
    p = tmp_path / "t.json"
    p.write_text(text)
    return api.load(p, api.LoadOptions(jobs=1))


def test_ids_beyond_int64_are_null(tmp_path: Path) -> None:
    text = trace_text([dict(EV, pid="@P", args={"External id": "@E"})])
    text = text.replace('"@P"', str(2**70)).replace('"@E"', "1" * 30)
    events = _load(tmp_path, text).events.to_pylist()
    assert events[0][S.PID] is None
    assert events[0][S.EXTERNAL_ID] is None


def test_comm_counts_beyond_int64_are_null(tmp_path: Path) -> None:
    text = trace_text([COMM]).replace('"In msg nelems": 1024', '"In msg nelems": ' + str(2**70))
    text = text.replace('"Group size": 2', '"Group size": 1e400')
    run = _load(tmp_path, text)
    row = run.events.to_pylist()[0]
    assert row[S.GROUP_SIZE] in (None, 2)  # 1e400 unread; 2 is the ranks list's length
    assert row[S.IN_NELEMS] is None
    assert row[S.OUT_NELEMS] == 1024
    assert row[S.DUR_NS] == 3000


def test_base_time_of_the_wrong_type_is_null(tmp_path: Path) -> None:
    run = _load(tmp_path, trace_text(baseTimeNanoseconds="soon"))
    assert run.rank_info.to_pylist()[0][S.BASE_TIME_NS] is None


def test_group_ranks_beyond_int32_are_null(tmp_path: Path) -> None:
    dist = {"rank": 0, "pg_config": [{"pg_name": "0", "ranks": [0, 2**40]}]}
    run = _load(tmp_path, trace_text(dist=dist))
    assert run.process_groups.to_pylist()[0][S.PG_RANKS] is None


# ------------------------------------------------------------------ the C and Python readers


_PROBE = """
import sys
from pathlib import Path
from tracekit.parsers.kineto import load_kineto_file
from tracekit.errors import BadInputError
for name in sys.argv[1:]:
    try:
        t = load_kineto_file(Path(name), rank=0)
        print(t.events.column("ts_ns").to_pylist(), t.events.column("dur_ns").to_pylist())
    except BadInputError as exc:
        print("error", exc.one_line().split(": ", 1)[1])
"""
EDGE_LITERALS = [
    "9223372036854775", "9223372036854776", "-9223372036854775", "-9223372036854776",
    "9223372036854775.807", "9223372036854775.808", "1e400", "1" + "0" * 400, "2.5e15",
]


@pytest.fixture(scope="module")
def edge_readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """What the native accumulator and the Python readers (TRACEKIT_NATIVE=0) read from a
    trace whose ts is each literal: one child process per reader reads every file."""
    folder = tmp_path_factory.mktemp("int64_edge")
    paths = []
    for i, literal in enumerate(EDGE_LITERALS):
        p = folder / f"edge{i}.json"
        p.write_text(trace_text([dict(EV, ts="@@")]).replace('"@@"', literal))
        paths.append(str(p))
    lines = []
    for native in ("1", "0"):
        env = dict(os.environ, PYTHONPATH=str(REPO), TRACEKIT_NATIVE=native)
        res = subprocess.run([sys.executable, "-c", _PROBE, *paths], env=env,
                             capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
        lines.append(res.stdout.strip().splitlines())
        assert len(lines[-1]) == len(paths), res.stdout
    return {lit: [lines[0][i], lines[1][i]] for i, lit in enumerate(EDGE_LITERALS)}


@pytest.mark.parametrize("literal", EDGE_LITERALS)
def test_native_and_python_readers_agree_at_the_int64_edge(
        literal: str, edge_readings: dict[str, list[str]]) -> None:
    # GIVEN a ts at the edge of int64 nanoseconds; the native accumulator and the Python
    # readers (TRACEKIT_NATIVE=0) must give the same ns or the same error
    out = edge_readings[literal]
    assert out[0] == out[1]
    value = int(literal.split(".")[0]) * 1000 if "e" not in literal else None
    if value is not None and -(1 << 63) <= value < (1 << 63) and "." not in literal:
        assert out[0].startswith(f"[{value}]"), out[0]
    if (value is None and literal != "2.5e15") or (value is not None and abs(value) >= 1 << 63):
        assert out[0].startswith("error event 0: ts") and "out of range" in out[0], out[0]
