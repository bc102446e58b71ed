"""Layers that lack evidence borrow it from layers with the same collective sequence.

CUDA-graph replays (decode, by default) carry no process-group metadata and no useful call
site, while eager steps (prefill/extend) of the same run do. A layer whose every collective is
attributed and has a path is *complete*; its sequence of ops is its signature. Another layer
of the same rank with the same signature, whose own facts do not contradict it, takes the
complete layer's group and path for each position. A signature seen with two different
answers is not used (the evidence disagrees), and known facts are never overwritten. A known
path agrees with the borrowed one when both are variants of the same step (same phase): the
DeepEP mode, for one, differs between extend and decode steps of one run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import firsts
from tracekit.rules import frame as F
from tracekit.rules.grouping import (
    per_value,
    position_in_group,
    row_codes,
    sequence_ids,
)
from tracekit.rules.keys import factorize, taken
from tracekit.rules.model import RuleSet
from tracekit.schema import Status

_POS = "_pos"
_SIG = "_sig"
_LKEY = "_layer_key"
_WANT_GROUP = "_want_group"
_WANT_PATH = "_want_path"
_WHERE = "_where"


def transfer(first: pd.DataFrame, rules: RuleSet) -> pd.DataFrame:
    """Fill group and path of incomplete layers from complete layers with the same ops."""
    keyed = np.flatnonzero(first[S.LAYER].notna().to_numpy())  # positions of layer rows
    if not keyed.size:
        return first
    layer_key = layer_codes(taken(first, [S.RANK, F.STEP, S.LAYER], keyed))
    ops = _text_codes(first[F.LOGICAL_OP].to_numpy(dtype=object)[keyed])
    sig_of_layer, _ = sequence_ids(ops, layer_key)
    col = {c: first[c].to_numpy(dtype=object)[keyed]
           for c in (S.GROUP, S.PATH, S.STATUS, F.CANDIDATES)}
    ok_row = (col[S.STATUS] == Status.ATTRIBUTED) & pd.notna(col[S.PATH])
    complete = np.bincount(layer_key, weights=~ok_row, minlength=len(sig_of_layer)) == 0
    work = pd.DataFrame({
        _LKEY: layer_key, S.RANK: first[S.RANK].to_numpy()[keyed],
        _POS: position_in_group(layer_key),
        **{c: pd.Series(v, dtype=object, copy=False) for c, v in col.items()},
        _SIG: sig_of_layer[layer_key],
    }, copy=False)
    # answers of complete layers, per (rank, signature, position); conflicting ones dropped
    row_complete = complete[layer_key]
    if not row_complete.any():
        return first
    todo = np.flatnonzero(~row_complete)  # positions among the layer rows
    answers = {c: v[todo] for c, v in _answers(work, row_complete).items()}
    agrees = pd.notna(answers[_WANT_GROUP]) & _agrees(
        {c: v[todo] for c, v in col.items()}, answers[_WANT_GROUP], answers[_WANT_PATH],
        rules)
    lkey = layer_key[todo]
    refused = np.bincount(lkey, weights=~agrees, minlength=len(complete)) > 0
    kept = ~refused[lkey]
    if not kept.any():
        return first
    todo = todo[kept]
    return _apply(first, keyed[todo], {c: v[kept] for c, v in answers.items()},
                  col[S.STATUS][todo], col[S.PATH][todo], keyed, layer_key)


def _text_codes(values: np.ndarray) -> np.ndarray:
    """``pd.factorize(values.astype(str), use_na_sentinel=False)[0]``: the text of each
    distinct value made once, missing values one code of their own, numbered in order of
    first appearance."""
    codes, uniques = factorize(values)
    texts = [str(u) for u in uniques.tolist()]
    text_of, _ = pd.factorize(np.array([*texts, None], dtype=object))  # None: the missing
    text_of[-1] = len(texts)  # a code no text has
    return row_codes(text_of[codes])


def _answers(work: pd.DataFrame, complete: np.ndarray) -> dict[str, np.ndarray]:
    """Per row of ``work``, the answer of the complete rows at its (rank, signature,
    position): the first group and path given there, and the layer key of the first row;
    missing (NaN) where no complete row is there, or where the complete rows of that
    (rank, signature) give two groups or two paths for one position. In code space: what
    ``groupby([rank, signature, position]).agg(first, nunique)`` and a join gave."""
    n = len(work)
    slot = row_codes(work[S.RANK], work[_SIG], work[_POS])
    pair = row_codes(work[S.RANK], work[_SIG])
    done = np.flatnonzero(complete)
    slots = int(slot.max()) + 1 if n else 0
    answered = np.zeros(slots, dtype=bool)
    answered[slot[done]] = True
    conflicting = np.zeros(int(pair.max()) + 1 if n else 0, dtype=bool)
    out: dict[str, np.ndarray] = {}
    for col, want in ((S.GROUP, _WANT_GROUP), (S.PATH, _WANT_PATH)):
        values = work[col].to_numpy(dtype=object)
        codes = row_codes(values)
        given = done[pd.notna(values[done])]
        # distinct values given per slot: the distinct (slot, value) pairs counted
        both = np.unique(slot[given] * (int(codes.max()) + 1) + codes[given])
        many = np.bincount(both // (int(codes.max()) + 1), minlength=slots) > 1
        conflicting[pair[many[slot]]] = True
        out[want] = _taken(values, _first_row(slot, given, slots)[slot])
    first_done = _first_row(slot, done, slots)
    usable = answered[slot] & ~conflicting[pair]
    where = np.where(first_done[slot] >= 0, work[_LKEY].to_numpy()[first_done[slot]], 0)
    out[_WHERE] = np.where(usable, where, np.nan)
    for want in (_WANT_GROUP, _WANT_PATH):
        out[want][~usable] = np.nan
    return out


def _first_row(codes: np.ndarray, rows: np.ndarray, span: int) -> np.ndarray:
    """Per code 0..span-1, the first of ``rows`` (ascending positions) with that code; -1
    where none has it."""
    out = np.full(span, -1, dtype=np.int64)
    present, first = np.unique(codes[rows], return_index=True)
    out[present] = rows[first]
    return out


def _taken(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values[at]`` as objects, NaN where ``at`` is -1."""
    out = np.full(len(at), np.nan, dtype=object)
    ok = at >= 0
    out[ok] = values[at[ok]]
    return out


