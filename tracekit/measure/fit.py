"""Robust alpha-beta fit of transfer time against bytes, per (group, op, link class).

Model: transfer_ns = alpha + bus_bytes / B, with bus_bytes = S * f(n) (nccl-tests bus
factor), so 1 / slope is directly comparable with a profile's achievable bus bandwidth
(bytes per ns = GB/s). The fit is Theil-Sen (Sen 1968): slope = median of the pairwise
slopes, intercept = median of y - slope * x; it tolerates up to ~29% outliers (waits that
leak into the minimum, cold first calls) where least squares does not.

Only instances whose transfer is separated from wait take part (time_source all_ranks,
one_member or profiler): a lone member's duration or a minimum over some members only holds
waits for the absent ones, and a fit through it would give a latency that is really wait.
A (group, op, link class) with no such instance gets a row with a null fit and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.measure.crossrank import table_of
from tracekit.measure.hardware import HardwareProfile
from tracekit.schema import TimeSource

MAX_POINTS = 1500  # pairwise slopes are O(n^2): above this a fixed-seed sample is used
THEIL_SEN = "theil-sen"
MEDIAN = "median"
BUS_BYTES = "_bus_bytes"
SEPARABLE = (TimeSource.ALL_RANKS, TimeSource.ONE_MEMBER, TimeSource.PROFILER)
NOT_SEPARABLE = ("transfer is not separable from wait: no instance was seen on every member "
                 "of its communicator, and the profiler recorded no transit time")
NO_BYTES = "no instance has a message size"


@dataclass(frozen=True)
class Fit:
    alpha: float  # intercept, y units
    slope: float  # y units per x unit; NaN when x does not vary
    count: int
    method: str


def theil_sen(x: npt.ArrayLike, y: npt.ArrayLike, *, max_points: int = MAX_POINTS,
              seed: int = 0) -> Fit:
    """Theil-Sen line through (x, y); with a single distinct x, the median of y and no slope."""
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    count = int(xa.size)
    if count == 0:
        return Fit(np.nan, np.nan, 0, MEDIAN)
    if np.unique(xa).size < 2:
        return Fit(float(np.median(ya)), np.nan, count, MEDIAN)
    if count > max_points:
        pick = np.random.default_rng(seed).choice(count, size=max_points, replace=False)
        xs, ys = xa[pick], ya[pick]
    else:
        xs, ys = xa, ya
    i, j = np.triu_indices(xs.size, k=1)
    dx = xs[j] - xs[i]
    valid = dx != 0
    slope = float(np.median((ys[j] - ys[i])[valid] / dx[valid]))
    alpha = float(np.median(ya - slope * xa))
    return Fit(alpha, slope, count, THEIL_SEN)


# the columns of MEASURED that fit_table reads (besides BUS_BYTES)
COLUMNS = (schema.GROUP, schema.OP, schema.LINK_CLASS, schema.TIME_SOURCE, schema.TRANSFER_NS)


def fit_table(instances: pd.DataFrame, profile: HardwareProfile | None) -> pa.Table:
    """FITS: one row per (group, op, link class) from one row per matched instance.

    ``instances`` needs group, op, link_class, transfer_ns and the bus bytes column.
    """
    rows = []
    keys = [schema.GROUP, schema.OP, schema.LINK_CLASS]
    source = instances.get(schema.TIME_SOURCE, pd.Series(TimeSource.ALL_RANKS,
                                                         index=instances.index))
    separable = source.isin(SEPARABLE)
    has_bytes = pd.to_numeric(instances[BUS_BYTES], errors="coerce").notna()
    has_time = instances[schema.TRANSFER_NS].notna()
    for key, part in instances.groupby(keys, sort=True, dropna=False):
        ok = separable[part.index] & has_bytes[part.index] & has_time[part.index]
        link = profile.links.get(str(key[2])) if profile is not None else None
        row = {
            schema.GROUP: key[0], schema.OP: key[1], schema.LINK_CLASS: key[2],
            schema.PROFILE_ALPHA_NS: link.alpha_us * 1e3 if link else np.nan,
            schema.PROFILE_BW_GBPS: link.achievable_gbps if link else np.nan,
        }
        if not ok.any():
            reason = (NO_BYTES if not has_bytes[part.index].any() else NOT_SEPARABLE)
            rows.append({**row, schema.COUNT: 0, schema.REASON: reason})
            continue
        use = part[ok.to_numpy()]
        fit = theil_sen(use[BUS_BYTES].astype("float64"),
                        use[schema.TRANSFER_NS].astype("float64"))
        bw = 1.0 / fit.slope if np.isfinite(fit.slope) and fit.slope > 0 else np.nan
        rows.append({**row, schema.COUNT: fit.count, schema.ALPHA_NS: fit.alpha,
                     schema.BW_GBPS: bw, schema.METHOD: fit.method})
    if not rows:
        return schema.empty(schema.FITS)
    frame = pd.DataFrame(rows)
    return table_of(frame, schema.FITS)
