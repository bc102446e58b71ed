"""The native reader (kineto_native_reader) gives the tables of the msgspec reader: the blocks it
declines are decoded by msgspec in their place, and what a block cannot settle gives the file
up to msgspec: never a different result."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.kineto import load_kineto_file
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto import native_reader as kineto_native_reader
from tracekit.parsers.kineto import parse as kineto_parse
from tracekit.parsers.kineto import read as kineto_read
from tracekit.parsers.kineto.decode import RAW_IDX
from tracekit.parsers.kineto.native_reader import read_whole
from tracekit.parsers.kineto.parse import _meta

pytestmark = pytest.mark.skipif(
    kineto_native.accumulator() is None,
    reason="native accumulator unavailable (no C compiler, or TRACEKIT_NATIVE=0)")

DIST = {"backend": "nccl", "rank": 0, "world_size": 2, "pg_config": [
    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2,
     "ranks": [0, 1]}]}
RPC = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
       "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "0",
       "Process Group Ranks": "[0, 1]", "Seq": 3}


def ev(name: str, cat: str, ts: Any, dur: Any = 1.0, ph: str = "X", pid: Any = 1,
       tid: Any = 1, **args: Any) -> dict:
    return {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def step(i: int) -> list[dict]:
    """One collective: python frame > c10d op > record_param_comms > launch > kernel."""
    t = 1000.0 * i
    return [
        ev(f"sglang/x.py({i % 7}): f{i % 5}", "python_function", t, 50.0,
           **{"Python id": 2 * i + 1, "Python parent id": 0}),
        ev("c10d::allreduce_", "cpu_op", t + 1.5, 20.0, **{
            "External id": 10 * i, "Input Dims": [[1024], []],
            "Input type": ["BFloat16", ""], "Concrete Inputs": ["", ""]}),
        ev("record_param_comms", "cpu_op", t + 2.25, 10.0, **{"External id": 10 * i + 1, **RPC}),
        ev("cudaLaunchKernel", "cuda_runtime", t + 3.0, 1.0, correlation=i,
           **{"External id": 10 * i + 1}),
        {"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": t + 3.0, "cat": "ac2g", "name": "ac2g"},
        ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", "kernel", t + 9.125, 4.5,
           pid=0, tid=7, correlation=i, **{"External id": 10 * i + 1}),
        ev(f"aten::mm_{i % 3}", "cpu_op", t + 30.0, 2.0, **{"External id": 10 * i + 2}),
        {"ph": "i", "cat": "user_annotation", "name": f"mark {i % 4}", "pid": 1, "tid": 1,
         "ts": t + 40.0, "s": "t"},
    ]


def threads() -> list[dict]:
    return [{"ph": "M", "name": "thread_name", "pid": p, "tid": t, "ts": 0,
             "args": {"name": label}}
            for p, t, label in ((1, 1, "thread 1 (python)"), (0, 7, "stream 7 "))]


def write(path: Path, events: list[dict]) -> Path:
    text = ",\n".join(json.dumps(e, ensure_ascii=False) for e in events)
    path.write_text('{"schemaVersion": 1, "distributedInfo": ' + json.dumps(DIST)
                    + ', "traceEvents": [' + text + '], "traceName": "t"}', encoding="utf-8")
    return path


def piece_path(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The tables (or error) of the piece path: the accumulator switched off."""
    with monkeypatch.context() as m:
        m.setattr(kineto_parse, "read_whole", lambda *_: None)
        try:
            return load_kineto_file(path)
        except BadInputError as exc:
            return str(exc)


def assert_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables, or the error message, of a normal parse equal the piece path's."""
    piece = piece_path(path, monkeypatch)
    if isinstance(piece, str):
        with pytest.raises(BadInputError) as exc:
            load_kineto_file(path)
        assert str(exc.value) == piece
        return
    whole = load_kineto_file(path)
    assert whole.events.schema.equals(piece.events.schema)
    assert whole.events.equals(piece.events)  # same values, same dictionaries
    assert whole.process_groups.equals(piece.process_groups)
    assert whole.rank_info.equals(piece.rank_info)


