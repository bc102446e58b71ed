"""Bounds: nccl-tests sizes and factors, algorithm families, seed 003 worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracekit.measure import bounds
from tracekit.measure.hardware import load_profile
from tracekit.schema import Op


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        (Op.ALL_REDUCE, 8, 1.75),  # 2(n-1)/n
        (Op.ALL_REDUCE, 2, 1.0),
        (Op.ALL_GATHER, 8, 0.875),  # (n-1)/n
        (Op.REDUCE_SCATTER, 4, 0.75),
        (Op.ALL_TO_ALL, 16, 15 / 16),
        (Op.ALL_TO_ALLV, 4, 0.75),
        (Op.BROADCAST, 8, 1.0),
        (Op.REDUCE, 8, 1.0),
        (Op.SEND, 2, 1.0),
    ],
)
def test_bus_factor_matches_nccl_tests(op: str, n: int, factor: float) -> None:
    """GIVEN an op and group size WHEN taking the bus factor THEN it is the nccl-tests one."""
    assert bounds.bus_factor(op, n) == pytest.approx(factor)


def test_bus_factor_undefined_for_barrier() -> None:
    """GIVEN a barrier WHEN asking its bus factor THEN there is none (NaN), not a guess."""
    assert math.isnan(bounds.bus_factor(Op.BARRIER, 8))


def test_allreduce_example_by_hand() -> None:
    """GIVEN a 1 Mi-float AllReduce on 8 ranks taking 100 us (nccl-tests row by hand)
    WHEN computing S, algbw and busbw
    THEN S = 4,194,304 B, algbw = 41.943 GB/s (1e9), busbw = 1.75 x algbw = 73.400 GB/s."""
    s = bounds.message_size(Op.ALL_REDUCE, 4 * 2**20, 4 * 2**20, 8)
    assert s == 4_194_304
    assert bounds.algbw_gbps(s, 100_000) == pytest.approx(41.94304)
    assert bounds.busbw_gbps(Op.ALL_REDUCE, s, 100_000, 8) == pytest.approx(73.40032)


def test_message_size_per_op() -> None:
    """GIVEN per-rank in/out bytes WHEN sizing THEN S follows nccl-tests' definition per op."""
    mib = 2**20
    # AllGather: sendcount * n * dsize = the output buffer; derived from input when missing
    assert bounds.message_size(Op.ALL_GATHER, 4 * mib, 32 * mib, 8) == 32 * mib
    assert bounds.message_size(Op.ALL_GATHER, 4 * mib, float("nan"), 8) == 32 * mib
    # ReduceScatter: recvcount * n * dsize = the input buffer
    assert bounds.message_size(Op.REDUCE_SCATTER, 32 * mib, 4 * mib, 8) == 32 * mib
    assert bounds.message_size(Op.REDUCE_SCATTER, float("nan"), 4 * mib, 8) == 32 * mib
    # AllToAll: the whole send buffer, self chunk included
    assert bounds.message_size(Op.ALL_TO_ALL, 8 * mib, 8 * mib, 8) == 8 * mib
    # AllToAllv: max(send, recv) of the rank
    assert bounds.message_size(Op.ALL_TO_ALLV, 3 * mib, 5 * mib, 4) == 5 * mib
    assert bounds.message_size(Op.BROADCAST, mib, mib, 8) == mib


def test_vectorised_variants_equal_scalar() -> None:
    """GIVEN arrays of mixed ops WHEN using the *_v functions THEN each row equals the scalar."""
    ops = np.array([Op.ALL_REDUCE, Op.ALL_GATHER, None, Op.SEND], dtype=object)
    n = np.array([8, 4, 2, 2])
    ib = np.array([100.0, 10.0, 5.0, 7.0])
    ob = np.array([100.0, 40.0, 5.0, np.nan])
    f = bounds.bus_factor_v(ops, n)
    assert f[0] == 1.75 and f[1] == 0.75 and math.isnan(f[2]) and f[3] == 1.0
    s = bounds.message_size_v(ops, ib, ob, n)
    assert list(s[[0, 1, 3]]) == [100.0, 40.0, 7.0] and math.isnan(s[2])
    t = bounds.lower_bound_v(ops, s, n, 1000.0, 10.0)
    assert t[0] == pytest.approx(bounds.lower_bound_ns(Op.ALL_REDUCE, 100.0, 8, 1000.0, 10.0))
    assert t[0] == pytest.approx(1000 + 1.75 * 100 / 10)
    # the ops factorized once give the same rows (NaN where there is no op)
    coded = bounds.op_codes(ops)
    for got, want in ((bounds.bus_factor_v(coded, n), f),
                      (bounds.message_size_v(coded, ib, ob, n), s),
                      (bounds.lower_bound_v(coded, s, n, 1000.0, 10.0), t),
                      (bounds.ring_steps_v(coded, n), bounds.ring_steps_v(ops, n))):
        assert np.array_equal(got, want, equal_nan=True)


