"""Small pieces of the Ascend reader: exact decimal times, HCCL op names, dtypes, hashes."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from tracekit.parsers.ascend.hccl import double_hash, dtype_bytes, op_of_type, split_op_names
from tracekit.parsers.ascend.io import ms_to_ns, text_to_ns
from tracekit.schema import Op


def test_text_times_keep_their_nanoseconds() -> None:
    """B.7 / B.8: ts strings with ns precision (1.7e15 us would lose ns as a float); the
    kernel_details trailing TAB; N/A and blanks are null."""
    # GIVEN decimal texts as the exports write them
    texts = ["1736408883732241.564", "1736408883704643.212\t", "1695115378713661",
             "1695115378715400.2", "79089.52021875", "2281.1055625", "N/A", "", None]
    # WHEN converted
    got = text_to_ns(pa.array(texts, pa.string())).to_pylist()
    # THEN the integer ns are exact (rounded at the first digit below 1 ns)
    assert got == [1736408883732241564, 1736408883704643212, 1695115378713661000,
                   1695115378715400200, 79089520, 2281106, None, None, None]
    # and a float would not have kept them
    assert round(float("1736408883732241.564") * 1000) != 1736408883732241564


def test_exponent_text_and_ms_numbers() -> None:
    """B.5: communication.json writes ms as JSON numbers, sometimes with an exponent."""
    assert text_to_ns(pa.array(["1.5e3", "2E-3"])).to_pylist() == [1_500_000, 2]
    assert ms_to_ns(Decimal("6.000000000000001e-05")) == 60
    assert ms_to_ns(Decimal("79.08952021875")) == 79_089_520


@pytest.mark.parametrize(
    ("name", "op_type", "hash3", "index", "iteration"),
    [
        ("hcom_allReduce__586_0_1", "hcom_allReduce_", "586", "0", "1"),
        ("hcom_reduceScatter_AicpuKernel_503_490_1", "hcom_reduceScatter_", "503", "490", "1"),
        ("hcom_broadcast__483_0", "hcom_broadcast_", "483", "0", ""),  # 2023: two fields
        ("hcom_allReduce__483_19", "hcom_allReduce_", "483", "19", ""),
    ],
)
def test_op_names_split(name: str, op_type: str, hash3: str, index: str, iteration: str) -> None:
    """B.4: <opType>_<hash3>_<idx>_<iter>, opType ending in '_'."""
    parts = split_op_names(pa.array([name])).to_pylist()[0]
    assert parts == {"op_type": op_type, "hash3": hash3, "index": index, "iteration": iteration}


def test_op_types_map_to_schema_ops() -> None:
    """B.4 opType values -> schema.Op; unknown hcom types are 'other', other names null."""
    types = ["hcom_allReduce_", "hcom_allGather_", "hcom_reduceScatter_", "hcom_broadcast_",
             "hcom_reduce_", "hcom_alltoall_", "hcom_alltoallv_", "hcom_alltoallvc_",
             "hcom_send_", "hcom_receive_", "hcom_batchSendRecv_", "hcom_scatter_",
             "hcom_somethingNew_", "MatMulV2"]
    assert op_of_type(pa.array(types)).to_pylist() == [
        Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST, Op.REDUCE, Op.ALL_TO_ALL,
        Op.ALL_TO_ALLV, Op.ALL_TO_ALLV, Op.SEND, Op.RECV, Op.SEND_RECV, Op.SCATTER, Op.OTHER,
        None]


def test_dtype_sizes() -> None:
    """B.9 ENUM_HCCL_DATA_TYPE names; N/A and INVALID_TYPE have no size."""
    names = ["INT8", "FP16", "BFP16", "FP32", "INT64", "fp32", "N/A", "INVALID_TYPE"]
    assert dtype_bytes(pa.array(names)).to_pylist() == [1, 2, 2, 4, 8, 4, None, None]


def test_double_hash_is_two_32_bit_hashes() -> None:
    """B.4: (h29 << 32) | h131 over the characters, each modulo 2**32."""
    assert double_hash("") == 0
    assert double_hash("a") == (97 << 32) | 97
    assert double_hash("ab") == ((97 * 29 + 98) << 32) | (97 * 131 + 98)
    assert double_hash("90.91.105.46%enp189s0f0_60000_0_1736410538306028") == (
        17148521525495523210)
