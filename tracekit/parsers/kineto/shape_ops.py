"""The timed c10d / gloo ops of one file and their record_shapes args, by column: the event
index of each op and the position of its (name, args) among the distinct ones. Ops repeat
layer after layer with the same shapes, so the records that EVENTS takes from their inputs
are built once per distinct (name, args), and the ops without args of their own (a trace
recorded without record_shapes) are told apart by their name alone, with no Python object
per op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np


@dataclass
class ShapeOps:
    event: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    key: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    distinct: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.event)

    @classmethod
    def of(cls, ops: Sequence[tuple[int, str | None, dict[str, Any]]]) -> ShapeOps:
        """From (event index, name, args) tuples, one per op (the piece path)."""
        index: dict[tuple[str, bytes], int] = {}
        distinct: list[tuple[str, dict[str, Any]]] = []
        keys = np.zeros(len(ops), dtype=np.int64)
        for i, (_, name, args) in enumerate(ops):
            k = (name or "", msgspec.json.encode(args))
            pos = index.get(k)
            if pos is None:
                pos = index[k] = len(distinct)
                distinct.append((name or "", args))
            keys[i] = pos
        return cls(np.array([e for e, _, _ in ops], dtype=np.int64), keys, distinct)

    @classmethod
    def by_name(cls, event: np.ndarray, codes: np.ndarray, names: Sequence[str | None],
                args_of: Mapping[int, dict[str, Any]], rows: np.ndarray) -> ShapeOps:
        """From the ops' event indices, name codes into ``names`` and, for the op at
        ``rows[i]``, its args ``args_of.get(rows[i], {})``. Without any args, the distinct
        ops are the distinct names (no Python object per op)."""
        if not args_of:
            used, key = np.unique(codes, return_inverse=True)
            return cls(event, key.astype(np.int64).ravel(),
                       [(names[c] or "", {}) for c in used.tolist()])
        return cls.of([(e, names[c], args_of.get(r, {})) for e, c, r in
                       zip(event.tolist(), codes.tolist(), rows.tolist(), strict=True)])