def test_lower_bound_h200_allreduce() -> None:
    """GIVEN a 1 GB AllReduce on 8 H200 (alpha 15 us, B 370 GB/s)
    WHEN bounding THEN T = 15 us + 1.75 * 1e9 / 370 ns = 4,744.73 us; one rank: 0."""
    t = bounds.lower_bound_ns(Op.ALL_REDUCE, 1e9, 8, 15_000, 370)
    assert t == pytest.approx(15_000 + 1.75e9 / 370)
    assert t / 1e3 == pytest.approx(4744.73, abs=0.01)
    assert bounds.lower_bound_ns(Op.ALL_REDUCE, 1e9, 1, 15_000, 370) == 0


def test_nvls_factor() -> None:
    """GIVEN NVLS AllReduce on 8 ranks WHEN bounding THEN the factor is (n+1)/n = 9/8,
    1.56x below the 2(n-1)/n ring bandwidth term (BOUNDS 2.4)."""
    t = bounds.nvls_allreduce_ns(8e9, 8, 0.0, 400.0)
    assert t == pytest.approx(9 / 8 * 8e9 / 400)
    ring = bounds.lower_bound_ns(Op.ALL_REDUCE, 8e9, 8, 0.0, 400.0)
    assert ring / t == pytest.approx(1.75 / 1.125)


@pytest.mark.parametrize(
    ("op", "algo", "n", "steps", "factor"),
    [
        (Op.ALL_REDUCE, "ring", 4, 6, 1.5),  # 2(p-1), 2(p-1)/p
        (Op.ALL_GATHER, "ring", 8, 7, 7 / 8),
        (Op.ALL_REDUCE, "tree", 8, 6, 2.0),  # 2 lg p, NCCL algbw = busBw / 2
        (Op.BROADCAST, "tree", 8, 3, 3.0),  # binomial lg p, lg p
        (Op.ALL_REDUCE, "recursive", 8, 3, 3.0),
        (Op.ALL_GATHER, "recursive", 8, 3, 7 / 8),
        (Op.REDUCE_SCATTER, "recursive", 16, 4, 15 / 16),
        (Op.ALL_REDUCE, "rabenseifner", 8, 6, 1.75),
        (Op.ALL_REDUCE, "rabenseifner", 6, 6, 2 * 5 / 6 + 2),  # (2 floor(lg 6) + 2)
        (Op.ALL_TO_ALL, "pairwise", 8, 7, 7 / 8),
        (Op.ALL_TO_ALL, "bruck", 8, 3, 3 * 7 / 16),  # lg N (N-1) m / 2, m = S/N
        (Op.ALL_GATHER, "bruck", 5, 3, 4 / 5),
        (Op.ALL_TO_ALL, "p2p_direct", 8, 1, 7 / 8),
        (Op.SEND, "p2p_direct", 2, 1, 1.0),
        (Op.ALL_REDUCE, "nvls", 8, 1, 9 / 8),
    ],
)
def test_algorithm_families(op: str, algo: str, n: int, steps: float, factor: float) -> None:
    """GIVEN an algorithm family WHEN asking its cost THEN the MPICH / seed coefficients."""
    cost = bounds.algorithm_cost(op, algo, n)
    assert cost.latency_steps == pytest.approx(steps)
    assert cost.bw_factor == pytest.approx(factor)


def test_unknown_algorithm_is_an_error() -> None:
    """GIVEN an algorithm the op does not have WHEN asking THEN ValueError, not a guess."""
    with pytest.raises(ValueError, match="not defined"):
        bounds.algorithm_cost(Op.BROADCAST, "bruck", 8)
    with pytest.raises(ValueError, match="unknown algorithm"):
        bounds.algorithm_cost(Op.ALL_REDUCE, "magic", 8)


def test_seed_003_moe_traffic_worked_numbers() -> None:
    """GIVEN DeepSeek-V3 (h=7168, B=4096 tokens, K=8) in BF16 (2 B/element)
    WHEN computing the seed's M_total = B K h dtype over an EP group
    THEN per chip M_total/N = 58,720,256 B (58.7 MB) at EP=8 and 7,340,032 B (7.3 MB) at EP=64;
    uniform per pair M_total/N^2 = 7.3 MB at EP=8 and 114,688 B at EP=64."""
    ep8 = bounds.moe_traffic(4096, 8, 7168, 2, 8)
    ep64 = bounds.moe_traffic(4096, 8, 7168, 2, 64)
    assert ep8.total_bytes == 469_762_048
    assert ep8.per_chip_bytes == 58_720_256 and round(ep8.per_chip_bytes / 1e6, 1) == 58.7
    assert ep64.per_chip_bytes == 7_340_032 and round(ep64.per_chip_bytes / 1e6, 1) == 7.3
    assert ep8.per_pair_bytes == 7_340_032
    # The seed's table prints 117 KB here; B K h dtype / N^2 gives 114.7 kB (112 KiB).
    assert ep64.per_pair_bytes == 114_688
    # FP8 dispatch (1 B) is half of BF16 combine: 7168 vs 14336 bytes per token
    assert bounds.moe_traffic(1, 1, 7168, 1, 1).total_bytes == 7168
    assert bounds.moe_traffic(1, 1, 7168, 2, 1).total_bytes == 14336


