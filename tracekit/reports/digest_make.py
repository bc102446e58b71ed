"""Making the report digest (tracekit.reports.digest) from an analysis that still holds its
EVENTS / ATTRIBUTED: done once after the analysis, before anything is cached."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from tracekit.reports import frames, plotframes, plotframes_agg
from tracekit.reports.digest import (
    BIN_MS,
    COMM_EVENTS,
    COUNTS,
    KERNELS,
    N_EVENTS,
    OCCUPANCY,
    OCCUPANCY_META,
    OVERVIEW,
    PREFIX,
    START_NS,
)

if TYPE_CHECKING:
    import pandas as pd

    from tracekit.model import Analysis


def _table(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False)


def attach(analysis: Analysis) -> None:
    """Compute the digest from the analysis' EVENTS / ATTRIBUTED into ``Run.extra``."""
    extra = analysis.run.extra
    for key in [k for k in extra if k.startswith(PREFIX)]:
        del extra[key]  # recomputed from what the tables hold now
    overview = frames.events_overview(analysis)
    comm = frames.comm_events(analysis)
    start = plotframes.trace_start_ns(analysis)
    events = analysis.run.events
    n_events = events.num_rows if events is not None else 0
    occ = plotframes_agg.occupancy(analysis)
    extra[OVERVIEW] = _table(overview)
    extra[COMM_EVENTS] = _table(comm)
    extra[COUNTS] = pa.table({N_EVENTS: pa.array([n_events], pa.int64()),
                              START_NS: pa.array([start], pa.int64())})
    extra[OCCUPANCY] = _table(occ.frame)
    extra[OCCUPANCY_META] = pa.table({KERNELS: pa.array([occ.kernels], pa.int64()),
                                      BIN_MS: pa.array([occ.bin_ms], pa.float64())})
