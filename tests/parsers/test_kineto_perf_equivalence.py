"""The native reader and the msgspec reader give the same EVENTS, or the same error, on tricky
inputs; what the native reader does not handle itself it hands to msgspec (per block)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.kineto import load_kineto_file
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto import read as kineto_read
from tracekit.parsers.kineto.native_reader import read_whole
from tracekit.parsers.kineto.parse import _meta

pytestmark = pytest.mark.skipif(
    kineto_native.accumulator() is None,
    reason="native reader unavailable (extension not built, or TRACEKIT_NATIVE=0)")

DIST = {"backend": "nccl", "rank": 0, "world_size": 2, "pg_config": [
    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2,
     "ranks": [0, 1]}]}
RPC = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
       "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "0",
       "Process Group Ranks": "[0, 1]", "Comms Id": 15713395392463084690}


def ev(name: str, cat: str, ts: Any, dur: Any = 1.0, ph: str = "X", **args: Any) -> dict:
    return {"ph": ph, "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def write(path: Path, body: str) -> Path:
    path.write_text('{"schemaVersion": 1, "distributedInfo": ' + json.dumps(DIST)
                    + ', "traceEvents": [' + body + "]}")
    return path


def body(events: list[dict]) -> str:
    return ",\n".join(json.dumps(e) for e in events)


def base_events() -> list[dict]:
    """A plain trace: cpu ops, a comm op and its kernel, python frames, a c10d op with
    shapes, thread names, a flow."""
    return [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0,
         "args": {"name": "thread 1 (python)"}},
        ev("python/x.py(10): f", "python_function", 99.5, 30.0, **{"Python id": 1,
                                                                  "Python parent id": 0}),
        ev("c10d::allreduce_", "cpu_op", 100.25, 20.0, **{
            "External id": 7, "Input Dims": [[1024], []], "Input type": ["BFloat16", ""],
            "Concrete Inputs": ["", ""]}),
        ev("record_param_comms", "cpu_op", 101.125, 10.0, **{"External id": 8, **RPC}),
        ev("cudaLaunchKernel", "cuda_runtime", 102.0, 1.0, correlation=5,
           **{"External id": 8}),
        {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 102.0, "cat": "ac2g", "name": "ac2g"},
        {**ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", "kernel", 150.5, 9.5,
              correlation=5, **{"External id": 8, "grid": [1, 1, 1], "blocks per SM": 0.5}),
         "pid": 0, "tid": 7},
    ]


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(native result, msgspec result): RankTables, or the error message."""
    out = []
    for flag in ("1", "0"):
        monkeypatch.setenv("TRACEKIT_NATIVE", flag)
        try:
            out.append(load_kineto_file(path))
        except BadInputError as exc:
            out.append(str(exc))
    return out[0], out[1]


def assert_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    native, safe = both(path, monkeypatch)
    if isinstance(safe, str) or isinstance(native, str):
        assert native == safe
        return native
    assert native.events.equals(safe.events)
    assert native.process_groups.equals(safe.process_groups)
    assert native.rank_info.equals(safe.rank_info)
    return native


def test_a_plain_trace_goes_through_the_native_reader_and_matches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a plain Kineto trace
    events = base_events()
    path = write(tmp_path / "t.json", body(events))
    # WHEN the native reader reads it THEN it reads every block itself
    raw = read_whole(path, _meta)
    assert raw is not None and raw.reader == "native" and raw.n_events == len(events)
    assert raw.comm is not None and raw.comm.num_rows == 1
    assert [t[2] for t in raw.threads] == ["thread 1 (python)"]
    # AND the whole file parses to the same tables both ways, with the comm metadata
    tables = assert_same(path, monkeypatch)
    kernel = [r for r in tables.events.to_pylist() if r[S.NAME].startswith("nccl")]
    assert kernel[0][S.IN_NELEMS] == 1024 and kernel[0][S.COMMS_ID] == 15713395392463084690
    assert tables.events.schema.metadata[S.READER_KEY.encode()] == b"native"


