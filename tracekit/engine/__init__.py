"""Run one picklable function over many items (typically rank files) on a chosen engine.

``map_per_rank`` is the only entry point the rest of tracekit uses for per-rank parallelism:

* ``engine="local"``: a ``multiprocessing`` pool of ``jobs`` processes (default: the cores this
  process may use). One item, ``jobs == 1``, or (without an explicit ``jobs``) items whose
  ``sizes`` add up to less than :data:`INLINE_MAX_BYTES` run inline with no process start-up
  cost; with ``threads`` such an inline run uses up to that many threads of this process
  (:mod:`tracekit.engine.threads`). Workers come from a forkserver and never import the
  caller's ``__main__`` module, so a plain script without an ``if __name__ == "__main__":``
  guard, ``python -c`` and notebooks all work (see :func:`_main_hidden`).
* ``engine="dask"``: a ``distributed.LocalCluster`` with ``jobs`` workers, or an existing cluster
  at ``scheduler`` (``tcp://HOST:PORT``); see :mod:`tracekit.engine.dask`. Dask is imported only
  then.

Both return the results in input order. :func:`beside` runs one call in a process of its own
while the caller goes on with other work (the partitioned run's lints beside its cross-rank
stage). A :class:`~tracekit.errors.TracekitError` raised in a
worker reaches the caller with its original class, message and path (so that the CLI still prints
one line); Ctrl-C in the caller stops the workers.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import signal
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Generic, TypeVar

from tracekit.engine.calls import Call, default_jobs, progress_bar, unwrap
from tracekit.engine.threads import map_threads
from tracekit.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "dask")

# Below this many input bytes (the files on disk, as given in ``sizes``) a local map runs in
# this process unless ``jobs`` was asked for: starting a pool and importing pyarrow and the
# parser in each worker costs more than parsing that much. Measured with
# benchmarks/engine_inline.py (docs/performance.md): on 2 shared cores `tracekit analyze`
# in-process beat a 2-process pool at every size tried, 0.5 to 35.8 MB of gzip on disk
# (8 ranks, up to 128 MB of JSON), by 8.5 to 12.8 s. The same limit as the Ascend reader's
# PARALLEL_MIN_BYTES.
INLINE_MAX_BYTES = 64 << 20


def map_per_rank(
    func: Callable[[T], R],
    items: Sequence[T],
    *,
    engine: str = "local",
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    label: str = "parse",
    weights: Sequence[int] | None = None,
    sizes: Sequence[int] | None = None,
    preload: Sequence[str] = (),
    threads: bool = False,
) -> list[R]:
    """``[func(x) for x in items]`` on the chosen engine, in input order.

    ``func`` must be a picklable top-level function of an importable module (or a
    ``functools.partial`` of one): workers do not import the caller's ``__main__``.
    ``weights``: how far each item moves the progress bar (the files of a batch), default 1.
    ``sizes``: the bytes each item reads; with ``jobs`` unset, a local map of fewer than
    :data:`INLINE_MAX_BYTES` in all runs inline.
    ``preload``: modules the workers need beyond ``func``'s own (which is always preloaded),
    imported once in the local engine's forkserver (see :func:`_context`).
    ``threads``: ``func`` is safe to run in several threads at once and mostly runs without
    the GIL; a local map that runs inline because of its ``sizes`` then runs on
    ``min(cores, items)`` threads (an explicit ``jobs=1`` still means one).
    """
    items = list(items)
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"jobs must be at least 1, got {jobs}")
    if scheduler is not None and engine != "dask":
        raise ConfigError("--scheduler needs --engine dask")
    if engine == "dask":
        from tracekit.engine.dask import map_dask

        return map_dask(
            func, items, jobs=jobs, scheduler=scheduler, progress=progress, label=label,
            weights=weights,
        )
    n_jobs = min(jobs or default_jobs(), len(items)) if items else 1
    n_threads = 1
    if jobs is None and sizes is not None and sum(sizes) < INLINE_MAX_BYTES:
        n_jobs, n_threads = 1, n_jobs if threads else 1
    steps = list(weights) if weights is not None else [1] * len(items)
    with progress_bar(sum(steps), label, progress) as advance:
        if n_threads > 1:
            return map_threads(func, items, n_threads, lambda i: advance(steps[i]))
        if n_jobs <= 1:
            out: list[R] = []
            for item, step in zip(items, steps, strict=True):
                out.append(func(item))
                advance(step)
            return out
        return _map_pool(func, items, n_jobs, lambda i: advance(steps[i]),
                         [*_module_of(func), *preload])


def _ignore_sigint() -> None:
    # Workers leave Ctrl-C to the parent, which terminates them; no traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# What the forkserver imports before it forks a worker: every module asked for so far in this
# process. The server starts with the first pool and keeps the modules it had then.
_PRELOAD: dict[str, None] = {"tracekit.engine": None}


def _module_of(func: Callable[..., object]) -> list[str]:
    """The module defining ``func`` (through ``functools.partial``), unless ``__main__``."""
    while isinstance(func, functools.partial):
        func = func.func
    module = getattr(func, "__module__", None)
    return [module] if isinstance(module, str) and module != "__main__" else []


def _context(preload: Sequence[str] = ()) -> mp.context.BaseContext:
    """The local engine's start method, its forkserver told to preload ``preload`` too.

    forkserver: workers fork from a clean single-threaded server, so threads of the caller
    (Arrow's pools, a Dask client, a progress bar) cannot leave locks held in a child; it
    costs about 0.3 s once per process, against 0.05 s for fork and 0.45 s for spawn. The
    server imports the workers' modules (pyarrow, numpy, the parser, the rules) once before
    it forks, so each worker starts with them, shared copy-on-write, instead of importing
    them again (issue 17). A module that fails to import there is left to the worker.
    """
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        _PRELOAD.update(dict.fromkeys(preload))
        ctx.set_forkserver_preload(list(_PRELOAD))
        return ctx
    return mp.get_context()


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """While workers start, ``sys.modules["__main__"]`` is a bare module.

    multiprocessing's spawn and forkserver children re-run the parent's main script (as
    ``__mp_main__``) so that functions defined there unpickle. tracekit's worker functions live
    in tracekit's own modules, so that re-run is not needed, and in a script without an
    ``if __name__ == "__main__":`` guard it would start the analysis again in every worker
    (a hang, or a storm of "bootstrapping phase" errors). With a bare module in its place the
    children's preparation data names no main script. Only the ``sys.modules`` entry is
    swapped, for the time the pool takes to start its workers; the script's own module
    object is not touched.
    """
    main = sys.modules.get("__main__")
    if main is None or not (getattr(main, "__file__", None) or getattr(main, "__spec__", None)):
        yield  # python -c, a notebook, the REPL: nothing would be re-run
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _map_pool(
    func: Callable[[T], R], items: list[T], n_jobs: int, advance: Callable[[int], None],
    preload: Sequence[str],
) -> list[R]:
    with _main_hidden():
        # maxtasksperchild=None: every worker starts here, inside the guard (the pool starts
        # another only in place of one that died)
        pool = _context(preload).Pool(processes=n_jobs, initializer=_ignore_sigint,
                               maxtasksperchild=None)
    results: list[R] = []
    try:
        for result in pool.imap(Call(func), items, chunksize=1):
            advance(len(results))
            results.append(unwrap(result))
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()
    return results


class Beside(Generic[R]):
    """A call started by :func:`beside`; :meth:`result` waits for it (or runs it here)."""

    def __init__(self, func: Callable[[T], R], item: T, separate: bool) -> None:
        self._call, self._item = Call(func), item
        self._pool: ProcessPoolExecutor | None = None
        self._future: Future[R] | None = None
        if separate:
            with _main_hidden():
                ctx = _context(_module_of(func))
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx,
                                                 initializer=_ignore_sigint)
                self._future = self._pool.submit(self._call, item)

    def result(self) -> R:
        """The call's result (its TracekitError raised here, as map_per_rank does)."""
        if self._future is None:
            return unwrap(self._call(self._item))
        try:
            return unwrap(self._future.result())
        finally:
            self.close()

    def close(self) -> None:
        """Stop the call if it still runs (an error or Ctrl-C in the caller)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            if proc.is_alive():
                proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def beside(func: Callable[[T], R], item: T, *, separate: bool) -> Beside[R]:
    """``func(item)`` in one worker process of its own (``separate``; the local engine's
    forkserver), started now so that it runs while the caller works; else run in this
    process when its result is asked for. Call ``close()`` when the result is not wanted."""
    return Beside(func, item, separate)
