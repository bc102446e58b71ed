"""The report digest: the few small frames the reports would otherwise compute from EVENTS.

The reports read the small result tables (MEASURED, PHASES, FINDINGS, ...) and, from the
per-event tables, only aggregates: the per-rank event overview, the communication kernels by
(op, pg_desc), the event count and first start, and the binned kernel occupancy of the HTML
timeline. tracekit.reports.digest_make.attach computes those once, after the analysis, into
``Run.extra`` under ``report:*`` keys; the report functions return them from there when
present, so a report built from the derived cache (tracekit.pipeline.cache), where EVENTS
is not even read, is the same as one built straight after the analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from tracekit.model import Analysis

PREFIX = "report:"
OVERVIEW = PREFIX + "events_overview"
COMM_EVENTS = PREFIX + "comm_events"
COUNTS = PREFIX + "event_counts"  # one row: events read, first start (ns)
OCCUPANCY = PREFIX + "occupancy"
OCCUPANCY_META = PREFIX + "occupancy_meta"  # one row: kernels aggregated, bin width (ms)
N_EVENTS, START_NS, KERNELS, BIN_MS = "events", "start_ns", "kernels", "bin_ms"


def frame(analysis: Analysis, key: str) -> pd.DataFrame | None:
    """A digest frame, or None when the analysis carries no digest."""
    table = analysis.run.extra.get(key)
    return None if table is None else table.to_pandas()


def value(analysis: Analysis, key: str, column: str) -> int | float | None:
    """A one-row digest value, or None when the analysis carries no digest."""
    table = analysis.run.extra.get(key)
    return None if table is None else table.column(column)[0].as_py()
