"""Communication metadata of Kineto events: op names, dtypes, sizes, split lists, groups.

Pure functions over the decoded args of one event (a dict from ``kineto_decode``); the table
level assembly lives in ``kineto_events_table``. TRACE_FORMATS.md A.1, A.2 and A.6 describe
the keys.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any

from tracekit.schema import Kind, MetaSource, Op

# c10 ScalarType names (record_param_comms ``dtype``) and C++ type names (``Input type``).
DTYPE_BYTES: dict[str, int] = {
    "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4, "Double": 8,
    "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1, "QInt8": 1,
    "QUInt8": 1, "QInt32": 4, "BFloat16": 2, "QUInt4x2": 1, "QUInt2x4": 1, "Bits8": 1,
    "Bits16": 2, "Float8_e5m2": 1, "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1,
    "Float8_e4m3fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8, "Float8_e8m0fnu": 1,
    "Float4_e2m1fn_x2": 1,
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8,
    "int": 4, "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1, "unsigned short": 2,
    "unsigned int": 4, "unsigned long": 8,
}

# record_param_comms ``Collective name`` -> schema.Op
COLLECTIVE_OPS: dict[str, str] = {
    "allreduce": Op.ALL_REDUCE, "allreduce_coalesced": Op.ALL_REDUCE,
    "all_reduce": Op.ALL_REDUCE,
    "broadcast": Op.BROADCAST, "_broadcast_oop": Op.BROADCAST,
    "reduce": Op.REDUCE, "_reduce_oop": Op.REDUCE,
    "all_gather": Op.ALL_GATHER, "allgather": Op.ALL_GATHER, "_allgather_base": Op.ALL_GATHER,
    "allgather_into_tensor_coalesced": Op.ALL_GATHER, "allgather_coalesced": Op.ALL_GATHER,
    "all_gather_into_tensor": Op.ALL_GATHER, "_all_gather_base": Op.ALL_GATHER,
    "all_gather_into_tensor_coalesced": Op.ALL_GATHER,
    "reduce_scatter": Op.REDUCE_SCATTER, "_reduce_scatter_base": Op.REDUCE_SCATTER,
    "reduce_scatter_tensor_coalesced": Op.REDUCE_SCATTER,
    "reduce_scatter_tensor": Op.REDUCE_SCATTER,
    "all_to_all": Op.ALL_TO_ALL, "alltoall": Op.ALL_TO_ALL, "alltoall_base": Op.ALL_TO_ALL,
    "all_to_allv": Op.ALL_TO_ALLV, "all_to_all_single": Op.ALL_TO_ALL,
    "send": Op.SEND, "recv": Op.RECV, "recv_any_source": Op.RECV,
    "gather": Op.GATHER, "scatter": Op.SCATTER, "barrier": Op.BARRIER,
    "monitored_barrier": Op.BARRIER, "coalesced": Op.OTHER,
}
_NOT_COLLECTIVES = frozenset({"wait", "wait_tensor", "_wrap_tensor_autograd", "wait_all"})

_NAME_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "nccl:", "gloo:")


@lru_cache(maxsize=1)
def _kernel_rules_text() -> str:
    from importlib import resources  # about 15 ms: only when the rules are read

    return (resources.files("tracekit") / "rules" / "data" / "kernels.yaml").read_text(
        encoding="utf-8")


def kernel_rules_digest() -> str:
    """A digest of the packaged kernel rules the parser reads (the op of an NCCL kernel comes
    from them): part of the parse cache's key, so an entry read under other rules is re-read."""
    import hashlib

    return hashlib.sha256(_kernel_rules_text().encode()).hexdigest()[:16]


def prepare() -> Iterator[None]:
    """Read the packaged NCCL kernel rules, in three steps (the yaml import, the resources
    import, the rules), ahead of the first op_from_name of the process."""
    if _nccl_kernel_rules.cache_info().currsize:
        return
    import yaml  # noqa: F401

    yield
    from importlib import resources  # noqa: F401

    yield
    _nccl_kernel_rules()


