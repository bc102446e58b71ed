"""rules/signatures._answers (code space) against the groupby-agg and join it replaced, on
random layers with missing values and conflicting answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules import signatures as sig


def _answers_by_pandas(work: pd.DataFrame, complete: np.ndarray) -> pd.DataFrame:
    done = work[complete]
    answers = done.groupby([S.RANK, sig._SIG, sig._POS]).agg(
        **{sig._WANT_GROUP: (S.GROUP, "first"), sig._WANT_PATH: (S.PATH, "first"),
           "_ng": (S.GROUP, "nunique"), "_np": (S.PATH, "nunique"),
           sig._WHERE: (sig._LKEY, "first")})
    bad = answers[(answers["_ng"] > 1) | (answers["_np"] > 1)].index.droplevel(sig._POS)
    answers = answers[~answers.index.droplevel(sig._POS).isin(bad)]
    return work.join(answers[[sig._WANT_GROUP, sig._WANT_PATH, sig._WHERE]],
                     on=[S.RANK, sig._SIG, sig._POS])


@pytest.mark.parametrize("seed", range(80))
def test_answers_match_groupby(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    work = pd.DataFrame({
        sig._LKEY: rng.integers(0, 6, n), S.RANK: rng.integers(0, 2, n),
        sig._POS: rng.integers(0, 3, n), sig._SIG: rng.integers(0, 2, n),
        S.GROUP: rng.choice(np.array(["tp", "ep", None], dtype=object), n, p=[.5, .3, .2]),
        S.PATH: rng.choice(np.array(["a", "b", None], dtype=object), n, p=[.6, .2, .2]),
        F.CANDIDATES: None,
    }, index=rng.permutation(300)[:n])
    complete = rng.random(n) < 0.6
    want = _answers_by_pandas(work, complete)
    got = sig._answers(work, complete)
    for col in (sig._WANT_GROUP, sig._WANT_PATH):
        assert list(pd.isna(got[col])) == list(want[col].isna()), col
        held = ~want[col].isna().to_numpy()
        assert list(got[col][held]) == list(want[col].to_numpy()[held]), col
    np.testing.assert_array_equal(got[sig._WHERE], want[sig._WHERE].to_numpy(dtype=float))
