"""A metadata event (ph M) without ts is read (the Chrome trace-event format makes ts
optional on M events: "Metadata events ... ts is not required"), by both readers: the
native accumulator (tracekit.parsers.native) and msgspec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import load_kineto_file, native
from tracekit.parsers.kineto.native_reader import read_whole
from tracekit.parsers.kineto.parse import _meta

DIST = {"backend": "nccl", "rank": 0, "world_size": 1}


def _events(with_ts: bool) -> list[dict[str, Any]]:
    meta = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
            {"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0,
             "args": {"sort_index": 1}}]
    if with_ts:
        meta = [{**m, "ts": 0} for m in meta]
    timed = [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
              "pid": 0, "tid": 7, "ts": 10.5, "dur": 3.0, "args": {"correlation": 1}},
             {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5.0,
              "dur": 1.0, "args": {}}]
    return meta + timed


def _same(a: Any, b: Any) -> bool:
    """EVENTS equal but for the source file's name."""
    return bool(a.drop_columns([S.SOURCE]).equals(b.drop_columns([S.SOURCE])))


def _write(path: Path, with_ts: bool) -> Path:
    doc = {"schemaVersion": 1, "distributedInfo": DIST, "traceEvents": _events(with_ts)}
    path.write_text(json.dumps(doc))
    return path


def test_metadata_without_ts_reads_as_with_ts(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same trace with and without ts on its metadata events
    bare, timed = _write(tmp_path / "bare.json", False), _write(tmp_path / "ts.json", True)
    # WHEN read by msgspec (the native reader off)
    monkeypatch.setenv("TRACEKIT_NATIVE", "0")
    got, want = load_kineto_file(bare), load_kineto_file(timed)
    assert (got.events.schema.metadata or {}).get(S.READER_KEY.encode()) == b"msgspec"
    # THEN no error, and the tables equal those of the trace with ts
    assert got.events.num_rows == 2
    assert _same(got.events, want.events)
    assert _same(got.rank_info, want.rank_info)


@pytest.mark.skipif(native.accumulator() is None,
                    reason="native accumulator unavailable (no C compiler, or TRACEKIT_NATIVE=0)")
def test_metadata_without_ts_is_read_whole(tmp_path: Path) -> None:
    # GIVEN a trace whose metadata events have no ts WHEN read by the whole-file accumulator
    bare = _write(tmp_path / "bare.json", False)
    raw = read_whole(bare, _meta)
    # THEN it takes the file, and the parse equals that of the same trace with ts
    assert raw is not None and raw.n_events == 5
    timed = _write(tmp_path / "ts.json", True)
    got = load_kineto_file(bare).events
    assert (got.schema.metadata or {}).get(S.READER_KEY.encode()) == b"native"
    assert _same(got, load_kineto_file(timed).events)
