"""Kernel / op classes: which rule of ``kernel_classes`` each event matches.

Matching runs once per distinct (name, kind) pair, never per event; the result is joined
back onto the events by position.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules.model import KernelRule, RuleSet

# per-event columns this module adds (engine-internal frame, not a schema table)
RULE = "_krule"


def _first_match(name: str, kind: str, rules: tuple[KernelRule, ...],
                 compiled: list[re.Pattern[str]]) -> int:
    for i, (rule, pattern) in enumerate(zip(rules, compiled, strict=True)):
        if rule.kinds and kind not in rule.kinds:
            continue
        if pattern.search(name):
            return i
    return -1


def classify(frame: pd.DataFrame, rules: RuleSet) -> np.ndarray:
    """Index into ``rules.kernel_classes`` for every row of ``frame`` (-1: no rule)."""
    if frame.empty:
        return np.empty(0, dtype=np.int64)
    compiled = [re.compile(r.match) for r in rules.kernel_classes]
    pairs = frame[[S.NAME, S.KIND]].astype("string").fillna("")
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(pairs))
    hit = np.array(
        [_first_match(str(n), str(k), rules.kernel_classes, compiled) for n, k in uniques],
        dtype=np.int64,
    )
    out = hit[codes]
    out[codes < 0] = -1
    return out


def rule_column(index: np.ndarray, rules: RuleSet, attr: str) -> pd.Series:
    """One attribute of the matched rule for every row (None where no rule matched)."""
    values = np.array([getattr(r, attr) for r in rules.kernel_classes] + [None], dtype=object)
    return pd.Series(values[np.where(index < 0, len(values) - 1, index)])
