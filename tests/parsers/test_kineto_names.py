"""Rank from trace file names, and the small pure helpers of the Kineto parser."""

from __future__ import annotations

import pytest

from tracekit.parsers.kineto.comm import nelems, op_from_collective, op_from_name, parse_int_list
from tracekit.parsers.names import rank_from_name, sglang_coords


@pytest.mark.parametrize("name,rank", [
    ("1732000000.123-TP-3.trace.json.gz", 3),
    ("1732000000.123-TP-5-DP-1-EP-5.trace.json.gz", 5),
    ("1732000000.123-TP-2-DP-0-PP-0-EP-2.trace.json.gz", 2),
    ("1732000000.123-TP-2-PP-1.trace.json.gz", None),  # needs the TP size: ask for --rank
    ("vllm_trace_rank3.pt.trace.json.gz", 3),
    ("worker-rank-12.pt.trace.json", 12),
    ("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0),
    ("rank7.trace.json.gz", 7),
    ("sampled_rank-1.json.gz", 1),
    ("host_1234.1700000000000.pt.trace.json.gz", None),
    ("frankenstein2.json", None),
])
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_sglang_coordinates() -> None:
    assert sglang_coords("1.5-TP-6-DP-1-PP-0-EP-6.trace.json.gz") == {
        "tp": 6, "dp": 1, "pp": 0, "ep": 6}
    assert sglang_coords("trace.json") is None


@pytest.mark.parametrize("text,expected", [
    ("[1, 2, 3]", [1, 2, 3]), ("[]", []), ([4, 5], [4, 5]), ("[0, 1, …, 9]", None),
    ("[0, 1, ..., 9]", None), ("junk", None), (None, None),
])
def test_parse_int_list(text: object, expected: list[int] | None) -> None:
    assert parse_int_list(text) == expected


def test_collective_names_and_op_titles() -> None:
    assert op_from_collective("_reduce_scatter_base") == "reduce_scatter"
    assert op_from_collective("all_to_allv") == "all_to_allv"
    assert op_from_collective("wait") is None
    assert op_from_collective("brand_new_thing") == "other"
    assert op_from_name("nccl:send 0->1") == "send"
    assert op_from_name("nccl:_all_gather_base") == "all_gather"
    assert op_from_name("gloo:all_to_all") == "all_to_all"
    assert op_from_name("_c10d_functional::wait_tensor") is None
    assert op_from_name("c10d::recv_") == "recv"
    assert op_from_name("aten::mm") is None


def test_nelems_of_shapes_and_shape_lists() -> None:
    assert nelems([10, 16]) == 160
    assert nelems([[10, 16], [2, 3]]) == 166
    assert nelems([]) == 1  # a scalar tensor
    assert nelems("x") is None
