"""What reading one Kineto file gives, before EVENTS is assembled (kineto_events_table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tracekit.parsers.kineto.shape_ops import ShapeOps

# which reader read a file (EVENTS schema metadata, schema.READER_KEY): the native
# accumulator alone, msgspec alone, or the accumulator with some blocks it declined
NATIVE, MSGSPEC, MIXED = "native", "msgspec", "native+msgspec"


@dataclass
class RawTrace:
    """Columns of the timed events, the side data of the few that need more, the number of
    events of every phase, the top-level keys other than traceEvents, and the reader."""

    raw: pa.Table  # timed events: EVENT_ID and the raw columns
    comm: pa.Table | None
    extra: ShapeOps
    threads: list[tuple[Any, Any, str]]
    n_events: int
    meta: dict[str, Any]
    reader: str = MSGSPEC

    def detach_side(self) -> list[Any]:
        """[comm, extra], handed over like ``detach_raw``."""
        side = [self.comm, self.extra]
        self.comm, self.extra = None, ShapeOps()
        return side

    def detach_raw(self) -> pa.Table:
        """The timed-event table, handed over: this object lets go of it, so that columns the
        caller does not keep can be freed early."""
        raw, self.raw = self.raw, pa.table({})
        return raw