def layer_codes(keyed: pd.DataFrame) -> np.ndarray:
    """Code of each row's (rank, step, layer), in order of first appearance."""
    return row_codes(keyed[S.RANK], keyed[F.STEP].fillna(-1), keyed[S.LAYER])


def _agrees(todo: dict[str, np.ndarray], want_group: np.ndarray, want_path: np.ndarray,
            rules: RuleSet) -> np.ndarray:
    """Known groups, paths and candidate sets must allow the borrowed answer; decided once
    per distinct (status, group, candidates, path, wanted group, wanted path)."""
    values = [todo[S.STATUS], todo[S.GROUP], todo[F.CANDIDATES], todo[S.PATH], want_group,
              want_path]
    codes = row_codes(*values)
    reps = firsts.first_rows(codes)
    table = np.array([_agrees_one(*(v[i] for v in values), rules) for i in reps.tolist()],
                     dtype=bool)
    return table[codes] if len(codes) else np.zeros(0, dtype=bool)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _equal(a: object, b: object) -> bool:
    """``==`` of two pandas object columns at one row: missing on either side is False."""
    return not _missing(a) and not _missing(b) and bool(a == b)


def _agrees_one(status: object, group: object, cands: object, path: object,
                want_group: object, want_path: object, rules: RuleSet) -> bool:
    """``_agrees`` of one row: the group is open or the wanted one, an ambiguous row's
    candidates hold it, and the path is open, the wanted one or of the same step."""
    group_ok = _missing(status) or status != Status.ATTRIBUTED or _equal(group, want_group)
    cands_ok = not (_equal(status, Status.AMBIGUOUS) and cands and want_group not in cands)
    mine = rules.phase_of(None if _missing(path) else path)  # type: ignore[arg-type]
    wanted = rules.phase_of(None if _missing(want_path) else want_path)  # type: ignore[arg-type]
    same_step = not _missing(mine) and _equal(mine, wanted) and mine != S.Phase.OTHER
    path_ok = _missing(path) or _equal(path, want_path) or same_step
    return bool(group_ok and cands_ok and path_ok)


def _apply(first: pd.DataFrame, at: np.ndarray, answers: dict[str, np.ndarray],
           status: np.ndarray, path: np.ndarray, keyed: np.ndarray,
           layer_key: np.ndarray) -> pd.DataFrame:
    """Write the borrowed answers into the rows of ``first`` at positions ``at`` (their
    status and path given): the group where the row has none decided, the path where it has
    none, each with the rule and the note naming the complete layer."""
    out = first.copy(deep=False)  # copy on write: only the columns written are copied
    # the complete layer each borrowing row names, by its first row's step and layer
    where = answers[_WHERE].astype(np.int64)
    first_row = keyed[firsts.first_rows(layer_key)]
    steps = first[F.STEP].fillna(-1).to_numpy()[first_row]
    layers = first[S.LAYER].to_numpy()[first_row]
    note_at = per_value(where, lambda k: "same collectives as the complete "
                        f"step {int(steps[k])} layer {int(layers[k])}")
    # written by position (object arrays), not by label
    grp = np.asarray(status != Status.ATTRIBUTED, dtype=bool)  # missing ones too
    pth = pd.isna(path)
    written = {
        S.GROUP: (grp, answers[_WANT_GROUP][grp]),
        S.STATUS: (grp, Status.ATTRIBUTED),
        F.GROUP_RULE: (grp, "layer.signature"),
        F.GROUP_REASON: (grp, None),  # below: the prior reason noted
        S.PATH: (pth, answers[_WANT_PATH][pth]),
        F.PATH_RULE: (pth, "layer.signature"),
        F.PATH_REASON: (pth, note_at[pth]),
    }
    for col, (rows, values) in written.items():
        column = out[col].to_numpy(dtype=object, copy=True)
        if col == F.GROUP_REASON:
            values = _noted(column[at[rows]], note_at[rows])
        column[at[rows]] = values
        out[col] = pd.Series(column, index=out.index, dtype=object, copy=False)
    return out


def _noted(prior: np.ndarray, note: np.ndarray) -> np.ndarray:
    """``prior + "; " + note`` (``note`` alone where there is no prior reason), built once
    per distinct (prior, note) pair: the rows share its string."""
    codes = row_codes(prior, note)
    at = firsts.first_rows(codes)
    table = np.empty(len(at), dtype=object)
    for i, (p, n) in enumerate(zip(prior[at].tolist(), note[at].tolist(), strict=True)):
        table[i] = ("" if pd.isna(p) else p + "; ") + n
    return table[codes]
