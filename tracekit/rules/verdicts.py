"""The group verdicts of the communication rows in code space: one int32 per row into a
table of :class:`~tracekit.rules.groups.Verdict` objects.

The group steps (evidence chain, wrapper links, nesting, participants, world fallback) decide
a handful of distinct verdicts for hundreds of thousands of rows. Held as five object columns,
every step that reads a status or writes a verdict touched five row-sized object arrays;
held as codes, a step reads a per-verdict table through the codes and writes one int32 array.
The engine's frame holds the group alone (read on every row by the order steps); the other
fields are read through the codes where they are needed (the first units, ATTRIBUTED).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.keys import first_rows, row_codes

if TYPE_CHECKING:  # groups.py builds the verdicts and imports this module
    from tracekit.rules.groups import Verdict

# a verdict's fields and the columns they become
VERDICT_COLUMNS = ((S.GROUP, "group"), (S.STATUS, "status"), (F.GROUP_RULE, "rule_id"),
                   (F.GROUP_REASON, "reason"), (F.CANDIDATES, "candidates"))


@dataclass(frozen=True)
class Coded:
    """``table[codes[i]]`` is the verdict of the row at position ``i``."""

    table: tuple[Verdict, ...]
    codes: np.ndarray  # int32, one per row

    @classmethod
    def of(cls, verdicts: Sequence[Verdict], codes: np.ndarray) -> Coded:
        return cls(tuple(verdicts), np.asarray(codes, dtype=np.int32))

    def per_verdict(self, attr: str) -> np.ndarray:
        """``attr`` of each verdict of the table, as objects (tuples stay elements)."""
        out = np.empty(len(self.table), dtype=object)
        for i, v in enumerate(self.table):
            out[i] = getattr(v, attr)
        return out

    def column(self, attr: str) -> np.ndarray:
        """``attr`` of every row's verdict (one shared object per verdict)."""
        return np.take(self.per_verdict(attr), self.codes) if len(self.codes) \
            else np.empty(0, dtype=object)

    def group_series(self, index: pd.Index) -> pd.Series:
        """Every row's decided group as the object column the engine's frame holds."""
        return pd.Series(self.column("group"), index=index, dtype=object, copy=False)

    def group_codes(self) -> np.ndarray:
        """Per row, a code of its decided group: rows of equal groups have equal codes, rows
        without one -1 (a row's verdict code, not its group's text, is what is taken)."""
        groups = [v.group if isinstance(v.group, str) else None for v in self.table]
        of_verdict = pd.factorize(np.array(groups, dtype=object))[0]
        return np.take(of_verdict, self.codes) if len(self.codes) \
            else np.zeros(0, dtype=np.intp)

    def lacks_group(self) -> np.ndarray:
        """Per row: whether its verdict names no group."""
        table = np.array([not isinstance(v.group, str) for v in self.table], dtype=bool)
        return np.take(table, self.codes) if len(self.codes) else np.zeros(0, dtype=bool)

    def has_status(self, status: str) -> np.ndarray:
        """Per row: whether its verdict has ``status``."""
        table = np.array([v.status == status for v in self.table], dtype=bool)
        return np.take(table, self.codes) if len(self.codes) else np.zeros(0, dtype=bool)

    def written(self, rows: np.ndarray, verdicts: Sequence[Verdict],
                which: np.ndarray) -> Coded:
        """The rows at positions ``rows`` given ``verdicts[which]`` (the others as they are)."""
        codes = self.codes.copy()
        codes[rows] = np.asarray(which, dtype=np.int32) + np.int32(len(self.table))
        return Coded(self.table + tuple(verdicts), codes)

    def carried(self, target: np.ndarray, source: np.ndarray,
                change: Callable[[Verdict], Verdict]) -> Coded:
        """The rows at ``target`` given the verdicts of the rows at ``source`` (pairwise;
        a target named twice keeps the last), each changed by ``change`` once per distinct
        verdict."""
        if not len(target):
            return self
        distinct, which = np.unique(self.codes[source], return_inverse=True)
        return self.written(np.asarray(target), [change(self.table[c]) for c in distinct.tolist()],
                            which.reshape(-1))

    def borrowed(self, to: np.ndarray, donors: Sequence[Verdict],
                 donor_of: np.ndarray) -> Coded:
        """The rows at positions ``to`` given group, status, rule id and reason of
        ``donors[donor_of]`` (pairwise), each keeping its own candidates; one new verdict per
        distinct (donor, own verdict) pair."""
        if not len(to):
            return self
        pair = row_codes([np.asarray(donor_of), self.codes[to]])
        made = [dataclasses.replace(donors[int(donor_of[r])],
                                    candidates=self.table[int(self.codes[to[r]])].candidates)
                for r in first_rows(pair).tolist()]
        return self.written(np.asarray(to), made, pair)

    def subset(self, rows: np.ndarray) -> Coded:
        """The verdicts of the rows at positions ``rows`` (the same table)."""
        return Coded(self.table, self.codes[rows])

    def placed(self, rows: np.ndarray, part: Coded) -> Coded:
        """These verdicts with ``part`` (a ``subset(rows)`` whose table was extended) at
        ``rows``."""
        codes = self.codes.copy()
        codes[rows] = part.codes
        return Coded(part.table, codes)


def reason_prefixed(prefix: str) -> Callable[[Verdict], Verdict]:
    """A verdict's copy whose text reason starts with ``prefix`` (no reason: none)."""
    def change(v: Verdict) -> Verdict:
        reason = prefix + v.reason if isinstance(v.reason, str) else None
        return dataclasses.replace(v, reason=reason)  # type: ignore[arg-type]
    return change
