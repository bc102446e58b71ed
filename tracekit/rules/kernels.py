"""Kernel / op classes: which rule of ``kernel_classes`` each event matches.

Matching runs once per distinct (name, kind) pair, never per event; the result is joined
back onto the events by position.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto.nest import one_chunk
from tracekit.rules.model import KernelRule, RuleSet

# per-event columns this module adds (engine-internal frame, not a schema table)
RULE = "_krule"


class _Matcher:
    """The compiled ``kernel_classes`` of one rule set and the verdicts found so far, kept for
    the life of the process: a run of many ranks sees the same names again and again."""

    def __init__(self, rules: tuple[KernelRule, ...]) -> None:
        self.rules = rules
        self.compiled = [re.compile(r.match) for r in rules]
        self.known: dict[tuple[str, str], int] = {}

    def first(self, name: str, kind: str) -> int:
        """Index of the first rule matching (name, kind), -1 for none."""
        key = (name, kind)
        hit = self.known.get(key)
        if hit is None:
            hit = self.known[key] = self._search(name, kind)
        return hit

    def _search(self, name: str, kind: str) -> int:
        for i, (rule, pattern) in enumerate(zip(self.rules, self.compiled, strict=True)):
            if rule.kinds and kind not in rule.kinds:
                continue
            if pattern.search(name):
                return i
        return -1


_MATCHERS: dict[int, tuple[RuleSet, _Matcher]] = {}


def _matcher(rules: RuleSet) -> _Matcher:
    """The matcher of ``rules`` (by identity: the loaded rule sets are cached objects)."""
    entry = _MATCHERS.get(id(rules))
    if entry is None or entry[0] is not rules:
        if len(_MATCHERS) >= 8:
            _MATCHERS.clear()
        entry = _MATCHERS[id(rules)] = (rules, _Matcher(rules.kernel_classes))
    return entry[1]


def classify(frame: pd.DataFrame, rules: RuleSet) -> np.ndarray:
    """Index into ``rules.kernel_classes`` for every row of ``frame`` (-1: no rule)."""
    if frame.empty:
        return np.empty(0, dtype=np.int64)
    return _classified(_factorized(frame[S.NAME]), _factorized(frame[S.KIND]), rules)


def classify_table(table: pa.Table, rules: RuleSet) -> np.ndarray:
    """``classify`` of a table's NAME and KIND columns, read in Arrow dictionary code space
    (no string per row). The last answer is kept (read-only) for the same columns and rules:
    the first summary and the attribution of a run both classify its events."""
    if not table.num_rows:
        return np.empty(0, dtype=np.int64)
    names, kinds = table.column(S.NAME), table.column(S.KIND)
    key = (_buffers_of(names), _buffers_of(kinds))
    if _LAST and _LAST[0][0] == key and _LAST[0][2] is rules:
        return _LAST[0][3]
    out = _classified(_encoded(names), _encoded(kinds), rules)
    out.flags.writeable = False
    # the columns are held with the answer: their buffers' addresses cannot be reused
    _LAST[:] = [(key, (names, kinds), rules, out)]
    return out


def forget_last() -> None:
    """Drop the kept answer and the columns it holds (the attribution, its last reader, calls
    this: a worker attributing rank after rank would otherwise keep a rank's columns)."""
    _LAST.clear()


# (buffer identity of NAME and KIND, the columns themselves, the rules, the answer)
_LAST: list[tuple[tuple[tuple[int, ...], ...], tuple[pa.ChunkedArray, pa.ChunkedArray],
                  RuleSet, np.ndarray]] = []


def _buffers_of(column: pa.ChunkedArray) -> tuple[int, ...]:
    """What identifies an Arrow column's data: each chunk's offset, length and buffer
    addresses (its dictionary's too). Arrow buffers are immutable."""
    out: list[int] = []
    for chunk in column.chunks:
        out += [chunk.offset, len(chunk)]
        arrays = [chunk, chunk.dictionary] if pa.types.is_dictionary(chunk.type) else [chunk]
        for array in arrays:
            out += [b.address if b is not None else 0 for b in array.buffers()]
    return tuple(out)


def _classified(names: tuple[np.ndarray, list[str]], kinds: tuple[np.ndarray, list[str]],
                rules: RuleSet) -> np.ndarray:
    matcher = _matcher(rules)
    (name_codes, name_texts), (kind_codes, kind_texts) = names, kinds
    width = max(len(kind_texts), 1)
    span = len(name_texts) * width
    # the narrowest key that holds every pair: each row-sized temporary is memory first
    # touched, which costs about as much as the arithmetic on it
    small = np.int32 if span < 2**31 else np.int64
    key = name_codes.astype(small, copy=False) * small(width) + kind_codes.astype(small, copy=False)
    if span <= 4 * len(key):  # dense: the pairs present marked, no sort
        seen = np.zeros(span, dtype=bool)
        seen[key] = True
        pairs = np.flatnonzero(seen)
        number = (np.cumsum(seen) - 1).astype(small)
        inverse = number[key]
    else:
        pairs, inverse = np.unique(key, return_inverse=True)
    hit = np.array([matcher.first(name_texts[p // width], kind_texts[p % width])
                    for p in pairs.tolist()], dtype=np.int64)
    return hit[inverse.reshape(-1)]


def _encoded(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Codes and texts of a string column, as ``_factorized`` (codes may repeat a text)."""
    if pa.types.is_dictionary(column.type):
        col = one_chunk(pa.table({"c": column}).unify_dictionaries().column("c"))
    else:
        col = pc.dictionary_encode(one_chunk(column))
    texts = [*("" if v is None else str(v) for v in col.dictionary.to_pylist()), ""]
    indices = col.indices  # null: the trailing "" (filled in Arrow: one array, index-sized)
    if indices.null_count:
        indices = pc.fill_null(indices, pa.scalar(len(texts) - 1, indices.type))
    return indices.to_numpy(zero_copy_only=False), texts


def _factorized(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Codes and distinct texts of ``values``, a missing value counting as ``""``."""
    codes, uniques = pd.factorize(values)
    texts = [*(str(u) for u in uniques), ""]
    return np.where(codes < 0, len(texts) - 1, codes).astype(np.int64), texts


def rule_column(index: np.ndarray, rules: RuleSet, attr: str) -> pd.Series:
    """One attribute of the matched rule for every row (None where no rule matched)."""
    values = np.array([getattr(r, attr) for r in rules.kernel_classes] + [None], dtype=object)
    # object dtype: a Series of texts would otherwise be converted to pandas' Arrow strings
    return pd.Series(values[np.where(index < 0, len(values) - 1, index)], dtype=object)