def test_a_trace_in_many_blocks_is_read_whole_and_matches_the_piece_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a trace read in small blocks, names first seen on untimed events and across
    # blocks, comm args, record_shapes args and thread names in several blocks, and an
    # event without a name
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 700)
    events = threads() + [e for i in range(60) for e in step(i)]
    events.insert(20, {**ev("x", "cpu_op", 1.0), "name": None})
    path = write(tmp_path / "t.json", events)
    # WHEN read by the accumulator THEN it takes the file (does not give up)
    raw = read_whole(path, _meta)
    assert raw is not None and raw.n_events == len(events)
    assert raw.comm is not None and raw.comm.num_rows == 60
    assert len(raw.extra) == 60 and len(raw.threads) == 2
    # AND EVENTS equals the piece path's, dictionaries included
    assert_same(path, monkeypatch)


def test_the_steps_beside_the_scan_run_between_blocks_and_change_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a trace of many blocks and steps of other work that note the blocks handed
    # out so far (a cold process imports the modules that build EVENTS there)
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 700)
    path = write(tmp_path / "t.json", threads() + [e for i in range(60) for e in step(i)])
    read: list[int] = []
    real_read_on = kineto_native_reader._read_on

    def read_on(*args: Any) -> Any:
        for got in real_read_on(*args):
            read.append(got[2])
            yield got

    monkeypatch.setattr(kineto_native_reader, "_read_on", read_on)
    seen: list[int] = []

    def steps() -> Any:
        for _ in range(3):
            seen.append(len(read))
            yield

    # WHEN read with the steps beside and without
    beside = read_whole(path, _meta, steps())
    alone = read_whole(path, _meta)
    # THEN each step ran once, after each of the first three blocks was handed to the
    # worker (it had a block to scan during each), and the tables are the same
    assert seen == [1, 2, 3] and len(read) > 3
    assert beside is not None and alone is not None
    assert beside.raw.equals(alone.raw) and beside.n_events == alone.n_events


DECLINED = {
    # more than three decimals: the two rules of exact_ns may differ, msgspec decides
    "four_decimals": [ev("a", "cpu_op", 2.0005)],
    "exponent": [ev("a", "cpu_op", 2.5e-7)],
    "escaped_name": [ev('quote " and \\ backslash, caf\u00e9', "cpu_op", 3.0)],
    "new_name_in_the_declined_block": [ev("only here", "odd_cat", 1.00001),
                                       ev("only here too", "cpu_op", 2.0)],
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_a_declined_block_is_decoded_by_msgspec_and_the_others_natively(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    # GIVEN a trace in small blocks, one of which holds an event the accumulator declines
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 400)
    events = threads() + [e for i in range(6) for e in step(i)]
    events[20:20] = DECLINED[case]
    path = write(tmp_path / "t.json", events)
    # WHEN read THEN the native reader keeps the file and says msgspec read part of it
    raw = read_whole(path, _meta)
    assert raw is not None and raw.reader == "native+msgspec"
    assert raw.n_events == len(events)
    assert raw.raw.column(S.EVENT_ID).to_pylist() == sorted(
        raw.raw.column(S.EVENT_ID).to_pylist())
    # AND the tables equal msgspec's alone, dictionaries included
    assert_same(path, monkeypatch)
    assert load_kineto_file(path).events.schema.metadata[b"reader"] == b"native+msgspec"


GIVE_UP = {
    "string_tid_on_thread_name": [{"ph": "M", "name": "thread_name", "pid": 1, "tid": "7",
                                   "ts": 0, "args": {"name": "gloo"}}],
    "false_boundary": [ev("x },{ y", "cpu_op", 3.0)],
    "malformed_utf8": [ev("MALFORMED", "cpu_op", 4.0)],
    "comm_arg_of_a_wrong_type": [ev("record_param_comms", "cpu_op", 5.0,
                                    **{**RPC, "Group size": "2"})],
}


@pytest.mark.parametrize("case", sorted(GIVE_UP))
def test_what_the_accumulator_cannot_decide_goes_to_the_piece_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    # GIVEN a trace (in small blocks) with one event the accumulator must not decide alone
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 400)
    events = threads() + [e for i in range(6) for e in step(i)] + GIVE_UP[case]
    path = write(tmp_path / "t.json", events)
    path.write_bytes(path.read_bytes().replace(b"MALFORMED", b"bad \xed\xa0\x80 surrogate"))
    # WHEN read THEN the native reader gives the file up to msgspec
    assert read_whole(path, _meta) is None
    # AND the parse still gives the piece path's tables (or its error: malformed UTF-8)
    assert_same(path, monkeypatch)


