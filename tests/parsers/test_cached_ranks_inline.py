"""A run whose every rank is in the parse cache is read back in this process: no worker pool
(tracekit.parsers.load_run), even with --jobs; a rank missing from the cache still gets the
pool. The tables are the same either way."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tracekit import engine
from tracekit.model import LoadOptions
from tracekit.parsers import load_run

RUN = "tp4_full_tp"


@pytest.fixture()
def pools(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many ranks each worker pool was started for (the pool itself run inline)."""
    started: list[int] = []

    def inline(func: Callable[[Any], Any], items: list[Any], n_jobs: int,
               advance: Callable[[int], None], preload: list[str]) -> list[Any]:
        started.append(len(items))
        return [engine.unwrap(engine.Call(func)(x)) for x in items]

    monkeypatch.setattr(engine, "_map_pool", inline)
    return started


def test_every_rank_cached_needs_no_pool(
    sample_traces: Path, tmp_path: Path, pools: list[int],
) -> None:
    # GIVEN a 4-rank run, read once with --jobs 2 into an empty parse cache (a pool)
    src = sample_traces / RUN
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    cache = tmp_path / "cache"
    options = LoadOptions(jobs=2, cache_dir=cache)
    first = load_run(src, options)
    assert pools == [4]
    # WHEN it is read again, every rank now in the cache
    again = load_run(src, options)
    # THEN no pool was started, and the tables are the same
    assert pools == [4]
    assert again.events.equals(first.events)
    assert again.rank_info.equals(first.rank_info)
    # AND with one rank's entry gone the pool is started again
    shutil.rmtree(sorted(p for p in cache.iterdir() if p.is_dir())[0])
    load_run(src, options)
    assert pools == [4, 4]
