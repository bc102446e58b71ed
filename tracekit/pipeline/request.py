"""An analysis as a command asks for it: which execution runs the stages, and the derived cache
(tracekit.pipeline.cache) around them.

`tracekit analyze`, `check`, `export` and `diff` build a :class:`Request` and call
:func:`analyze_request`; they never call a stage themselves. The stage modules are imported
only when a stage runs: a cache hit loads none of them, and keying a request
(:func:`derived_key`) imports neither pyarrow nor pandas.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit import progress
from tracekit.pipeline import cache

if TYPE_CHECKING:
    from tracekit.model import Analysis, AnalyzeOptions, LoadOptions
    from tracekit.summary import Summary


@dataclass(frozen=True)
class Request:
    """What to analyse and how."""

    path: Path
    load: LoadOptions
    options: AnalyzeOptions
    # which command's Analysis this is: "analyze" carries the first summary's tables and the
    # report digest; "check" (check, export, diff) carries neither unless it is cached
    variant: str = "check"
    # the per-rank Parquet dataset folder: the partitioned execution (no derived cache)
    partitioned: Path | None = None
    # Flight Recorder dumps as communicator evidence: a folder, True (beside the traces) or
    # False (none)
    flight_recorder: Path | bool = False
    summary_only: bool = False  # stage parse and the first summary only
    read_cache: bool = True  # False: recompute (the whole ATTRIBUTED is wanted), still store


@dataclass
class Outcome:
    analysis: Analysis  # with summary_only: the run and the first summary's tables only
    summary: Summary | None  # the first summary (variant "analyze")
    cached: bool = False  # read from the derived cache


_UNSET = ""  # analyze_request's ``key`` when the caller did not compute it


def analyze_request(req: Request, key: str | None = _UNSET,
                    scope: contextlib.ExitStack | None = None) -> Outcome:
    """Run ``req``: from the derived cache when it holds this analysis, else every stage.
    ``key``: :func:`derived_key` of ``req`` when the caller computed it already (the CLI
    keys a request once, for the cache entry and its stored reports). ``scope``: the stages
    after the parse enter their allocation policy there, and the caller's reports run under
    it until the caller closes it (tracekit.pipeline.in_memory.InMemory)."""
    if req.partitioned is not None:
        # imported here to keep pandas (the measure stage) out of a command's start-up: a
        # bad input is refused before any stage module loads
        from tracekit.pipeline.partitioned import Partitioned
        from tracekit.pipeline.stages import analyze

        return Outcome(analyze(Partitioned(req.path, req.partitioned, req.options, req.load)),
                       None)
    if key == _UNSET:
        key = derived_key(req)
    hit = cache.read(req.load.cache_dir, key) if key is not None and req.read_cache and \
        req.load.cache_dir is not None else None
    if hit is not None and (req.variant == "check" or hit.summary is not None):
        progress.note(f"derived results from the cache ({key})")
        return Outcome(hit.analysis, hit.summary, cached=True)
    return _compute(req, key, scope)


def _compute(req: Request, key: str | None, scope: contextlib.ExitStack | None) -> Outcome:
    from tracekit.model import Analysis
    from tracekit.pipeline.in_memory import InMemory
    from tracekit.pipeline.stages import analyze, execute

    ex = InMemory(req.options, source=req.path, load=req.load,
                  flight_recorder=req.flight_recorder, summarize=req.variant == "analyze",
                  scope=scope)
    if req.summary_only:
        try:
            execute(ex, last="parse")
        finally:
            ex.close()
        assert ex.run is not None and ex.summary is not None
        return Outcome(Analysis(run=ex.run, extra_tables=ex.summary.tables(),
                                source=str(req.path)), ex.summary)
    analysis = analyze(ex)
    if req.variant == "analyze" or req.load.cache_dir is not None:
        from tracekit.reports import digest_make  # lazy: pandas, as for Partitioned above

        digest_make.attach(analysis)  # before the entry is stored: reports read it from there
    if key is not None and req.load.cache_dir is not None:
        cache.write(req.load.cache_dir, key, analysis, ex.summary)
    return Outcome(analysis, ex.summary)


def derived_key(req: Request) -> str | None:
    """The derived cache's key of ``req``, or None when it is not cached (no cache folder,
    ``--summary-only``, ``--partitioned``, an input that cannot be read)."""
    if req.load.cache_dir is None or req.summary_only or req.partitioned is not None:
        return None
    more = (Path(req.flight_recorder),) if isinstance(req.flight_recorder, Path) else ()
    return cache.derived_key(req.path, req.load, req.options, more, variant=req.variant)
