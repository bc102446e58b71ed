"""Call-site rules: the Python frames around a collective name its communicator and path.

Rules are tried in order per distinct (call site, op, has-split) triple; the first whose
pattern, op and split condition all hold wins.
"""

from __future__ import annotations

import re

import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.keys import first_rows, row_codes, spread
from tracekit.rules.model import CallSiteRule, RuleSet


def _match(call: object, op: object, split: bool, rules: tuple[CallSiteRule, ...],
           compiled: list[re.Pattern[str]]) -> CallSiteRule | None:
    if not isinstance(call, str):
        return None
    for rule, pattern in zip(rules, compiled, strict=True):
        if rule.op and op not in rule.op:
            continue
        if rule.split is not None and rule.split != split:
            continue
        if pattern.search(call):
            return rule
    return None


def apply_call_sites(comm: pd.DataFrame, rules: RuleSet) -> dict[str, pd.Series]:
    """CALL_GROUP, CALL_RULE and CALL_PATH for every communication row (columns on
    ``comm``'s index, for the caller to set: a frame of them would first be copied into one
    block)."""
    compiled = [re.compile(r.match) for r in rules.call_sites]
    call, op, split = (comm[S.CALL_SITE].astype("object"), comm[S.OP].astype("object"),
                       comm[F.HAS_SPLIT])
    # the engine's call-site codes where it has them (equal sites, equal codes)
    codes = row_codes([comm.get(F.CALL_KEY, call), op, split])
    first = first_rows(codes)
    found = [_match(c, o, s is True, rules.call_sites, compiled) for c, o, s in zip(
        call.iloc[first].tolist(), op.iloc[first].tolist(), split.iloc[first].tolist(),
        strict=True)]
    return {
        F.CALL_GROUP: spread([r.group if r else None for r in found], codes, comm.index),
        F.CALL_RULE: spread([r.id if r else None for r in found], codes, comm.index),
        F.CALL_PATH: spread([r.path if r else None for r in found], codes, comm.index),
    }
