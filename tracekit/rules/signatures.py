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
    has_layer = first[S.LAYER].notna().to_numpy()
    if not has_layer.any():
        return first
    keyed = first[has_layer]
    layer_key = layer_codes(keyed)
    ops = pd.factorize(keyed[F.LOGICAL_OP].astype(str), use_na_sentinel=False)[0]
    sig_of_layer, _ = sequence_ids(ops, layer_key)
    ok_row = ((keyed[S.STATUS] == Status.ATTRIBUTED) & keyed[S.PATH].notna()).to_numpy()
    complete = np.bincount(layer_key, weights=~ok_row, minlength=len(sig_of_layer)) == 0
    work = pd.DataFrame({
        _LKEY: layer_key, S.RANK: keyed[S.RANK].to_numpy(),
        _POS: position_in_group(layer_key), S.GROUP: keyed[S.GROUP].astype("object"),
        S.PATH: keyed[S.PATH].astype("object"), S.STATUS: keyed[S.STATUS],
        F.CANDIDATES: keyed[F.CANDIDATES], _SIG: sig_of_layer[layer_key],
    }, index=keyed.index)
    # answers of complete layers, per (rank, signature, position); conflicting ones dropped
    row_complete = complete[layer_key]
    done = work[row_complete]
    if done.empty:
        return first
    todo = work[~row_complete]
    for col, values in _answers(work, row_complete).items():
        todo[col] = values[~row_complete]
    agrees = (todo[_WANT_GROUP].notna() & _agrees(todo, rules)).to_numpy()
    lkey = todo[_LKEY].to_numpy()
    refused = np.bincount(lkey, weights=~agrees, minlength=len(complete)) > 0
    todo = todo[~refused[lkey]]
    if todo.empty:
        return first
    return _apply(first, todo, keyed, layer_key)


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


def _agrees(todo: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """Known groups, paths and candidate sets must allow the borrowed answer."""
    want = todo[_WANT_GROUP]
    group_ok = (todo[S.STATUS] != Status.ATTRIBUTED) | (todo[S.GROUP] == want)
    ambiguous = (todo[S.STATUS] == Status.AMBIGUOUS).to_numpy()
    cands_ok = np.ones(len(todo), dtype=bool)
    cands_ok[ambiguous] = [not (c and w not in c) for c, w in zip(
        todo[F.CANDIDATES].to_numpy()[ambiguous], want.to_numpy()[ambiguous], strict=True)]
    path_ok = todo[S.PATH].isna() | (todo[S.PATH] == todo[_WANT_PATH]) | _same_step(todo, rules)
    return group_ok & pd.Series(cands_ok, index=todo.index) & path_ok


def _same_step(todo: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """A known path of another variant of the same per-layer step (DeepEP normal in extend
    steps, low latency in decode steps) corroborates the alignment; it is kept as it is."""
    mine = pd.Series(per_value(todo[S.PATH], rules.phase_of), index=todo.index, dtype=object)
    want = pd.Series(per_value(todo[_WANT_PATH], rules.phase_of), index=todo.index,
                     dtype=object)
    return mine.notna() & (mine == want) & (mine != S.Phase.OTHER)


def _apply(first: pd.DataFrame, todo: pd.DataFrame, keyed: pd.DataFrame,
           layer_key: np.ndarray) -> pd.DataFrame:
    out = first.copy(deep=False)  # copy on write: only the columns written are copied
    # the complete layer each borrowing row names, by its first row's step and layer
    where = todo[_WHERE].to_numpy(dtype=np.int64)
    first_row = firsts.first_rows(layer_key)
    steps = keyed[F.STEP].fillna(-1).to_numpy()[first_row]
    layers = keyed[S.LAYER].to_numpy()[first_row]
    note = pd.Series(per_value(where, lambda k: "same collectives as the complete "
                               f"step {int(steps[k])} layer {int(layers[k])}"),
                     index=todo.index, dtype=object)
    # written by position (object arrays), not by label
    at = first.index.get_indexer(todo.index)
    note_at = note.to_numpy()
    grp = (todo[S.STATUS] != Status.ATTRIBUTED).to_numpy()
    pth = todo[S.PATH].isna().to_numpy()
    written = {
        S.GROUP: (grp, todo[_WANT_GROUP].to_numpy(dtype=object)[grp]),
        S.STATUS: (grp, Status.ATTRIBUTED),
        F.GROUP_RULE: (grp, "layer.signature"),
        F.GROUP_REASON: (grp, None),  # below: the prior reason noted
        S.PATH: (pth, todo[_WANT_PATH].to_numpy(dtype=object)[pth]),
        F.PATH_RULE: (pth, "layer.signature"),
        F.PATH_REASON: (pth, note_at[pth]),
    }
    for col, (rows, values) in written.items():
        column = out[col].to_numpy(dtype=object, copy=True)
        if col == F.GROUP_REASON:
            values = _noted(column[at[rows]], note_at[rows])
        column[at[rows]] = values
        out[col] = pd.Series(column, index=out.index, dtype=object)
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
