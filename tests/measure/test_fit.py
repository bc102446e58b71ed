"""Robust alpha-beta fit recovers known parameters from synthetic points."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tracekit import schema
from tracekit.measure import fit
from tracekit.measure.hardware import load_profile


def test_theil_sen_recovers_alpha_beta_despite_outliers() -> None:
    """GIVEN 200 transfers t = 20 us + bytes / 100 GB/s with 2% noise and 20% of points
    inflated by late arrivals (waits up to 5x)
    WHEN fitting THEN alpha is within 3% of 20 us and the bandwidth within 3% of 100 GB/s,
    where a least-squares line is pulled far off."""
    rng = np.random.default_rng(1)
    x = rng.choice(2.0 ** np.arange(10, 28), size=200)
    y = (20_000 + x / 100.0) * rng.normal(1.0, 0.02, size=200)
    bad = rng.random(200) < 0.2
    y[bad] *= rng.uniform(1.5, 5.0, size=bad.sum())
    result = fit.theil_sen(x, y)
    assert result.method == fit.THEIL_SEN and result.count == 200
    assert result.alpha == pytest.approx(20_000, rel=0.03)
    assert 1.0 / result.slope == pytest.approx(100.0, rel=0.03)
    ls_slope = np.polyfit(x, y, 1)[0]
    assert abs(1.0 / ls_slope - 100.0) > 10.0


def test_single_size_gives_median_and_no_slope() -> None:
    """GIVEN one message size only WHEN fitting THEN alpha is the median time, no bandwidth."""
    result = fit.theil_sen([576, 576, 576], [10.0, 30.0, 20.0])
    assert result.method == fit.MEDIAN and result.alpha == 20.0 and math.isnan(result.slope)


def test_subsampling_is_deterministic() -> None:
    """GIVEN more points than MAX_POINTS WHEN fitting twice THEN the same exact answer."""
    x = np.arange(3000, dtype=float)
    y = 5.0 + 2.0 * x
    a, b = fit.theil_sen(x, y), fit.theil_sen(x, y)
    assert a == b and a.slope == pytest.approx(2.0) and a.alpha == pytest.approx(5.0)


def test_fit_table_beside_profile() -> None:
    """GIVEN matched instances of two (group, op, link) keys WHEN tabulating
    THEN one row each, with the fitted alpha / bandwidth beside the profile's values."""
    bus = np.array([1e6, 2e6, 4e6, 8e6])
    frame = pd.DataFrame({
        schema.GROUP: ["TP"] * 4 + ["MOE_EP"] * 4,
        schema.OP: ["all_reduce"] * 4 + ["all_to_allv"] * 4,
        schema.LINK_CLASS: ["nvlink4"] * 8,
        schema.TRANSFER_NS: np.concatenate([15_000 + bus / 300, 30_000 + bus / 150]),
        fit.BUS_BYTES: np.concatenate([bus, bus]),
    })
    rows = {r[schema.GROUP]: r for r in fit.fit_table(frame, load_profile("h200")).to_pylist()}
    assert rows["TP"][schema.ALPHA_NS] == pytest.approx(15_000)
    assert rows["TP"][schema.BW_GBPS] == pytest.approx(300)
    assert rows["MOE_EP"][schema.BW_GBPS] == pytest.approx(150)
    assert rows["TP"][schema.PROFILE_BW_GBPS] == 370 and rows["TP"][schema.COUNT] == 4
    assert rows["TP"][schema.PROFILE_ALPHA_NS] == 15_000