def test_epoch_times_beside_small_floats_are_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN float epoch timestamps beyond 2**43 us (2024 traces), integer epoch timestamps
    # and small float durations in one trace
    events = [*threads(), ev("a", "cpu_op", 424242.125, 3.5),
              ev("b", "cpu_op", 1712195495519695, 0.125), ev("c", "cpu_op", 12.5, 7)]
    path = write(tmp_path / "t.json", events)
    # (the text Kineto writes: a double cannot hold these digits, so json.dumps could not)
    path.write_text(path.read_text().replace("424242.125", "1712195495519689.047"))
    # WHEN read THEN the accumulator takes it, with the decimal digits to the nanosecond
    raw = read_whole(path, _meta)
    assert raw is not None
    assert raw.raw.column(S.TS_NS).to_pylist() == [
        1712195495519689047, 1712195495519695000, 12500]
    assert raw.raw.column(S.DUR_NS).to_pylist() == [3500, 125, 7000]
    # AND the tables equal the piece path's
    assert_same(path, monkeypatch)


def test_utf8_names_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN names and args in UTF-8 (a user's path, an annotation in Chinese)
    events = [*threads(), *step(0), ev("/home/用户/model.py(12): forward", "python_function",
                                        5.0, **{"Python id": 9, "Python parent id": 0}),
              ev("通信 naïve µs", "user_annotation", 6.0)]
    path = write(tmp_path / "t.json", events)
    assert "用户".encode() in path.read_bytes()  # the UTF-8 text itself, not \u escapes
    # WHEN read THEN the accumulator takes it, and the tables equal the piece path's
    assert read_whole(path, _meta) is not None
    assert_same(path, monkeypatch)


def test_bad_input_is_worded_by_the_piece_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an X event without dur
    bad = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.0}
    path = write(tmp_path / "t.json", [*step(0), bad])
    # WHEN parsed THEN the accumulator gives up and the error names the event
    assert read_whole(path, _meta) is None
    with pytest.raises(BadInputError, match=r"event 8 .* has no dur"):
        load_kineto_file(path)


# communication args in forms the accumulator leaves to msgspec (the event's args are
# decoded in Python beside the rows read in C), or reads itself at the edge of a type
MIXED_COMM = {
    "int_group_name": {"Process Group Name": 0},
    "split_as_a_list": {"Collective name": "all_to_all", "In split size": [512, 512],
                        "Out split size": [256, 768]},
    "ranks_as_a_list": {"Process Group Ranks": [0, 1]},
    "escaped_description": {"Process Group Description": "tp\\/device\\n"},
    "largest_comms_id": {"Comms Id": 2**64 - 1},
    "comms_id_beyond_uint64": {"Comms Id": 2**64},
    "negative_comms_id": {"Comms Id": -5},
    "nineteen_digit_seq": {"Seq": 10**18 + 7},
    "seq_beyond_int64": {"Seq": 2**63},
    "ranks_beyond_int32": {"Process Group Ranks": "[0, 99999999999]"},
    "ranks_beyond_int64": {"Process Group Ranks": "[0, 99999999999999999999]"},
    "group_size_beyond_int32": {"Group size": 2**40},
    "peer_beyond_int32": {"Collective name": "send", "Dst Rank": 2**40},
    "stride_beyond_int32": {"Process Group Ranks": "[0, ...]", "Global rank start": 2**31,
                            "Global rank stride": 1, "Group size": 4},
    "huge_strided_group": {"Process Group Ranks": "[0, ...]", "Global rank start": 0,
                           "Global rank stride": 1, "Group size": 2**40},
    "null_values": {"dtype": None, "Group size": None, "Process Group Name": None},
    "size_era": {"Collective name": None, "In msg nelems": None, "In msg size": 4096,
                 "Out msg size": 4096},
    "no_collective": {"Collective name": None, "In msg nelems": None},
}


