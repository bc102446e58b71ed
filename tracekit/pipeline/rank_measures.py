"""The partitioned run's rank without the rules: ATTRIBUTED from the parser's op column only.

The measures one rank takes alone are the per-rank half of the measure stage
(tracekit.measure.run.measure_ranks), the same for both executions.
"""

from __future__ import annotations

import pyarrow as pa

from tracekit import schema as S
from tracekit.summary import kernel_classes


def unattributed(events: pa.Table) -> pa.Table:
    """ATTRIBUTED without the rules: kernel classes from the parser's op column only, so that
    every kernel with an op counts as one collective instance."""
    return events.append_column(S.KERNEL_CLASS, kernel_classes(events))
