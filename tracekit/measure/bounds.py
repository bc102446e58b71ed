"""Alpha-beta costs and lower bounds of collectives. Pure functions; no tables, no I/O.

Conventions (nccl-tests ``doc/PERFORMANCE.md``; BOUNDS_AND_PEERS.md sections 1-2):

* ``S`` is the nccl-tests message size in bytes (``message_size``), ``n`` the group size.
* Bandwidths ``bw`` are GB/s with GB = 1e9 B, per rank and direction; since 1 GB/s is one byte
  per nanosecond, ``S / bw`` is a time in nanoseconds. ``alpha`` is in nanoseconds.
* ``algbw = S / t`` and ``busbw = algbw * bus_factor(op, n)``.
* Costs are written ``T = a(n) * alpha + f(n) * S / bw``; the gamma (reduction compute) terms
  of the MPICH formulas are left out: they do not bound the wire time.

The scalar functions accept numpy arrays as well (they are written with numpy operations);
``*_v`` functions take an array of op names too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from tracekit.schema import Op

FloatArray = npt.NDArray[np.float64]
Num = float | FloatArray

_REDUCE_ALL = frozenset({Op.ALL_REDUCE})
_N_MINUS_1_OVER_N = frozenset({
    Op.ALL_GATHER, Op.ALL_GATHERV, Op.REDUCE_SCATTER, Op.REDUCE_SCATTERV, Op.ALL_TO_ALL,
    Op.ALL_TO_ALLV, Op.GATHER, Op.SCATTER, Op.DISPATCH, Op.COMBINE,
})
_ONE = frozenset({Op.BROADCAST, Op.REDUCE, Op.SEND, Op.RECV, Op.SEND_RECV})
A2A_OPS = frozenset({Op.ALL_TO_ALL, Op.ALL_TO_ALLV, Op.DISPATCH, Op.COMBINE})


def _lg(n: Num) -> Num:
    """ceil(log2 n), at least 0."""
    return np.ceil(np.log2(np.maximum(n, 1)))


def bus_factor(op: str, n: Num) -> Num:
    """nccl-tests bus bandwidth factor f(n): busbw = algbw * f(n).

    AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll(v), Gather, Scatter (n-1)/n;
    Broadcast, Reduce, Send/Recv 1 (nccl-tests doc/PERFORMANCE.md "Summary"; BOUNDS 1.1-1.2).
    MoE dispatch/combine are all-to-all(v) exchanges and take (n-1)/n. NaN for anything else
    (barrier, fused kernels): no bus bandwidth is defined for them.
    """
    n_arr = np.asarray(n, dtype=np.float64)
    if op in _REDUCE_ALL:
        out = 2.0 * (n_arr - 1.0) / n_arr
    elif op in _N_MINUS_1_OVER_N:
        out = (n_arr - 1.0) / n_arr
    elif op in _ONE:
        out = np.ones_like(n_arr)
    else:
        out = np.full_like(n_arr, np.nan)
    return float(out) if out.ndim == 0 else out


def message_size(op: str, in_bytes: Num, out_bytes: Num, n: Num) -> Num:
    """nccl-tests message size S in bytes for one rank's view of a collective.

    AllReduce: count*dsize = the input buffer (``all_reduce.cu``); AllGather: sendcount*n*dsize =
    the output buffer (``all_gather.cu``); ReduceScatter: recvcount*n*dsize = the input buffer
    (``reduce_scatter.cu``); AllToAll: the whole send buffer, self chunk included
    (``alltoall.cu``); AllToAllv: max(send, recv) -- nccl-tests then takes the max over ranks
    (``alltoallv.cu``), which ``crossrank`` does per instance; Broadcast, Reduce, SendRecv:
    count*dsize; Gather/Scatter: count*n*dsize (BOUNDS 1.2 table). A missing side (NaN) is
    derived from the other one where the op fixes the ratio (AllGather out = n * in).
    """
    i = np.asarray(in_bytes, dtype=np.float64)
    o = np.asarray(out_bytes, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    if op in (Op.ALL_GATHER, Op.ALL_GATHERV, Op.GATHER):
        out = np.where(np.isnan(o), i * nn, o) if op != Op.GATHER else i * nn
    elif op in (Op.REDUCE_SCATTER, Op.REDUCE_SCATTERV):
        out = np.where(np.isnan(i), o * nn, i)
    elif op == Op.SCATTER:
        out = o * nn
    elif op in (Op.ALL_TO_ALLV, Op.SEND_RECV, Op.DISPATCH, Op.COMBINE):
        out = np.fmax(i, o)
    elif op in _REDUCE_ALL | _ONE | {Op.ALL_TO_ALL}:
        out = np.where(np.isnan(i), o, i)
    else:
        out = np.fmax(i, o)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class OpCodes:
    """An op column factorized once (:func:`op_codes`): the vector functions below take it
    instead of the ops themselves, so that several of them over one column hash it once."""

    codes: npt.NDArray[np.intp]  # per row, its op's index in ``names`` (-1: no op)
    names: np.ndarray


def op_codes(ops: npt.ArrayLike) -> OpCodes:
    codes, names = pd.factorize(np.asarray(ops, dtype=object))  # None / NaN: -1 (no op)
    return OpCodes(np.asarray(codes), np.asarray(names, dtype=object))


Ops = npt.ArrayLike | OpCodes  # per-row op names, or those factorized


def _by_op(ops: Ops, fn: Callable[[str, npt.NDArray[np.bool_]], FloatArray],
           size: int) -> FloatArray:
    """Apply ``fn(op, mask)`` once per distinct op value; vectorised within each op."""
    coded = ops if isinstance(ops, OpCodes) else op_codes(ops)
    out = np.full(size, np.nan)
    for k in np.argsort(np.asarray(coded.names, dtype=str), kind="stable"):
        mask = coded.codes == k
        out[mask] = fn(str(coded.names[k]), mask)
    return out


def bus_factor_v(ops: Ops, n: npt.ArrayLike) -> FloatArray:
    """``bus_factor`` over arrays of op names and group sizes (None op -> NaN)."""
    nn = np.asarray(n, dtype=np.float64)
    return _by_op(ops, lambda op, m: np.asarray(bus_factor(op, nn[m])), nn.size)


def ring_steps_v(ops: Ops, n: npt.ArrayLike) -> FloatArray:
    """NCCL ring latency steps (tuning.cc ``nsteps``): AllReduce 2(n-1), AllGather and
    ReduceScatter n-1, other collectives n; point-to-point and all-to-all (run as grouped
    p2p) 1. NaN for unknown ops."""
    nn = np.asarray(n, dtype=np.float64)

    def steps(op: str, m: npt.NDArray[np.bool_]) -> FloatArray:
        k = nn[m]
        if op == Op.ALL_REDUCE:
            return 2 * (k - 1)
        if op in (Op.ALL_GATHER, Op.ALL_GATHERV, Op.REDUCE_SCATTER, Op.REDUCE_SCATTERV):
            return k - 1
        if op in A2A_OPS or op in (Op.SEND, Op.RECV, Op.SEND_RECV):
            return np.ones_like(k)
        return k

    return _by_op(ops, steps, nn.size)


def message_size_v(ops: Ops, in_bytes: npt.ArrayLike, out_bytes: npt.ArrayLike,
                   n: npt.ArrayLike) -> FloatArray:
    """``message_size`` over arrays (NaN where bytes are unknown)."""
    i = np.asarray(in_bytes, dtype=np.float64)
    o = np.asarray(out_bytes, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    return _by_op(ops, lambda op, m: np.asarray(message_size(op, i[m], o[m], nn[m])), nn.size)


def algbw_gbps(msg_bytes: Num, time_ns: Num) -> Num:
    """algbw = S / t in GB/s (1e9 B/s): bytes per nanosecond (nccl-tests ``baseBw``)."""
    s = np.asarray(msg_bytes, dtype=np.float64)
    t = np.asarray(time_ns, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(t > 0, s / t, np.nan)
    return float(out) if out.ndim == 0 else out


def busbw_gbps(op: str, msg_bytes: Num, time_ns: Num, n: Num) -> Num:
    """busbw = algbw * f(n) (nccl-tests doc/PERFORMANCE.md)."""
    return algbw_gbps(msg_bytes, time_ns) * bus_factor(op, n)


# --------------------------------------------------------------------------------------------
# The bound tracekit reports (BOUNDS 2.3): one alpha plus the beta lower bound.
# --------------------------------------------------------------------------------------------


def lower_bound_ns(op: str, msg_bytes: Num, n: Num, alpha_ns: Num, bw_gbps: Num) -> Num:
    """T_lower = alpha + f(n) * S / B (BOUNDS_AND_PEERS.md 2.3).

    The bandwidth term is the Chan et al. (CCPE 2007, Table 1) lower bound for algorithms built
    from point-to-point transfers; f(n) equals the nccl-tests bus factor, so
    ``bound / t == busbw / B`` for large messages. The latency term is one per-op alpha of the
    link class. A one-rank collective moves nothing over a link: its bound is 0.
    """
    f = np.asarray(bus_factor(op, n), dtype=np.float64)
    s = np.asarray(msg_bytes, dtype=np.float64)
    out = np.where(np.asarray(n) > 1, np.asarray(alpha_ns) + f * s / np.asarray(bw_gbps), 0.0)
    return float(out) if out.ndim == 0 else out


def lower_bound_v(ops: Ops, msg_bytes: npt.ArrayLike, n: npt.ArrayLike,
                  alpha_ns: npt.ArrayLike, bw_gbps: npt.ArrayLike) -> FloatArray:
    """``lower_bound_ns`` over arrays: per-row op, S, n, alpha and bandwidth."""
    nn = np.asarray(n, dtype=np.float64)
    s = np.broadcast_to(np.asarray(msg_bytes, dtype=np.float64), nn.shape)
    a = np.broadcast_to(np.asarray(alpha_ns, dtype=np.float64), nn.shape)
    b = np.broadcast_to(np.asarray(bw_gbps, dtype=np.float64), nn.shape)
    return _by_op(ops, lambda op, m: np.asarray(lower_bound_ns(op, s[m], nn[m], a[m], b[m])),
                  nn.size)


def nvls_allreduce_ns(msg_bytes: Num, n: Num, alpha_ns: Num, bw_gbps: Num) -> Num:
    """In-network (NVLS / SHARP) AllReduce: alpha + (n+1)/n * S / B.

    With switch-side reduction each GPU sends about S and receives about S ("N+1 sends, N+1
    receives instead of 2N", nccl-tests #238; BOUNDS 2.4), so the factor is (n+1)/n instead of
    2(n-1)/n; nccl-tests still reports busbw with 2(n-1)/n, which is why NVLS busbw exceeds
    the link (about 480 GB/s on 8xH100, nccl-tests #212).
    """
    return np.asarray(alpha_ns) + (np.asarray(n) + 1.0) / np.asarray(n) * (
        np.asarray(msg_bytes, dtype=np.float64) / np.asarray(bw_gbps))


def hierarchical_ns(op: str, msg_bytes: Num, per_node: int, nodes: int, alpha_ns: float,
                    bw_intra: float, bw_nic: float, nics_per_node: int) -> Num:
    """Two-level bound of a group spanning ``nodes`` nodes with ``per_node`` ranks each.

    AllReduce (pipelined): alpha + max(2(g-1)/g * S/B_intra, 2(N-1)/N * S/(k*B_nic));
    AllToAll: alpha + max(S(g-1)/n / B_intra, S(n-g)/n / B_nic) (BOUNDS 2.3); AllGather and
    ReduceScatter take the AllReduce form with factor (x-1)/x. Other ops: the inter-node
    single-class bound. ``k`` = NICs per node shared by the node's ranks.
    """
    g, nn, n = per_node, nodes, per_node * nodes
    s = np.asarray(msg_bytes, dtype=np.float64)
    if op in A2A_OPS:
        out = alpha_ns + np.maximum(s * (g - 1) / n / bw_intra, s * (n - g) / n / bw_nic)
    elif op in (Op.ALL_REDUCE, Op.ALL_GATHER, Op.ALL_GATHERV, Op.REDUCE_SCATTER,
                Op.REDUCE_SCATTERV):
        intra = float(bus_factor(op, g)) * s / bw_intra if g > 1 else np.zeros_like(s)
        inter = float(bus_factor(op, nn)) * s / (nics_per_node * bw_nic)
        out = alpha_ns + np.maximum(intra, inter)
    else:
        out = np.asarray(lower_bound_ns(op, s, n, alpha_ns, bw_nic))
    return float(out) if np.ndim(out) == 0 else out


# --------------------------------------------------------------------------------------------
# Algorithm families: T = a(p) alpha + f(p) S / B (MPICH comments, Thakur et al. IJHPCA 2005).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """Coefficients of one algorithm: ``latency_steps * alpha + bw_factor * S / B``."""

    latency_steps: float
    bw_factor: float

    def time_ns(self, msg_bytes: float, alpha_ns: float, bw_gbps: float) -> float:
        return self.latency_steps * alpha_ns + self.bw_factor * msg_bytes / bw_gbps


def _ring(op: str, p: int) -> Cost:
    """Ring. AllReduce 2(p-1)a + 2(p-1)/p Sb (Patarasuk & Yuan, JPDC 2009); AllGather
    (p-1)a + (p-1)/p Sb (MPICH allgather_intra_ring.c); ReduceScatter the same; AllToAll
    (N-1)a + (N-1)M/(N b) (seed 003 eq. cc-a2a-ring)."""
    if op == Op.ALL_REDUCE:
        return Cost(2 * (p - 1), 2 * (p - 1) / p)
    return Cost(p - 1, (p - 1) / p)


def _tree(op: str, p: int) -> Cost:
    """Trees. AllReduce, NCCL double binary tree: 2 lg p a, pipelined algbw = busBw / 2, i.e.
    2 S / B (tuning.cc l.376-382; Sanders, Speck & Traff 2009); Broadcast and Reduce,
    binomial: lg p a + lg p S b (MPICH bcast_intra_binomial.c, reduce_intra_binomial.c);
    Gather/Scatter binomial: lg p a + (p-1)/p S b."""
    lg = float(_lg(p))
    if op == Op.ALL_REDUCE:
        return Cost(2 * lg, 2.0)
    if op in (Op.GATHER, Op.SCATTER):
        return Cost(lg, (p - 1) / p)
    return Cost(lg, lg)


def _recursive(op: str, p: int) -> Cost:
    """Recursive doubling / halving. AllReduce lg p a + lg p S b
    (allreduce_intra_recursive_doubling.c); AllGather lg p a + (p-1)/p S b
    (allgather_intra_recursive_doubling.c); ReduceScatter, recursive halving lg p a +
    (p-1)/p S b (reduce_scatter_intra_recursive_halving.c)."""
    lg = float(_lg(p))
    if op == Op.ALL_REDUCE:
        return Cost(lg, lg)
    return Cost(lg, (p - 1) / p)


def _rabenseifner(op: str, p: int) -> Cost:
    """Rabenseifner (reduce-scatter by recursive halving + allgather by recursive doubling /
    gather). AllReduce and Reduce 2 lg p a + 2(p-1)/p S b when p is a power of two;
    otherwise (2 floor(lg p) + 2) a + (2(p-1)/p + 2) S b
    (allreduce_intra_reduce_scatter_allgather.c l.34-38; reduce_intra_reduce_scatter_gather.c)."""
    if p & (p - 1) == 0:
        return Cost(2 * float(_lg(p)), 2 * (p - 1) / p)
    return Cost(2 * math.floor(math.log2(p)) + 2, 2 * (p - 1) / p + 2)


def _pairwise(op: str, p: int) -> Cost:
    """Pairwise exchange: (p-1) a + (p-1)/p S b, S the whole send buffer (MPICH
    alltoall_intra_pairwise.c, whose n is S(p-1)/p; reduce_scatter_block_intra_pairwise.c;
    seed 003 eq. cc-a2a-pairwise)."""
    return Cost(p - 1, (p - 1) / p)


def _bruck(op: str, p: int) -> Cost:
    """Bruck. AllToAll: ceil(lg p) a + ceil(lg p) (p-1)/(2p) S b (seed 003 eq. cc-a2a-bruck:
    lg N (N-1) m / 2b with m = S/N; MPICH alltoall_intra_brucks.c); AllGather: ceil(lg p) a
    + (p-1)/p S b (allgather_intra_brucks.c)."""
    lg = float(_lg(p))
    if op in A2A_OPS:
        return Cost(lg, lg * (p - 1) / (2 * p))
    return Cost(lg, (p - 1) / p)


def _p2p_direct(op: str, p: int) -> Cost:
    """NCCL P2P direct (all sends and receives enqueued at once, fully connected NVSwitch):
    a + (N-1)M/(N d b) (seed 003 eq. cc-a2a-p2p-direct); Send/Recv a + S b."""
    if op in A2A_OPS:
        return Cost(1, (p - 1) / p)
    return Cost(1, 1.0)


def _nvls(op: str, p: int) -> Cost:
    """In-network reduction (NVLS / SHARP) AllReduce: a + (p+1)/p S b (BOUNDS 2.4)."""
    return Cost(1, (p + 1) / p)


ALGORITHMS: dict[str, tuple[Callable[[str, int], Cost], frozenset[str]]] = {
    "ring": (_ring, frozenset({Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL})),
    "tree": (_tree, frozenset({Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE, Op.GATHER, Op.SCATTER})),
    "recursive": (_recursive, frozenset({Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER})),
    "rabenseifner": (_rabenseifner, frozenset({Op.ALL_REDUCE, Op.REDUCE})),
    "pairwise": (_pairwise, frozenset({Op.ALL_TO_ALL, Op.ALL_TO_ALLV, Op.REDUCE_SCATTER})),
    "bruck": (_bruck, frozenset({Op.ALL_TO_ALL, Op.ALL_TO_ALLV, Op.ALL_GATHER})),
    "p2p_direct": (_p2p_direct, frozenset({Op.ALL_TO_ALL, Op.ALL_TO_ALLV, Op.SEND, Op.RECV,
                                           Op.SEND_RECV})),
    "nvls": (_nvls, frozenset({Op.ALL_REDUCE})),
}


def algorithm_cost(op: str, algorithm: str, n: int) -> Cost:
    """Coefficients of ``algorithm`` for ``op`` over ``n`` ranks (see each family's doc)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    fn, ops = ALGORITHMS[algorithm]
    if op not in ops:
        raise ValueError(f"algorithm {algorithm!r} is not defined for {op!r}")
    if n < 1:
        raise ValueError("n must be >= 1")
    return fn(op, n)


def algorithm_time_ns(op: str, algorithm: str, msg_bytes: float, n: int, alpha_ns: float,
                      bw_gbps: float) -> float:
    """Modelled time of ``op`` by ``algorithm``: a(n) alpha + f(n) S / B."""
    return algorithm_cost(op, algorithm, n).time_ns(msg_bytes, alpha_ns, bw_gbps)


def bruck_crossover_bytes(n: int, alpha_ns: float, bw_gbps: float) -> float:
    """Per-pair message m* below which Bruck beats pairwise all-to-all:
    m* = (N-1) alpha beta / (ceil(lg N) - 1), beta = bytes per ns (seed 003
    eq. cc-a2a-bruck-crossover)."""
    lg = float(_lg(n))
    if lg <= 1:
        return math.inf
    return (n - 1) * alpha_ns * bw_gbps / (lg - 1)


# --------------------------------------------------------------------------------------------
# All-to-all(v) and MoE traffic (seed 003; DOMAIN.md section 7; BOUNDS 2.5)
# --------------------------------------------------------------------------------------------


def a2a_latency_lower_ns(n: int, alpha_ns: float) -> float:
    """All-to-all latency lower bound (N-1) alpha: every pair holds unique data that cannot be
    merged on the way (seed 003 eq. cc-a2a-delay-lb)."""
    return (n - 1) * alpha_ns


def a2a_bandwidth_lower_ns(msg_bytes: Num, n: Num, bw_gbps: Num, ports: int = 1) -> Num:
    """(N-1) M / (N d B): each rank sends and receives (N-1)/N of its M bytes over d ports
    (seed 003 eq. alltoall-bw-lower-bound)."""
    nn = np.asarray(n, dtype=np.float64)
    out = (nn - 1) * np.asarray(msg_bytes, dtype=np.float64) / (nn * ports * np.asarray(bw_gbps))
    return float(out) if np.ndim(out) == 0 else out


def bisection_lower_ns(n: int, msg_bytes: float, bisection_gbps: float) -> float:
    """N M / (4 B_bisection): half the ranks send N M / 4 bytes across the cut (seed 003
    eq. cc-a2a-bisection-lb)."""
    return n * msg_bytes / (4.0 * bisection_gbps)


def alltoallv_lower_ns(matrix: npt.ArrayLike, bw_gbps: float, ports: int = 1) -> float:
    """T >= max_i sum_{j != i} C[i][j] / (d B), and likewise for what each rank receives:
    the busiest rank bounds a non-uniform all-to-all, not the average (seed 003 eq.
    cc-a2a-v-lb and cc-a2a-dispatch-lb)."""
    c = np.asarray(matrix, dtype=np.float64)
    off = c - np.diag(np.diag(c))
    busiest = max(off.sum(axis=1).max(initial=0.0), off.sum(axis=0).max(initial=0.0))
    return float(busiest / (ports * bw_gbps))


@dataclass(frozen=True)
class MoeTraffic:
    """MoE all-to-all volume (seed 003 "通信量估算")."""

    total_bytes: float  # B K h dtype over the EP group
    per_chip_bytes: float  # total / N: what one chip sends (self share included)
    per_pair_bytes: float  # total / N^2 under uniform routing


def moe_traffic(tokens: int, topk: int, hidden: int, dtype_bytes: int, n: int) -> MoeTraffic:
    """M_total = B K h dtype_size (eq. cc-a2a-moe-total); per chip M_total / N; uniform per
    pair m_pair = B K h dtype_size / N^2 (eq. cc-a2a-moe-pair). B counts tokens over the whole
    EP group; the seed's table (58.7 MB per chip at EP=8) uses dtype_size 2 (BF16)."""
    total = float(tokens) * topk * hidden * dtype_bytes
    return MoeTraffic(total, total / n, total / (n * n))


def expert_capacity(capacity_factor: float, tokens: int, topk: int, experts: int) -> float:
    """Tokens one expert accepts: C * B * K / E (seed 003 eq. cc-a2a-expert-capacity)."""
    return capacity_factor * tokens * topk / experts


def chunked_overlap_ns(dispatch_ns: Num, compute_ns: Num, combine_tail_ns: Num) -> Num:
    """Ideal end-to-end time of a chunked dispatch / experts / combine pipeline:
    T ~ max(T_dispatch, T_compute) + T_combine_tail (seed 003 eq. cc-a2a-chunked-overlap)."""
    out = np.maximum(np.asarray(dispatch_ns, dtype=np.float64),
                     np.asarray(compute_ns, dtype=np.float64)) + np.asarray(combine_tail_ns)
    return float(out) if np.ndim(out) == 0 else out
