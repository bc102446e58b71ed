"""The numpy searches of rules/layers.py (host times, enclosing spans) against the pandas
steps they replaced, on random inputs with ties and missing correlations: same spans, same
times, the same float64 rounding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.layers import _enclosing, host_times


def _enclosing_by_pandas(units: pd.DataFrame, spans: pd.DataFrame) -> pd.Series:
    out = pd.Series(np.nan, index=units.index)
    if spans.empty or units.empty:
        return out
    spans = spans.sort_values([S.RANK, S.TS_NS]).copy()
    spans[F.END] = spans[S.TS_NS] + spans[S.DUR_NS]
    spans[F.STEP] = spans.groupby(S.RANK).cumcount()
    left = units[[S.RANK, F.ORDER_TS]].reset_index().sort_values(F.ORDER_TS)
    right = spans[[S.RANK, S.TS_NS, F.END, F.STEP]].sort_values(S.TS_NS)
    hit = pd.merge_asof(left, right, left_on=F.ORDER_TS, right_on=S.TS_NS, by=S.RANK,
                        direction="backward")
    hit.loc[~(hit[F.ORDER_TS] <= hit[F.END]), F.STEP] = np.nan
    return hit.set_index(hit.columns[0])[F.STEP].reindex(units.index)


def _host_times_by_pandas(events: pd.DataFrame, units: pd.DataFrame) -> pd.Series:
    out = units[F.ORDER_TS].copy()
    runtime = events.loc[((events[S.KIND] == S.Kind.RUNTIME)
                          & events[S.CORRELATION].notna()).to_numpy(),
                         [S.RANK, S.CORRELATION, S.TS_NS]]
    if runtime.empty:
        return out
    launch = runtime.drop_duplicates([S.RANK, S.CORRELATION]).set_index(
        [S.RANK, S.CORRELATION])[S.TS_NS]
    device = units.loc[(units[S.CORRELATION].notna()
                        & (units[S.KIND] == S.Kind.KERNEL)).to_numpy(), [S.RANK, S.CORRELATION]]
    keys = pd.MultiIndex.from_frame(device[[S.RANK, S.CORRELATION]])
    found = pd.Series(launch.reindex(keys).to_numpy(), index=device.index).reindex(out.index)
    return out.where(found.isna(), found).astype(np.int64)


@pytest.mark.parametrize("seed", range(60))
def test_enclosing_spans_match_merge_asof(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ns, nu = int(rng.integers(1, 30)), int(rng.integers(1, 40))
    spans = pd.DataFrame({S.RANK: rng.integers(0, 3, ns).astype(np.int32),
                          S.TS_NS: rng.integers(0, 12, ns),  # many equal starts
                          S.DUR_NS: rng.integers(0, 8, ns)}, index=rng.permutation(500)[:ns])
    units = pd.DataFrame({S.RANK: rng.integers(0, 4, nu).astype(np.int32),
                          F.ORDER_TS: rng.integers(0, 25, nu)},
                         index=rng.permutation(500)[:nu] + 1000)
    pd.testing.assert_series_equal(_enclosing(units, spans), _enclosing_by_pandas(units, spans),
                                   check_names=False)


@pytest.mark.parametrize("seed", range(60))
def test_host_times_match_the_pandas_lookup(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    kinds = [S.Kind.RUNTIME, S.Kind.KERNEL, S.Kind.CPU_OP]
    events = pd.DataFrame({
        S.RANK: rng.integers(0, 2, n).astype(np.int32),
        S.KIND: rng.choice(kinds, n, p=[0.4, 0.5, 0.1] if seed % 3 else [0.5, 0.5, 0]),
        S.CORRELATION: np.where(rng.random(n) < 0.15 * (seed % 2), np.nan,
                                rng.integers(0, 8, n).astype(float)),
        S.TS_NS: rng.integers(10**18, 10**18 + 10**6, n),  # beyond float64's exact integers
    })
    units = events.sample(frac=0.6, random_state=seed).copy()
    if seed % 5 == 0:  # every unit a kernel with a launch: no float64 on the way
        units = units[(units[S.KIND] == S.Kind.KERNEL) & units[S.CORRELATION].notna()].copy()
    units[F.ORDER_TS] = units[S.TS_NS]
    got, want = host_times(events, units), _host_times_by_pandas(events, units)
    pd.testing.assert_series_equal(got, want, check_names=False)