@pytest.mark.parametrize("case", sorted(MIXED_COMM))
def test_comm_args_of_every_form_give_the_piece_paths_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    # GIVEN a trace in small blocks where every third collective's record_param_comms (and
    # its kernel) carries one unusual communication value, and a flow event with comm args
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 900)
    events = threads()
    for i in range(24):
        odd = i % 3 == 1
        for e in step(i):
            if odd and (e["name"] == "record_param_comms" or e["cat"] == "kernel"):
                e = {**e, "args": {**e["args"], **RPC, **MIXED_COMM[case]}}
            events.append(e)
    events.append({"ph": "s", "id": 99, "pid": 1, "tid": 1, "ts": 5.0, "cat": "ac2g",
                   "name": "ac2g", "args": RPC})
    path = write(tmp_path / "t.json", events)
    # WHEN parsed normally and by the piece path THEN the tables (or the error) are equal
    assert_same(path, monkeypatch)


def test_comm_rows_read_in_c_and_by_msgspec_interleave_in_event_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN collectives whose args alternate between the plain form and an integer group
    # name (decoded by msgspec), over many blocks
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 700)
    events = threads()
    for i in range(30):
        for e in step(i):
            if e["name"] == "record_param_comms" and i % 2:
                e = {**e, "args": {**e["args"], "Process Group Name": 0, "Seq": 1000 + i}}
            events.append(e)
    path = write(tmp_path / "t.json", events)
    # WHEN read whole THEN the accumulator takes the file with one comm row per collective,
    # in event order
    raw = read_whole(path, _meta)
    assert raw is not None and raw.comm is not None
    idx = raw.comm.column(RAW_IDX).to_pylist()
    assert idx == sorted(idx) and len(idx) == 30
    assert raw.comm.column(S.SEQ).to_pylist() == [3 if i % 2 == 0 else 1000 + i
                                                  for i in range(30)]
    assert set(raw.comm.column(S.PG_NAME).to_pylist()) == {"0"}
    # AND EVENTS equals the piece path's
    assert_same(path, monkeypatch)


def test_integers_beyond_their_column_become_null(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN one collective whose rank list, group size and peer do not fit int32
    args = {**RPC, "Collective name": "send", "Process Group Ranks": "[0, 99999999999]",
            "Group size": 2**40, "Dst Rank": 2**40, "Comms Id": 2**64}
    events = [*threads(), *(e if e["name"] != "record_param_comms" else
                            {**e, "args": {**e["args"], **args}} for e in step(0))]
    path = write(tmp_path / "t.json", events)
    # WHEN parsed
    events_table = load_kineto_file(path).events
    row = events_table.filter(pc.equal(events_table.column(S.NAME), "record_param_comms"))
    # THEN those values are null (no traceback): the members and the size come from the
    # group's pg_config entry instead, and the rest of the row is read
    assert row.column(S.PG_RANKS).to_pylist() == [[0, 1]]
    assert row.column(S.GROUP_SIZE).to_pylist() == [2]
    assert row.column(S.PEER_RANK).to_pylist() == [None]
    assert row.column(S.COMMS_ID).to_pylist() == [None]
    assert row.column(S.SEQ).to_pylist() == [3]
    # AND the piece path agrees
    assert_same(path, monkeypatch)


def test_the_ring_never_reuses_a_buffer_still_being_scanned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a compressed stream (read through the ring of three buffers) whose events are
    # larger than a block, so that some reads find no event boundary
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 64)
    lib = kineto_native.accumulator()
    events = ",\n".join(json.dumps(ev(f"op{i}" * (1 + i % 9), "cpu_op", i)) for i in range(30))
    ring = kineto_native_reader._Ring(lib, b"", Path("t.json.gz"))
    stream = io.BytesIO(events.encode())
    # WHEN every block is read
    fills: list[tuple[int, int]] = []
    while (got := ring.fill(stream)) is not None:
        fills.append((got[0].ctypes.data, got[2]))
    # THEN a block handed out (with a cut) keeps its buffer until two more blocks were
    # handed out (the worker scans it meanwhile, and this thread decodes its flags)
    assert sum(1 for _, cut in fills if not cut) > 3  # reads without a boundary happened
    for i, (ptr, cut) in enumerate(fills):
        if not cut:
            continue
        later_cuts = 0
        for other, other_cut in fills[i + 1:]:
            if later_cuts >= 2:
                break
            assert other != ptr
            later_cuts += bool(other_cut)