def test_seed_003_bounds_on_worked_numbers() -> None:
    """GIVEN the EP=8 uniform dispatch (58.7 MB per chip) on H800 NVLink (160 GB/s measured,
    alpha 15 us) WHEN applying each seed 003 formula THEN:
    bandwidth bound (N-1)M/(N B) = 7/8 * 58,720,256 / 160 = 321,126.4 ns;
    P2P direct = alpha + that; pairwise = 7 alpha + that; Bruck = 3 alpha + 3/2 of (N-1)M/(N B);
    the all-to-allv bound on the uniform matrix equals the bandwidth bound."""
    m = 58_720_256
    bw, alpha = 160.0, 15_000.0
    beta_term = bounds.a2a_bandwidth_lower_ns(m, 8, bw)
    assert beta_term == pytest.approx(321_126.4)
    assert bounds.algorithm_time_ns(Op.ALL_TO_ALL, "p2p_direct", m, 8, alpha, bw) == \
        pytest.approx(alpha + 321_126.4)
    assert bounds.algorithm_time_ns(Op.ALL_TO_ALL, "pairwise", m, 8, alpha, bw) == \
        pytest.approx(7 * alpha + 321_126.4)
    assert bounds.algorithm_time_ns(Op.ALL_TO_ALL, "bruck", m, 8, alpha, bw) == \
        pytest.approx(3 * alpha + 1.5 * 321_126.4)
    assert bounds.a2a_latency_lower_ns(8, alpha) == 7 * alpha
    uniform = np.full((8, 8), m / 8)
    assert bounds.alltoallv_lower_ns(uniform, bw) == pytest.approx(321_126.4)
    # EP=64: 7.3 MB per chip over one 50 GB/s NIC
    assert bounds.a2a_bandwidth_lower_ns(7_340_032, 64, 50.0) == pytest.approx(
        63 / 64 * 7_340_032 / 50)


def test_bisection_capacity_and_crossover() -> None:
    """GIVEN the seed's bisection, capacity and Bruck crossover formulas WHEN evaluated
    THEN N M / (4 B_bis); C B K / E; (N-1) alpha beta / (ceil(lg N) - 1)."""
    assert bounds.bisection_lower_ns(8, 1e6, 100.0) == pytest.approx(8 * 1e6 / 400)
    assert bounds.expert_capacity(1.25, 4096, 8, 256) == pytest.approx(160.0)
    assert bounds.bruck_crossover_bytes(64, 10_000.0, 50.0) == pytest.approx(63 * 10_000 * 50 / 5)
    assert bounds.bruck_crossover_bytes(2, 10_000.0, 50.0) == math.inf


def test_alltoallv_bound_on_skewed_matrix() -> None:
    """GIVEN a skewed 4x4 matrix where rank 3 receives 9 MB
    WHEN bounding THEN the busiest receiver decides: 9e6 / B, not the mean."""
    c = np.array([
        [1e6, 1e6, 1e6, 3e6],
        [1e6, 0.0, 1e6, 3e6],
        [0.0, 1e6, 0.0, 3e6],
        [1e6, 0.0, 0.0, 5e6],  # self traffic does not count
    ])
    # sends (off-diagonal): 5e6, 5e6, 4e6, 1e6; receives: 2e6, 2e6, 2e6, 9e6
    assert bounds.alltoallv_lower_ns(c, 100.0) == pytest.approx(9e6 / 100)


def test_hierarchical_bound() -> None:
    """GIVEN an AllReduce over 2 nodes x 8 H100 (8 NICs of 48 GB/s per node)
    WHEN bounding THEN alpha + max(1.75 S / 370, 1.0 S / (8 * 48))."""
    s = 1e9
    t = bounds.hierarchical_ns(Op.ALL_REDUCE, s, 8, 2, 25_000, 370.0, 48.0, 8)
    assert t == pytest.approx(25_000 + max(1.75 * s / 370, s / 384))
    a2a = bounds.hierarchical_ns(Op.ALL_TO_ALL, s, 8, 2, 25_000, 370.0, 48.0, 8)
    assert a2a == pytest.approx(25_000 + max(s * 7 / 16 / 370, s * 8 / 16 / 48))


def test_mesh_bandwidth_depends_on_group_size() -> None:
    """GIVEN the 910B HCCS full mesh WHEN a TP=4 group talks inside the box
    THEN it gets 3 of the 7 links ((g-1) x link, BOUNDS 2.6), capped at 7."""
    hccs = load_profile("ascend-910b").intra_link
    assert hccs.effective_gbps(3) == pytest.approx(3 * hccs.achievable_gbps)
    assert hccs.effective_gbps(15) == pytest.approx(7 * hccs.achievable_gbps)


def test_chunked_overlap() -> None:
    """GIVEN dispatch 300 us, expert compute 500 us, combine tail 80 us WHEN pipelined in
    chunks THEN T ~ max(300, 500) + 80 = 580 us (seed 003 chunked overlap)."""
    assert bounds.chunked_overlap_ns(300e3, 500e3, 80e3) == pytest.approx(580e3)
