"""Kineto parser behaviour on small hand-written traces: linking, eras, splitting, call sites."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import load_kineto_file
from tracekit.parsers.kineto import parse as kineto_parse
from tracekit.parsers.kineto import read as kineto_read


def write_trace(path: Path, events: list[dict[str, Any]], *, compact: bool = False,
                tail: str = "", **top: Any) -> Path:
    """A Kineto-shaped document: top-level keys, traceEvents, then an optional raw tail."""
    doc = {"schemaVersion": 1, **top}
    head = json.dumps(doc)[:-1] + (", " if doc else "")
    sep = "," if compact else ",\n  "
    body = sep.join(json.dumps(e, separators=(",", ":") if compact else None) for e in events)
    text = f'{head}"traceEvents": [{body}]{tail}}}'
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)
    return path


def x(name: str, cat: str, ts: float, dur: float, pid: int = 1, tid: int = 1,
      **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


DIST = {"backend": "nccl", "rank": 3, "world_size": 4, "pg_config": [
    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 4,
     "ranks": [0, 1, 2, 3]},
    {"pg_name": "2", "pg_desc": "tp:device", "backend_config": "cuda:nccl", "pg_size": 2,
     "ranks": [2, 3]}]}
RPC = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
       "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "2",
       "Process Group Description": "tp:device", "Process Group Ranks": "[2, 3]",
       "In split size": "[]", "Out split size": "[]", "Rank": 1}


def rows(path: Path) -> list[dict[str, Any]]:
    return load_kineto_file(path).events.to_pylist()


def by_name(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e[S.NAME] == name]


def test_kernel_without_args_takes_the_metadata_of_its_record_param_comms(tmp_path: Path) -> None:
    # GIVEN a record_param_comms with args, two kernels without: one linked by External id,
    # one only by correlation through its runtime launch
    events = [
        x("record_param_comms", "cpu_op", 10.0, 5.0, **{"External id": 7}, **RPC),
        x("cudaLaunchKernel", "cuda_runtime", 11.0, 1.0, correlation=99, **{"External id": 7}),
        x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "kernel", 20.0, 3.0, pid=0, tid=7,
          **{"External id": 7, "correlation": 98}),
        x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "kernel", 30.0, 3.0, pid=0, tid=7,
          correlation=99),
    ]
    path = write_trace(tmp_path / "t.json", events, distributedInfo=DIST)
    # WHEN parsed
    kernels = by_name(rows(path), "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)")
    # THEN both kernels carry the rpc's metadata, marked as linked, with bytes = 1024 x 2
    for k in kernels:
        assert k[S.META_SOURCE] == "linked"
        assert (k[S.OP], k[S.DTYPE], k[S.IN_BYTES], k[S.PG_DESC], k[S.PG_RANKS]) == (
            "all_reduce", "BFloat16", 2048, "tp:device", [2, 3])
        assert (k[S.DEVICE], k[S.STREAM]) == (0, 7)


def test_p2p_and_rooted_ops_resolve_the_global_peer(tmp_path: Path) -> None:
    # GIVEN a send with Dst Rank, a recv with only a group-local Rank, and a broadcast root
    base = {"dtype": "Float", "In msg nelems": 4, "Out msg nelems": 4, "Group size": 2,
            "Process Group Name": "2", "Process Group Ranks": "[2, 3]"}
    events = [
        x("record_param_comms", "cpu_op", 1.0, 1.0, **base, **{"Collective name": "send",
                                                               "Dst Rank": 2, "Rank": 0}),
        x("record_param_comms", "cpu_op", 3.0, 1.0, **base, **{"Collective name": "recv",
                                                               "Rank": 0}),
        x("record_param_comms", "cpu_op", 5.0, 1.0, **base, **{"Collective name": "broadcast",
                                                               "Rank": 1}),
    ]
    path = write_trace(tmp_path / "t.json", events, distributedInfo=DIST)
    got = [(e[S.OP], e[S.PEER_RANK]) for e in rows(path)]
    # THEN Dst Rank is taken as is; a group-local Rank is mapped through the group's ranks
    assert got == [("send", 2), ("recv", 2), ("broadcast", 3)]


def test_legacy_in_msg_size_and_truncated_rank_lists(tmp_path: Path) -> None:
    # GIVEN 2023-era args (In msg size) and a truncated rank string with start/stride
    args = {"Collective name": "_allgather_base", "dtype": "Half", "In msg size": 10,
            "Out msg size": 80, "Group size": 8, "Process Group Ranks": "[0, 2, 4, …, 14]",
            "Global rank start": 0, "Global rank stride": 2, "In split size": "[1, 2, …, 9]"}
    path = write_trace(tmp_path / "t.json", [x("record_param_comms", "cpu_op", 1.0, 1.0,
                                               **args)], distributedInfo={"rank": 0})
    (e,) = rows(path)
    # THEN sizes are element counts; ranks come from start/stride; a cut split list is null
    assert (e[S.OP], e[S.IN_BYTES], e[S.OUT_BYTES]) == ("all_gather", 20, 160)
    assert e[S.PG_RANKS] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert e[S.IN_SPLIT] is None


@pytest.mark.parametrize("name,op", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "all_reduce"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "reduce_scatter"),
    ("ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16", "all_reduce"),
    ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "all_reduce"),
    ("ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "broadcast"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "send_recv"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "other"),
])
def test_nccl_kernel_names_of_every_era_give_the_collective(tmp_path: Path, name: str,
                                                             op: str) -> None:
    path = write_trace(tmp_path / "t.json", [x(name, "kernel", 1.0, 1.0, pid=0, tid=7)],
                       distributedInfo={"rank": 0})
    (e,) = rows(path)
    assert (e[S.OP], e[S.META_SOURCE], e[S.KIND]) == (op, "name", "kernel")


def test_splitter_survives_false_boundaries_and_a_trailing_on_demand_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a compact one-line trace whose names contain "},{" and "]", read in tiny chunks,
    # with kineto's on-demand distributedInfo (ranks as a string) after traceEvents
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 64)
    pieces: list[int] = []
    decode = kineto_parse.decode_buffer
    monkeypatch.setattr(kineto_parse, "read_whole", lambda *_: None)  # msgspec, block by block
    monkeypatch.setattr(kineto_parse, "decode_buffer",
                        lambda buf, start, path: pieces.append(start) or decode(buf, start, path))
    events = [x(f'odd "}},{{" and "}},  {{" name ] {i}', "cpu_op", 1000.5 + i, 0.25,
                **{"External id": i}) for i in range(50)]
    tail = (', "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2, '
            '"pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": '
            '"cuda:nccl", "pg_size": 2, "ranks": "[0, 1]"}], "nccl_version": "unknown"}, '
            '"traceName": "x]"')
    path = write_trace(tmp_path / "t.json.gz", events, compact=True, tail=tail)
    # WHEN parsed THEN every event is there, in order, and the trailing block was read
    tables = load_kineto_file(path)
    ev = tables.events
    assert ev.column(S.NAME).cast("string").to_pylist() == [e["name"] for e in events]
    assert ev.column(S.TS_NS).to_pylist() == [1000500 + 1000 * i for i in range(50)]
    assert tables.rank == 1
    assert tables.process_groups.column(S.PG_RANKS).to_pylist() == [[0, 1]]
    assert len(pieces) > 10  # it really went through many pieces


def test_epoch_microsecond_floats_stay_exact(tmp_path: Path) -> None:
    # GIVEN float timestamps beyond 2**43 us with sub-microsecond digits
    path = tmp_path / "t.json"
    path.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "cat": '
                    '"cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495520871.123, '
                    '"dur": 0.5}, {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1,'
                    ' "ts": 5169981446987.089, "dur": 2636.669}]}')
    ev = rows(path)
    # THEN the nanoseconds are those of the decimal text
    assert [(e[S.TS_NS], e[S.DUR_NS]) for e in ev] == [
        (1712195495520871123, 500), (5169981446987089, 2636669)]


def test_call_site_shows_the_innermost_user_frames(tmp_path: Path) -> None:
    # GIVEN python frames: forward > tensor_model_parallel_all_reduce > torch all_reduce,
    # enclosing a c10d::allreduce_ on the same thread, and a later sibling frame
    def py(name: str, ts: float, dur: float, pid_: int, parent: int | None) -> dict[str, Any]:
        return x(name, "python_function", ts, dur, **{"Python id": pid_,
                                                      "Python parent id": parent})
    events = [
        py("sglang/srt/models/deepseek_v2.py(100): forward", 0.0, 100.0, 1, None),
        py("sglang/srt/distributed/communication_op.py(12): tensor_model_parallel_all_reduce",
           10.0, 50.0, 2, 1),
        py("torch/distributed/distributed_c10d.py(3155): all_reduce", 11.0, 40.0, 3, 2),
        py("sglang/srt/layers/linear.py(7): matmul", 70.0, 5.0, 4, 1),
        x("c10d::allreduce_", "cpu_op", 12.0, 30.0),
        x("c10d::broadcast_", "cpu_op", 80.0, 2.0),
    ]
    ev = rows(write_trace(tmp_path / "t.json", events, distributedInfo={"rank": 0}))
    # THEN torch frames are skipped and the SGLang function names show, innermost first
    assert by_name(ev, "c10d::allreduce_")[0][S.CALL_SITE] == (
        "tensor_model_parallel_all_reduce (sglang/srt/distributed/communication_op.py:12)"
        " <- forward (sglang/srt/models/deepseek_v2.py:100)")
    # AND an op after a finished sibling frame gets the enclosing frame, not the sibling
    assert by_name(ev, "c10d::broadcast_")[0][S.CALL_SITE] == (
        "forward (sglang/srt/models/deepseek_v2.py:100)")
    assert by_name(ev, "sglang/srt/layers/linear.py(7): matmul")[0][S.PY_PARENT_ID] == 1


def test_functional_collective_group_name_resolves_through_pg_config(tmp_path: Path) -> None:
    # GIVEN a _c10d_functional::all_gather_into_tensor whose Concrete Inputs name group "2"
    ev = x("_c10d_functional::all_gather_into_tensor", "cpu_op", 1.0, 1.0, **{
        "Concrete Inputs": ["", "2", "2"], "Input type": ["c10::BFloat16", "Scalar", ""],
        "Input Dims": [[4, 8], [], []]})
    (e,) = rows(write_trace(tmp_path / "t.json", [ev], distributedInfo=DIST))
    # THEN op, sizes (out = in x group size) and the group's description and ranks are set
    assert (e[S.OP], e[S.IN_BYTES], e[S.OUT_BYTES], e[S.PG_NAME], e[S.PG_DESC],
            e[S.PG_RANKS], e[S.META_SOURCE]) == (
        "all_gather", 64, 128, "2", "tp:device", [2, 3], "inputs")


def test_rank_falls_back_to_the_file_name_then_to_the_option(tmp_path: Path) -> None:
    events = [x("a", "cpu_op", 1.0, 1.0)]
    sglang = write_trace(tmp_path / "1732000000.5-TP-5-EP-5.trace.json.gz", events)
    assert load_kineto_file(sglang).rank == 5
    plain = write_trace(tmp_path / "trace.json", events)
    assert load_kineto_file(plain, rank=9).rank == 9
    pc_rank = load_kineto_file(sglang, rank=2).events.column(S.RANK)
    assert pc.all(pc.equal(pc_rank, 2)).as_py()


def test_bare_record_param_comms_takes_the_op_of_the_title_inside(tmp_path: Path) -> None:
    # GIVEN a 2022-style trace: record_param_comms without args enclosing nccl:all_reduce,
    # then a second one (the wait) enclosing nothing, and no other communication args
    events = [
        x("record_param_comms", "cpu_op", 10.0, 10.0),
        x("nccl:all_reduce", "user_annotation", 12.0, 3.0),
        x("record_param_comms", "cpu_op", 30.0, 1.0),
    ]
    ev = rows(write_trace(tmp_path / "t.json", events, distributedInfo={"rank": 0}))
    assert [(e[S.KIND], e[S.OP], e[S.META_SOURCE]) for e in ev] == [
        ("comm_op", "all_reduce", "name"), ("annotation", "all_reduce", "name"),
        ("comm_op", None, None)]