def test_no_block_after_a_false_boundary_is_decoded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a name made of "},{" over many blocks (every boundary guessed in it is false;
    # the text after one decodes as empty objects, events that are not there)
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 256)
    path = write(tmp_path / "t.json", [*step(0), ev("},{" * 2000, "cpu_op", 1.0)])
    calls: list[int] = []
    decode = kineto_native_reader.decode_buffer
    monkeypatch.setattr(kineto_native_reader, "decode_buffer",
                        lambda buf, start, p: calls.append(start) or decode(buf, start, p))
    # WHEN read THEN the native reader gives the file up after the first block that is not
    # JSON, without decoding the blocks after it
    assert read_whole(path, _meta) is None
    assert len(calls) == 1
    # AND the msgspec reader gives the same tables as before
    assert_same(path, monkeypatch)


def _gzipped(path: Path) -> Path:
    import gzip

    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return out


def test_a_gzip_block_is_inflated_in_pieces_below_the_mmap_threshold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a gzipped trace and a small piece size
    monkeypatch.setattr(kineto_read, "INFLATE_PIECE", 1000)
    path = _gzipped(write(tmp_path / "t.json", threads() + [e for i in range(40) for e in step(i)]))
    stream = kineto_read.open_trace(path)
    asked: list[int] = []
    inner = stream.inner  # type: ignore[attr-defined]
    real = inner.readinto
    monkeypatch.setattr(inner, "readinto", lambda b: asked.append(len(b)) or real(b))
    # WHEN one readinto asks for more than the whole text
    import gzip

    text = gzip.decompress(path.read_bytes())
    buf = bytearray(len(text) + 5000)
    got = stream.readinto(buf)
    # THEN the buffer holds the whole text, read in pieces of at most INFLATE_PIECE, and
    # the stream counted every byte (the decompression-bomb limits read the count)
    assert got == len(text) and bytes(buf[:got]) == text
    assert max(asked) <= 1000 and len(asked) >= len(text) // 1000
    assert stream.out == len(text)  # type: ignore[attr-defined]
    assert stream.readinto(bytearray(10)) == 0  # the end of the stream


def test_a_runs_gzip_files_reuse_one_another_s_block_buffers_while_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN two gzipped traces of several blocks each (read through the ring)
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 700)
    paths = [_gzipped(write(tmp_path / f"t{n}.json",
                            threads() + [e for i in range(30 + n) for e in step(i)]))
             for n in range(2)]
    alone = [load_kineto_file(p).events for p in paths]
    made: list[int] = []
    real = kineto_native_reader._block_buffer
    monkeypatch.setattr(kineto_native_reader, "_block_buffer",
                        lambda size: made.append(id(b := real(size))) or b)
    # WHEN both are read inside kept_block_buffers()
    with kineto_native_reader.kept_block_buffers():
        kept = [load_kineto_file(p).events for p in paths]
        spare = list(kineto_native_reader._SPARE)
    # THEN the second file's ring took the first's three buffers, EVENTS are as read
    # alone, and nothing is kept after the scope
    assert len(made) == 6 and set(made[3:]) == set(made[:3])
    assert [id(b) for b in spare] and {id(b) for b in spare} <= set(made)
    assert all(k.equals(a) for k, a in zip(kept, alone, strict=True))
    assert kineto_native_reader._SPARE == []
    # AND outside the scope a finished ring's buffers are not kept
    load_kineto_file(paths[0])
    assert kineto_native_reader._SPARE == []
