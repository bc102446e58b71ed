"""Sizes of c10d dispatcher ops, functional collectives and ``gloo:*`` titles from their
record_shapes args (``Input Dims``, ``Input type``, ``Concrete Inputs``), TRACE_FORMATS.md A.6.

ProcessGroupGloo writes no record_param_comms, so on CPU traces these are the only sizes.
Argument positions follow the c10d / _c10d_functional operator schemas of torch 2.x.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracekit.parsers.kineto.comm import CommRecord, nelems, op_from_name, parse_int_list
from tracekit.schema import MetaSource, Op


@dataclass(frozen=True)
class Spec:
    """Where an op's tensors, split lists and group name sit in its argument list."""

    inp: int | None = None  # the input tensor (or tensor list)
    out: int | None = None  # the output tensor (or list); None = same as the input
    out_split: int | None = None
    in_split: int | None = None
    group: int | None = None  # group name (functional collectives)
    group_size: int | None = None  # group size argument (functional all_gather / RS)


_SPECS: dict[str, Spec] = {
    "c10d::allreduce_": Spec(inp=0),
    "c10d::allreduce_coalesced_": Spec(inp=0),
    "c10d::allgather_": Spec(inp=1, out=0),
    "c10d::_allgather_base_": Spec(inp=1, out=0),
    "c10d::allgather_coalesced_": Spec(inp=1, out=0),
    "c10d::allgather_into_tensor_coalesced_": Spec(inp=1, out=0),
    "c10d::reduce_scatter_": Spec(inp=1, out=0),
    "c10d::_reduce_scatter_base_": Spec(inp=1, out=0),
    "c10d::reduce_scatter_tensor_coalesced_": Spec(inp=1, out=0),
    "c10d::alltoall_base_": Spec(inp=1, out=0, out_split=3, in_split=4),
    "c10d::alltoall_": Spec(inp=1, out=0),
    "c10d::broadcast_": Spec(inp=0),
    "c10d::reduce_": Spec(inp=0),
    "c10d::gather_": Spec(inp=1, out=0),
    "c10d::scatter_": Spec(inp=1, out=0),
    "c10d::send": Spec(inp=0),
    "c10d::recv_": Spec(inp=0),
    "c10d::recv_any_source_": Spec(inp=0),
    "c10d::barrier": Spec(),
    "c10d::monitored_barrier_": Spec(),
    "_c10d_functional::all_reduce": Spec(inp=0, group=2),
    "_c10d_functional::all_reduce_": Spec(inp=0, group=2),
    "_c10d_functional::all_reduce_coalesced": Spec(inp=0, group=2),
    "_c10d_functional::all_gather_into_tensor": Spec(inp=0, group=2, group_size=1),
    "_c10d_functional::all_gather_into_tensor_out": Spec(inp=0, group=2, group_size=1),
    "_c10d_functional::reduce_scatter_tensor": Spec(inp=0, group=3, group_size=2),
    "_c10d_functional::all_to_all_single": Spec(inp=0, out_split=1, in_split=2, group=3),
    "_c10d_functional::broadcast": Spec(inp=0, group=2),
}
_GLOO = Spec(inp=0)


def spec_for(name: str) -> Spec | None:
    if name.startswith("gloo:"):
        return _GLOO
    return _SPECS.get(name)


def _at(values: Any, pos: int | None) -> Any:
    if pos is None or not isinstance(values, list) or pos >= len(values):
        return None
    return values[pos]


def _dtype(types: Any, pos: int | None) -> str | None:
    t = _at(types, pos)
    if not isinstance(t, str) or not t or t in ("TensorList", "ScalarList", "Scalar"):
        return None
    return t


def _count(dims: Any, types: Any, pos: int | None) -> int | None:
    if pos is None:
        return None
    t = _at(types, pos)
    if t == "" or t in ("Scalar", "ScalarList"):
        return None
    return nelems(_at(dims, pos))


def from_inputs(name: str, args: Mapping[str, Any]) -> CommRecord | None:
    """CommRecord of a c10d op / functional collective / gloo title; None if not one."""
    spec = spec_for(name)
    op = op_from_name(name)
    if spec is None or op is None:
        return None
    dims, types, concrete = args.get("input_dims"), args.get("input_type"), args.get("concrete")
    out_pos = spec.inp if spec.out is None else spec.out
    rec = CommRecord(op=op, meta_source=MetaSource.INPUTS)
    rec.in_nelems = _count(dims, types, spec.inp)
    rec.out_nelems = _count(dims, types, out_pos)
    rec.dtype = _dtype(types, spec.inp) or _dtype(types, out_pos)
    rec.in_split = parse_int_list(_at(concrete, spec.in_split)) or None
    rec.out_split = parse_int_list(_at(concrete, spec.out_split)) or None
    group = _at(concrete, spec.group)
    rec.pg_name = group if isinstance(group, str) and group else None
    size = _at(concrete, spec.group_size)
    if isinstance(size, str) and size.isdigit():
        rec.group_size = int(size)
        if op == Op.ALL_GATHER and rec.in_nelems is not None:
            rec.out_nelems = rec.in_nelems * rec.group_size
        if op == Op.REDUCE_SCATTER and rec.in_nelems is not None and rec.group_size:
            rec.out_nelems = rec.in_nelems // rec.group_size
    if op == Op.ALL_TO_ALL and (rec.in_split or rec.out_split):
        rec.op = Op.ALL_TO_ALLV
    if op == Op.BARRIER:
        rec.in_nelems = rec.out_nelems = None
        rec.dtype = None
    return rec