TRICKY = {
    "more_than_three_decimals": [ev("a", "cpu_op", 1.0005), ev("b", "cpu_op", 2.12345678)],
    "exponent_and_ints": [ev("a", "cpu_op", 1e3, 2), ev("b", "cpu_op", 12, 1.5E-1)],
    "all_int_times": [ev("a", "cpu_op", 1712195495520871, 3), ev("b", "cpu_op", 5, 0)],
    "epoch_floats_beyond_2_43": [ev("a", "cpu_op", 1712195495520871.123, 0.5)],
    "negative_times": [ev("a", "cpu_op", -5.25, 1.0), ev("b", "cpu_op", -0.0, 0)],
    "null_dur_on_instant": [ev("a", "cpu_op", 1.0, None, ph="i")],
    "missing_dur_on_x": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,
                          "ts": 1.0}],
    "missing_ph": [{"cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1}],
    "string_pid_trailer": [ev("a", "cpu_op", 1.0), {"ph": "M", "name": "process_name",
                                                     "pid": "", "tid": 0, "ts": 0,
                                                     "args": {"name": "x"}}],
    "string_tid_on_thread_name": [ev("a", "cpu_op", 1.0), {
        "ph": "M", "name": "thread_name", "pid": 1, "tid": "7", "ts": 0,
        "args": {"name": "gloo"}}],
    "args_null": [{**ev("a", "cpu_op", 1.0), "args": None}],
    "no_args": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.0,
                 "dur": 1.0}],
    "id_as_string": [ev("a", "cpu_op", 1.0, **{"External id": "12"})],
    "id_as_float": [ev("a", "cpu_op", 1.0, correlation=3.0)],
    "id_beyond_int64": [ev("a", "cpu_op", 1.0, correlation=2 ** 70)],
    "group_size_as_string": [ev("record_param_comms", "cpu_op", 1.0,
                                **{**RPC, "Group size": "2"})],
    "pg_name_as_int": [ev("record_param_comms", "cpu_op", 1.0,
                          **{**RPC, "Process Group Name": 0})],
    "comm_keys_on_a_python_frame": [ev("f", "python_function", 1.0, **RPC)],
    "null_collective_name": [ev("record_param_comms", "cpu_op", 1.0,
                                **{"Collective name": None, "In msg nelems": None})],
    "non_ascii_name": [ev("naïve", "cpu_op", 1.0), ev("b", "cpu_op", 2.0)],
    "escaped_name": [ev('quote " and \\ backslash', "cpu_op", 1.0)],
    "bool_ts": [ev("a", "cpu_op", True)],
    "string_ts": [ev("a", "cpu_op", "1.5")],
    "nested_unknown_values": [ev("a", "cpu_op", 1.0, deep={"x": [1, {"y": [None, True]}]},
                                 big=123456789012345678901234567890)],
    "shapes_without_args": [ev("c10d::broadcast_", "cpu_op", 1.0)],
}


@pytest.mark.parametrize("case", sorted(TRICKY))
def test_tricky_events_give_the_same_result_both_ways(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    # GIVEN a trace with a tricky event among plain ones
    path = write(tmp_path / "t.json", body(base_events() + TRICKY[case]))
    # WHEN parsed with and without the scanner THEN tables (or error messages) are equal
    assert_same(path, monkeypatch)


RAW = {
    "duplicate_key": '{"ph": "X", "ph": "i", "cat": "cpu_op", "name": "a", "pid": 1, '
                     '"tid": 1, "ts": 1.0, "dur": 1.0}',
    "leading_zero": '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
                    '"ts": 01.0, "dur": 1.0}',
    "nan": '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": NaN, '
           '"dur": 1.0}',
    "unicode_escape": '{"ph": "X", "cat": "cpu_op", "name": "caf\\u00e9", "pid": 1, '
                      '"tid": 1, "ts": 1.0, "dur": 1.0}',
    "trailing_comma": '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
                      '"ts": 1.0, "dur": 1.0,}',
    "long_float": '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
                  '"ts": 1.00000000000000000000000000000000000000000000000000000000000000001,'
                  ' "dur": 1.0}',
    "spaces_everywhere": ' {  "ph" :  "X" , "cat":"cpu_op","name" : "a" ,"pid": 1,"tid":1 '
                         ', "ts" : 17.5 , "dur" : 1 , "args" : { "External id" : 4 } } ',
}


@pytest.mark.parametrize("case", sorted(RAW))
def test_raw_json_oddities_give_the_same_result_both_ways(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    # GIVEN hand-written JSON text the scanner may or may not accept
    path = write(tmp_path / "t.json", body(base_events()) + ",\n" + RAW[case])
    # WHEN parsed both ways THEN the results are equal
    assert_same(path, monkeypatch)


def test_many_pieces_with_false_boundaries_match(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a trace read in tiny pieces whose names hold "},{" (false boundaries)
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 256)
    events = [ev(f"op }},{{ {i}", "cpu_op", 10.0 + i, 0.5, **{"External id": i})
              for i in range(120)] + base_events()
    path = write(tmp_path / "t.json", body(events))
    # WHEN parsed both ways THEN the tables are equal
    assert_same(path, monkeypatch)


def test_the_native_reader_can_be_switched_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN TRACEKIT_NATIVE=0
    monkeypatch.setenv("TRACEKIT_NATIVE", "0")
    # WHEN a plain trace is read THEN msgspec reads it, and EVENTS says so
    assert kineto_native.accumulator() is None
    tables = load_kineto_file(write(tmp_path / "t.json", body(base_events())))
    assert tables.events.schema.metadata[S.READER_KEY.encode()] == b"msgspec"
