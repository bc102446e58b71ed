"""The measures one rank can take alone (the partitioned run's ``measure`` stage): its time
classes and the exposed time of each of its collective instances; matching the instances
across ranks waits for the ``cross-rank`` stage (tracekit.pipeline.across_ranks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.measure import crossrank
from tracekit.measure.phases import build_timeline, exposed_ns
from tracekit.summary import kernel_classes


def comm_subset(attributed: pa.Table, timeline: Any = None) -> pa.Table:
    """One row per collective instance of one rank, with its exposed (not overlapped) time.

    The rows are measure's instance rows (metadata completed from the CPU wrappers, kernels of
    one logical collective merged) so that cross-rank matching sees exactly what the
    whole-run pipeline sees. ``attributed`` must be conformed to ATTRIBUTED; ``timeline`` is
    its ``build_timeline`` when the caller has it already.
    """
    df = crossrank.instance_rows(attributed)
    if len(df):
        tl = timeline if timeline is not None else build_timeline(attributed)
        fused = (df[S.KERNEL_CLASS] == S.KernelClass.FUSED).to_numpy()
        df[S.EXPOSED_NS] = exposed_ns(
            tl, df[crossrank.ROW].to_numpy(dtype=np.int64),
            df[S.TS_NS].to_numpy(dtype=np.int64), df[crossrank.END].to_numpy(dtype=np.int64),
            fused)
    else:
        df[S.EXPOSED_NS] = pd.Series(dtype="int64")
    return pa.Table.from_pandas(df, preserve_index=False)


def unattributed(events: pa.Table) -> pa.Table:
    """ATTRIBUTED without the rules: kernel classes from the parser's op column only, so that
    every kernel with an op counts as one collective instance."""
    return events.append_column(S.KERNEL_CLASS, kernel_classes(events))
