"""The Dask engine of :func:`tracekit.engine.map_per_rank` (``--engine dask``).

Either a ``distributed.LocalCluster`` of ``jobs`` single-threaded worker processes, started and
closed around the call, or an existing cluster reached with ``Client(scheduler)``. Each item
becomes one task (``pure=False``: a re-read file is re-parsed); results are gathered in input
order. Dask is an optional dependency (the ``dist`` extra) and is imported only here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tracekit.engine.calls import Call, default_jobs, progress_bar, unwrap
from tracekit.errors import ConfigError

# How long Client(scheduler) keeps retrying an address before it gives up (seconds). Dask's own
# default is 30 s; a scheduler that is up answers in milliseconds, so this only bounds the wait
# on a wrong or dead address. The ``connect_timeout`` argument overrides it per call.
CONNECT_TIMEOUT_S = 20.0


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigError(
            "--engine dask needs dask.distributed: pip install 'tracekit[dist]'"
        ) from exc
    return distributed


@contextlib.contextmanager
def client_for(
    jobs: int | None = None, scheduler: str | None = None, *, processes: bool = True,
    connect_timeout: float | None = None,
) -> Iterator[Any]:
    """A connected ``distributed.Client``: to ``scheduler`` (giving up after
    ``connect_timeout`` seconds, default :data:`CONNECT_TIMEOUT_S`), or to a fresh
    LocalCluster."""
    distributed = _import_distributed()
    if scheduler:
        wait = CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout
        try:
            client = distributed.Client(scheduler, timeout=f"{wait}s")
        except (OSError, TimeoutError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from exc
        try:
            yield client
        finally:
            client.close()
        return
    cluster = distributed.LocalCluster(
        n_workers=jobs or default_jobs(),
        threads_per_worker=1,
        processes=processes,
        dashboard_address=None,
        # no dashboard, and its HTTP endpoint on a free port rather than the shared 8787
        scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"},
        silence_logs=40,  # logging.ERROR
    )
    try:
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def map_dask(
    func: Callable[[Any], Any],
    items: Sequence[Any],
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    label: str = "parse",
    processes: bool = True,
    client: Any = None,
    weights: Sequence[int] | None = None,
    connect_timeout: float | None = None,
) -> list[Any]:
    """``[func(x) for x in items]`` as Dask tasks, in input order.

    Pass ``client`` to reuse a connected client (tests, repeated calls); otherwise one is made
    with :func:`client_for` (``connect_timeout``: see there) and closed afterwards.
    """
    items = list(items)
    if not items:
        return []
    steps = list(weights) if weights is not None else [1] * len(items)
    if client is not None:
        return _run(client, func, items, progress, label, steps)
    with client_for(jobs, scheduler, processes=processes,
                    connect_timeout=connect_timeout) as own:
        return _run(own, func, items, progress, label, steps)


def _run(
    client: Any, func: Callable[[Any], Any], items: list[Any], progress: bool, label: str,
    steps: list[int],
) -> list[Any]:
    distributed = _import_distributed()
    call = Call(func)
    futures = client.map(call, items, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        with progress_bar(sum(steps), label, progress) as advance:
            for fut in distributed.as_completed(futures):
                advance(steps[index[fut.key]])
        results = client.gather(futures)
    except BaseException:
        client.cancel(futures)
        raise
    return [unwrap(r) for r in results]
