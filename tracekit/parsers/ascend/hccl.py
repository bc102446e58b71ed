"""HCCL naming facts of Ascend exports (TRACE_FORMATS.md B.4, B.7, B.9, B.10).

* op name ``<opType>_<hash3>_<idx>_<iter>`` (2023: ``<opType>_<hash3>_<idx>``), opType ends in
  ``_`` (``hcom_allReduce_``), AICPU-unfolded ops insert ``AicpuKernel``;
* communicator identity ``double_hash(comm_name)`` (the decimal after ``@`` in
  communication.json keys and analysis.db ``group_name``);
* HCCL data types and their sizes.

MoE / fused kernels (MoeDistributeDispatch, FusedDeepMoe...) are classified by the NPU rule
files (tracekit/rules/data/npu*.yaml), not here.

Everything here works on whole Arrow columns.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.schema import Op

MASK32 = 0xFFFFFFFF

# hcom_allReduce__586_0_1 | hcom_reduceScatter_AicpuKernel_503_490_1 | hcom_broadcast__483_0
OP_NAME_RE = (
    r"^(?P<op_type>hcom_[A-Za-z]+_)(?:AicpuKernel)?_(?P<hash3>\d+)_(?P<index>\d+)"
    r"(?:_(?P<iteration>\d+))?$"
)

# opType (lower-cased, trailing '_' removed) -> schema.Op
_OP_TYPES: dict[str, str] = {
    "hcom_allreduce": Op.ALL_REDUCE,
    "hcom_allgather": Op.ALL_GATHER,
    "hcom_allgatherv": Op.ALL_GATHERV,
    "hcom_reducescatter": Op.REDUCE_SCATTER,
    "hcom_reducescatterv": Op.REDUCE_SCATTERV,
    "hcom_broadcast": Op.BROADCAST,
    "hcom_reduce": Op.REDUCE,
    "hcom_alltoall": Op.ALL_TO_ALL,
    "hcom_alltoallv": Op.ALL_TO_ALLV,
    "hcom_alltoallvc": Op.ALL_TO_ALLV,
    "hcom_send": Op.SEND,
    "hcom_receive": Op.RECV,
    "hcom_batchsendrecv": Op.SEND_RECV,
    "hcom_scatter": Op.SCATTER,
    "hcom_gather": Op.GATHER,
    "hcom_barrier": Op.BARRIER,
}

# ENUM_HCCL_DATA_TYPE names (db) and trace_view/kernel_details `data_type` spellings -> bytes
DTYPE_BYTES: dict[str, int] = {
    "INT8": 1, "UINT8": 1, "HIF8": 1, "FP8": 1, "FP8E4M3": 1, "FP8E5M2": 1,
    "INT16": 2, "UINT16": 2, "FP16": 2, "BFP16": 2, "BF16": 2,
    "INT32": 4, "UINT32": 4, "FP32": 4,
    "INT64": 8, "UINT64": 8, "FP64": 8,
    "INT128": 16,
}

def double_hash(text: str) -> int:
    """msprof's communicator hash: two 32-bit polynomial hashes (29 and 131) side by side."""
    h0 = h1 = 0
    for ch in text:
        h0 = (h0 * 29 + ord(ch)) & MASK32
        h1 = (h1 * 131 + ord(ch)) & MASK32
    return (h0 << 32) | h1


def split_op_names(names: pa.Array) -> pa.StructArray:
    """Struct column (op_type, hash3, index, iteration) of HCCL op names; nulls where no match."""
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    return pc.extract_regex(pc.cast(names, pa.string()), OP_NAME_RE)


def op_of_type(op_types: pa.Array) -> pa.Array:
    """schema.Op of an opType column (``hcom_allReduce_``); Op.OTHER for unknown hcom types."""
    key = pc.utf8_rtrim(pc.utf8_lower(pc.cast(op_types, pa.string())), characters="_")
    keys = pa.array(list(_OP_TYPES))
    vals = pa.array(list(_OP_TYPES.values()))
    idx = pc.index_in(key, value_set=keys)
    mapped = pc.take(vals, idx)
    is_hcom = pc.fill_null(pc.starts_with(key, "hcom_"), False)
    return pc.if_else(pc.and_(is_hcom, pc.is_null(mapped)), pa.scalar(Op.OTHER), mapped)


def dtype_bytes(dtypes: pa.Array) -> pa.Array:
    """Bytes per element of HCCL dtype names; null when unknown (N/A, INVALID_TYPE)."""
    key = pc.utf8_upper(pc.cast(dtypes, pa.string()))
    idx = pc.index_in(key, value_set=pa.array(list(DTYPE_BYTES)))
    return pc.take(pa.array(list(DTYPE_BYTES.values()), pa.int64()), idx)


def last3(group_hash: str) -> str:
    """The 3 characters of a group hash that the op name carries."""
    return group_hash[-3:]


def is_hcom_name(name: str) -> bool:
    return re.match(OP_NAME_RE, name) is not None
