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

import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.grouping import grouped_tuples
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
    keyed = first[first[S.LAYER].notna()]
    if keyed.empty:
        return first
    step = keyed[F.STEP].fillna(-1)
    layer_key = pd.Series(
        pd.factorize(pd.MultiIndex.from_arrays([keyed[S.RANK], step, keyed[S.LAYER]]))[0],
        index=keyed.index)
    ops = keyed[F.LOGICAL_OP].astype(str)
    sig_tuples = grouped_tuples(ops, layer_key)
    sig_of_layer = pd.Series(pd.factorize(sig_tuples)[0], index=sig_tuples.index)
    ok_row = (keyed[S.STATUS] == Status.ATTRIBUTED) & keyed[S.PATH].notna()
    complete = ok_row.groupby(layer_key).all()
    work = pd.DataFrame({
        _LKEY: layer_key, S.RANK: keyed[S.RANK], _POS: keyed.groupby(layer_key).cumcount(),
        S.GROUP: keyed[S.GROUP].astype("object"), S.PATH: keyed[S.PATH].astype("object"),
        S.STATUS: keyed[S.STATUS], F.CANDIDATES: keyed[F.CANDIDATES],
    })
    work[_SIG] = layer_key.map(sig_of_layer)
    # answers of complete layers, per (rank, signature, position); conflicting ones dropped
    done = work[work[_LKEY].map(complete)]
    if done.empty:
        return first
    answers = done.groupby([S.RANK, _SIG, _POS]).agg(
        **{_WANT_GROUP: (S.GROUP, "first"), _WANT_PATH: (S.PATH, "first"),
           "_ng": (S.GROUP, "nunique"), "_np": (S.PATH, "nunique"), _WHERE: (_LKEY, "first")})
    bad = answers[(answers["_ng"] > 1) | (answers["_np"] > 1)].index.droplevel(_POS)
    answers = answers[~answers.index.droplevel(_POS).isin(bad)]
    todo = work[~work[_LKEY].map(complete)]
    todo = todo.join(answers[[_WANT_GROUP, _WANT_PATH, _WHERE]], on=[S.RANK, _SIG, _POS])
    agrees = todo[_WANT_GROUP].notna() & _agrees(todo, rules)
    usable = agrees.groupby(todo[_LKEY]).all()
    todo = todo[todo[_LKEY].map(usable)]
    if todo.empty:
        return first
    return _apply(first, todo, keyed)


def _agrees(todo: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """Known groups, paths and candidate sets must allow the borrowed answer."""
    want = todo[_WANT_GROUP]
    group_ok = (todo[S.STATUS] != Status.ATTRIBUTED) | (todo[S.GROUP] == want)
    cands_ok = pd.Series(
        [not (st == Status.AMBIGUOUS and c and w not in c)
         for st, c, w in zip(todo[S.STATUS], todo[F.CANDIDATES], want, strict=True)],
        index=todo.index)
    path_ok = todo[S.PATH].isna() | (todo[S.PATH] == todo[_WANT_PATH]) | _same_step(todo, rules)
    return group_ok & cands_ok & path_ok


def _same_step(todo: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """A known path of another variant of the same per-layer step (DeepEP normal in extend
    steps, low latency in decode steps) corroborates the alignment; it is kept as it is."""
    mine = todo[S.PATH].map(rules.phase_of)
    want = todo[_WANT_PATH].map(rules.phase_of)
    return mine.notna() & (mine == want) & (mine != S.Phase.OTHER)


def _apply(first: pd.DataFrame, todo: pd.DataFrame, keyed: pd.DataFrame) -> pd.DataFrame:
    out = first.copy()
    layer_at = pd.Series(
        [f"step {int(a)} layer {int(b)}" for a, b in zip(keyed[F.STEP].fillna(-1),
                                                        keyed[S.LAYER], strict=True)],
        index=keyed.index)
    first_row = keyed.index.to_series().groupby(
        pd.factorize(pd.MultiIndex.from_arrays(
            [keyed[S.RANK], keyed[F.STEP].fillna(-1), keyed[S.LAYER]]))[0]).first()
    note = "same collectives as the complete " + todo[_WHERE].map(first_row).map(layer_at)
    grp = todo.index[todo[S.STATUS] != Status.ATTRIBUTED]
    out.loc[grp, S.GROUP] = todo.loc[grp, _WANT_GROUP]
    out.loc[grp, S.STATUS] = Status.ATTRIBUTED
    out.loc[grp, F.GROUP_RULE] = "layer.signature"
    prior = out.loc[grp, F.GROUP_REASON].astype("object")
    out.loc[grp, F.GROUP_REASON] = prior.where(prior.isna(), prior + "; ").fillna("") + note[grp]
    pth = todo.index[todo[S.PATH].isna()]
    out.loc[pth, S.PATH] = todo.loc[pth, _WANT_PATH]
    out.loc[pth, F.PATH_RULE] = "layer.signature"
    out.loc[pth, F.PATH_REASON] = note[pth]
    return out