@lru_cache(maxsize=1)
def _nccl_kernel_rules() -> tuple[tuple[re.Pattern[str], str], ...]:
    """(pattern, op) of the packaged kernel rules of NCCL's device kernels (``library: nccl``
    rules for kernels in rules/data/kernels.yaml, the one list of NCCL kernel names of every
    era), in file order; a rule without an op (Generic kernels, an unknown collective) gives
    ``other``. Read straight from the packaged file with the C YAML loader: the rule set's
    import and validation of every packaged file would cost a parse twenty times as much."""
    import yaml

    text = _kernel_rules_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    rules = yaml.load(text, Loader=loader).get("kernel_classes") or []
    return tuple((re.compile(r["match"]), r.get("op") or Op.OTHER) for r in rules
                 if r.get("library") == "nccl" and Kind.KERNEL in (r.get("kinds") or [Kind.KERNEL]))


def op_from_collective(coll: str | None) -> str | None:
    """schema.Op of a ``Collective name``; None for ``wait`` and other non-collectives."""
    if not coll or coll in _NOT_COLLECTIVES:
        return None
    return COLLECTIVE_OPS.get(coll, Op.OTHER)


@lru_cache(maxsize=1 << 16)
def op_from_name(name: str | None) -> str | None:
    """schema.Op from an event name: c10d / functional ops, nccl:/gloo: titles, NCCL kernels
    (by the packaged NCCL kernel rules; memoised: the same names recur in every rank file
    of a run)."""
    if not name:
        return None
    if name.startswith("nccl"):
        for pattern, op in _nccl_kernel_rules():
            if pattern.search(name):
                return op
    for prefix in _NAME_PREFIXES:
        if name.startswith(prefix):
            base = name[len(prefix):].split(" ", 1)[0].rstrip("_")
            base = base.removesuffix("_out")
            if base in _NOT_COLLECTIVES:
                return None
            return COLLECTIVE_OPS.get(base, Op.OTHER)
    return None


def parse_int_list(value: Any, bits: int = 64) -> list[int] | None:
    """``[1, 2]`` or ``"[1, 2]"`` -> [1, 2]; a truncated string list (``…``/``...``), or a
    value beyond a signed ``bits``-bit integer (the column's type) -> None."""
    out = _int_list(value)
    return out if not out or fits(out, bits) else None


def fits(values: list[int], bits: int) -> bool:
    """Every value fits a signed ``bits``-bit integer."""
    return -(1 << (bits - 1)) <= min(values) and max(values) < 1 << (bits - 1)


def _int_list(value: Any) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, list):
        try:  # pg_config lists of a 1,024-rank run: one C pass (bools read as ints, as below)
            return array("q", value).tolist()
        except (TypeError, OverflowError):  # not all ints, or beyond int64
            return list(map(int, value)) if all(map(isinstance, value, repeat(int))) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if "…" in text or "..." in text:
        return None
    text = text.strip("[]() ")
    if not text:
        return []
    try:
        return list(map(int, text.split(",")))
    except ValueError:
        return None


def nelems(dims: Any) -> int | None:
    """Element count of ``Input Dims`` of one argument: a shape, or a list of shapes."""
    if not isinstance(dims, list):
        return None
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    total = 0
    for d in dims:
        n = nelems(d)
        if n is None:
            return None
        total += n
    return total


@dataclass
class CommRecord:
    """Communication metadata of one event (one row of the comm side table)."""

    op: str | None = None
    coll_name: str | None = None
    dtype: str | None = None
    in_nelems: int | None = None
    out_nelems: int | None = None
    in_split: list[int] | None = None
    out_split: list[int] | None = None
    group_size: int | None = None
    pg_name: str | None = None
    pg_desc: str | None = None
    pg_ranks: list[int] | None = None
    seq: int | None = None
    comms_id: int | None = None
    peer_rank: int | None = None
    meta_source: str = MetaSource.ARGS

    def nbytes(self, n: int | None) -> int | None:
        size = DTYPE_BYTES.get(self.dtype or "")
        return None if n is None or size is None else n * size
