"""The inline map on a few threads of this process: for a function that spends most of its
time without the GIL (the native Kineto reader: gzip inflation, the C scan, numpy and Arrow
kernels), so that a small run's ranks are parsed two at a time on a 2-core machine without
the start-up cost of worker processes.

Results come back in input order, and the caller's ``advance`` runs for each in that order,
as the one-thread loop does. The first item, in input order, whose call raises stops the
map with that exception: items not started yet are cancelled, those already running finish
first (a rank's parse), so no thread outlives the map.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

THREAD_PREFIX = "tracekit-map"


def map_threads(func: Callable[[T], R], items: Sequence[T], n_threads: int,
                advance: Callable[[int], None]) -> list[R]:
    """``[func(x) for x in items]`` on ``n_threads`` threads, in input order; ``advance(i)``
    once item ``i``'s result is taken (in order)."""
    out: list[R] = []
    with ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix=THREAD_PREFIX) as pool:
        futures: list[Future[R]] = [pool.submit(func, item) for item in items]
        try:
            for i, future in enumerate(futures):
                out.append(future.result())
                advance(i)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return out
