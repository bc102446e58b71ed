"""The report digest: the few small frames the reports would otherwise compute from EVENTS.

The reports read the small result tables (MEASURED, PHASES, FINDINGS, ...) and, from the
per-event tables, only aggregates: the per-rank event overview, the communication kernels by
(op, pg_desc), the event count and first start, and the binned kernel occupancy of the HTML
timeline. :func:`attach` computes those once, after the analysis, into ``Run.extra`` under
``report:*`` keys; the report functions return them from there when present, so a report
built from the derived cache (tracekit.pipeline.cache), where EVENTS is not even read, is the
same as one built straight after the analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

    from tracekit.api import Analysis

PREFIX = "report:"
OVERVIEW = PREFIX + "events_overview"
COMM_EVENTS = PREFIX + "comm_events"
COUNTS = PREFIX + "event_counts"  # one row: events read, first start (ns)
OCCUPANCY = PREFIX + "occupancy"
OCCUPANCY_META = PREFIX + "occupancy_meta"  # one row: kernels aggregated, bin width (ms)
N_EVENTS, START_NS, KERNELS, BIN_MS = "events", "start_ns", "kernels", "bin_ms"


def _table(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False)


def attach(analysis: Analysis) -> None:
    """Compute the digest from the analysis' EVENTS / ATTRIBUTED into ``Run.extra``."""
    from tracekit.reports import frames, plotframes, plotframes_agg

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


def frame(analysis: Analysis, key: str) -> pd.DataFrame | None:
    """A digest frame, or None when the analysis carries no digest."""
    table = analysis.run.extra.get(key)
    return None if table is None else table.to_pandas()


def value(analysis: Analysis, key: str, column: str) -> int | float | None:
    """A one-row digest value, or None when the analysis carries no digest."""
    table = analysis.run.extra.get(key)
    return None if table is None else table.column(column)[0].as_py()
