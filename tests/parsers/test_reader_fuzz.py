"""Property-based fuzzing of every reader (hypothesis, bounded: few examples, no deadline).

The property is the README's promise for bad input: a reader either returns its tables or
raises the project's one-line error (BadInputError for traces and exports, ConfigError for
options files); nothing else escapes (no OverflowError, RecursionError, ArrowInvalid...).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bad_inputs.hostile import COMM, EV, trace_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.errors import BadInputError, ConfigError, TracekitError
from tracekit.parsers.ascend.io import load_json, text_to_ns
from tracekit.parsers.ascend.kernels import read_kernel_details
from tracekit.parsers.ascend.meta import parse_group_info
from tracekit.parsers.ascend.trace_view import read_trace_view
from tracekit.parsers.kineto import load_kineto_file

FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# numbers at and beyond every edge a reader converts to: int32, int64, float, ns of us
EDGE_INTS = st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**70,
                             10**400, 9_223_372_036_854_775, 9_223_372_036_854_776])
NUMBERS = st.one_of(EDGE_INTS, st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e300, -1e300, 1e-300, 2.0**53 + 1]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
KEYS = st.sampled_from(["ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "id"])
ARG_KEYS = st.sampled_from(["External id", "Collective name", "In msg nelems", "Out msg nelems",
                            "Group size", "Process Group Name", "Process Group Ranks", "dtype",
                            "Input Dims", "correlation", "Python id", "Python parent id"])


def _expect(errors: tuple[type[Exception], ...], func: Callable[[], Any]) -> None:
    with contextlib.suppress(errors):
        func()


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _loads(path: Path) -> None:
    _expect((BadInputError,), lambda: load_kineto_file(path, rank=0))


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    ev: dict[str, Any] = dict(draw(st.sampled_from([EV, COMM])))
    for key in draw(st.lists(KEYS, max_size=3)):
        ev[key] = draw(VALUES)
    if draw(st.booleans()):
        args = dict(ev.get("args") or {}) if isinstance(ev.get("args"), dict) else {}
        for key in draw(st.lists(ARG_KEYS, max_size=3)):
            args[key] = draw(VALUES)
        ev["args"] = args
    return ev


@FUZZ
@given(evs=st.lists(events(), min_size=1, max_size=4), dist=VALUES, base=VALUES)
def test_kineto_events_of_any_shape(folder: Path, evs: list[dict[str, Any]], dist: Any,
                                    base: Any) -> None:
    p = folder / "fuzz.json"
    doc = {"distributedInfo": {"rank": 0, "world_size": dist, "pg_config": [
        {"pg_name": "0", "ranks": dist, "pg_size": dist}]}, "baseTimeNanoseconds": base,
        "traceEvents": evs}
    p.write_text(json.dumps(doc, allow_nan=False))
    _loads(p)


_GOOD = trace_text([EV, COMM, dict(EV, ts=9.5)]).encode()


@FUZZ
@given(cuts=st.lists(st.tuples(st.integers(0, len(_GOOD) - 1), st.binary(max_size=4)),
                     min_size=1, max_size=4), gz=st.booleans())
def test_kineto_bytes_mutated(folder: Path, cuts: list[tuple[int, bytes]], gz: bool) -> None:
    data = bytearray(_GOOD)
    for pos, text in cuts:
        data[pos:pos + len(text)] = text
    blob = gzip.compress(bytes(data), mtime=0) if gz else bytes(data)
    if gz and cuts[0][0] % 3 == 0:  # damage the compressed stream too
        blob = blob[: max(10, cuts[0][0] % len(blob))]
    p = folder / ("fuzz.json.gz" if gz else "fuzz.json")
    p.write_bytes(blob)
    _loads(p)


# ------------------------------------------------------------------ options files


def _options_readers() -> list[Callable[[Path], Any]]:
    from tracekit.measure.hardware import read_profile
    from tracekit.reports.json import read as read_report
    from tracekit.rules.loader import load_file
    from tracekit.topology.config import config_from_file

    return [read_profile, config_from_file, load_file, read_report]


YAMLISH = st.one_of(
    st.binary(max_size=64),
    st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>#'\" \n\t,0123456789e.")), max_size=80)
    .map(str.encode),
    VALUES.map(lambda v: json.dumps(v).encode()),
)


@FUZZ
@given(data=YAMLISH, suffix=st.sampled_from([".yaml", ".json"]))
def test_options_files_of_any_text(folder: Path, data: bytes, suffix: str) -> None:
    p = folder / f"options{suffix}"
    p.write_bytes(data)
    for read in _options_readers():
        _expect((ConfigError, BadInputError), lambda read=read: read(p))  # type: ignore[misc]


# ------------------------------------------------------------------ Ascend exports


@FUZZ
@given(texts=st.lists(st.one_of(st.text(max_size=30), NUMBERS.map(str), st.none()),
                      min_size=1, max_size=6))
def test_ascend_decimal_text_never_overflows(texts: list[str | None]) -> None:
    import pyarrow as pa

    out = text_to_ns(pa.array(texts, pa.string()))
    assert out.type == pa.int64() and len(out) == len(texts)


@FUZZ
@given(doc=VALUES)
def test_ascend_group_info_of_any_shape(doc: Any) -> None:
    _expect((BadInputError,), lambda: parse_group_info(doc, Path("profiler_metadata.json")))
    _expect((BadInputError,), lambda: parse_group_info({"c": doc}, Path("m.json")))


@FUZZ
@given(evs=st.lists(st.dictionaries(KEYS, VALUES, max_size=6), max_size=4),
       raw=st.binary(max_size=40), as_raw=st.booleans())
def test_ascend_json_files_of_any_shape(folder: Path, evs: list[dict[str, Any]], raw: bytes,
                                        as_raw: bool) -> None:
    p = folder / "trace_view.json"
    p.write_bytes(raw if as_raw else json.dumps(evs, allow_nan=False).encode())
    _expect((BadInputError,), lambda: read_trace_view(p))
    _expect((BadInputError,), lambda: load_json(p, dict, "a JSON object"))


_KD_HEADER = ["Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core",
              "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim"]


@FUZZ
@given(rows=st.lists(st.lists(st.one_of(st.text(max_size=10), NUMBERS.map(str)),
                              min_size=0, max_size=len(_KD_HEADER) + 1), max_size=4),
       drop=st.sets(st.sampled_from(_KD_HEADER), max_size=2))
def test_ascend_kernel_details_of_any_cells(folder: Path, rows: list[list[str]],
                                            drop: set[str]) -> None:
    header = [h for h in _KD_HEADER if h not in drop]
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *rows])
    p = folder / "kernel_details.csv"
    p.write_text(buf.getvalue())
    _expect((BadInputError,), lambda: read_kernel_details(p))


DB_VALUES = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                      st.text(max_size=8), st.binary(max_size=4))


@FUZZ
@given(values=st.lists(st.tuples(*[DB_VALUES] * 7), max_size=3))
def test_ascend_db_of_any_cell_types(folder: Path,
                                     values: list[tuple[Any, ...]]) -> None:
    from tracekit.parsers.ascend.db import read_db

    p = folder / "ascend_pytorch_profiler_0.db"
    p.unlink(missing_ok=True)
    con = sqlite3.connect(p)
    con.executescript(
        "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);"
        "INSERT INTO STRING_IDS VALUES (1, 'hcom_allReduce__1'), (2, 'group');"
        "CREATE TABLE COMMUNICATION_OP (opName, startNs, endNs, connectionId, groupName,"
        " dataType, count);"
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER,"
        " connectionId INTEGER, globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER,"
        " contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);")
    con.executemany("INSERT INTO COMMUNICATION_OP VALUES (?, ?, ?, ?, ?, ?, ?)", values)
    con.commit()
    con.close()
    _expect((BadInputError,), lambda: read_db(p))


def test_the_fuzzers_raise_only_the_projects_errors() -> None:
    # the property itself: an error outside TracekitError must escape _expect
    with pytest.raises(OverflowError):
        _expect((TracekitError,), lambda: int(float("inf")))
