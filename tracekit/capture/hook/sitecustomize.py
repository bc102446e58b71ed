"""tracekit capture hook, loaded by every Python process of a captured program.

``tracekit capture`` puts this folder first on PYTHONPATH and sets TRACEKIT_CAPTURE_DIR.
Nothing happens until the program imports ``torch.distributed``: then
``init_process_group`` is wrapped so that the profiler starts right after it, and the trace is
written (``rank{r}.trace.json.gz``) at ``destroy_process_group``, on an uncaught exception,
or at exit. With ``TRACEKIT_CAPTURE_FR=1`` (``tracekit capture --flight-recorder``) it also
writes the rank's Flight Recorder dump ``rank{r}.fr_trace.pkl`` (torch's own pickle,
unchanged) and ``rank{r}.fr_groups.json`` (every process group's name, description and
global ranks, which gloo's dump leaves empty) at the same moments: a gloo collective that
times out raises, so a timeout is an exception here. Each rank also leaves
``.tracekit/rank{r}.json`` saying how it ended, which is how ``tracekit capture`` names a
rank that crashed and why. The program's own code is unchanged; any sitecustomize that was
already on the path still runs.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_OUT = os.environ.get("TRACEKIT_CAPTURE_DIR")
_STATE: dict[str, Any] = {"prof": None, "rank": None, "status": None, "fr_done": False}
_FR = os.environ.get("TRACEKIT_CAPTURE_FR") == "1"


def _status_path(rank: Any) -> str:
    return os.path.join(_OUT or ".", ".tracekit", f"rank{rank}.json")


def _write_status(**fields: Any) -> None:
    status = _STATE["status"] or {}
    status.update(fields, time=time.time())
    _STATE["status"] = status
    path = _status_path(_STATE["rank"])
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(status, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def _profiling() -> Any:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    try:
        from tracekit.capture import profiling
    finally:
        sys.path.pop(0)
    return profiling


def _start() -> None:
    if _STATE["prof"] is not None or not _OUT:
        return
    import torch.distributed as dist

    rank = dist.get_rank()
    _STATE["rank"] = rank
    os.makedirs(os.path.join(_OUT, ".tracekit"), exist_ok=True)
    fault = open(os.path.join(_OUT, ".tracekit", f"rank{rank}.fault"), "w")  # noqa: SIM115
    faulthandler.enable(fault)
    _STATE["fault"] = fault
    _write_status(rank=rank, pid=os.getpid(), state="running", error=None, trace=None)
    if _FR:
        _on_sigterm_dump()
    acts = os.environ.get("TRACEKIT_CAPTURE_ACTIVITIES", "CPU,GPU").split(",")
    _STATE["prof"] = _profiling().start_profiler(
        with_stack=os.environ.get("TRACEKIT_CAPTURE_STACK", "1") == "1",
        record_shapes=os.environ.get("TRACEKIT_CAPTURE_SHAPES", "1") == "1",
        activities=acts)


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _dump_flight_recorder() -> None:
    """This rank's Flight Recorder dump and its groups, once (before the groups are gone)."""
    if not _FR or _STATE["fr_done"] or _STATE["rank"] is None:
        return
    _STATE["fr_done"] = True
    try:
        import torch.distributed.distributed_c10d as c10d
        from torch._C._distributed_c10d import _dump_fr_trace

        rank = _STATE["rank"]
        world = c10d._world
        groups = [{"pg_name": world.pg_names[pg], "pg_desc": getattr(pg, "group_desc", ""),
                   "ranks": sorted(int(r) for r in world.pg_group_ranks.get(pg, {}))}
                  for pg in list(world.pg_names)]
        if groups:
            _write_atomic(os.path.join(_OUT or ".", f"rank{rank}.fr_groups.json"),
                          json.dumps({"rank": rank, "groups": groups}).encode())
        _write_atomic(os.path.join(_OUT or ".", f"rank{rank}.fr_trace.pkl"), _dump_fr_trace())
    except Exception as exc:  # the program's own failure matters more than ours
        _write_status(fr_error=f"flight recorder dump failed: {exc!r}")


def _on_sigterm_dump() -> None:
    """A launcher stops the other ranks with SIGTERM once one failed (torch's spawn does at
    once): write the dump first. Only where the program left SIGTERM at its default."""
    import signal

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: Any) -> None:
        _finish("stopped by SIGTERM")
        os._exit(128 + signum)

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, handler)


def _finish(error: str | None = None) -> None:
    _dump_flight_recorder()
    prof = _STATE["prof"]
    if prof is None:
        return
    _STATE["prof"] = None
    try:
        path = _profiling().stop_and_export(prof, _out_dir(), _STATE["rank"])
        _write_status(state="failed" if error else "exported", error=error, trace=path.name)
    except Exception as exc:  # the program's own failure matters more than ours
        _write_status(state="failed", error=error or f"trace export failed: {exc!r}")


def _out_dir() -> Any:
    from pathlib import Path

    return Path(_OUT or ".")


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _patch_c10d(module: Any) -> None:
    init, destroy = module.init_process_group, module.destroy_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = init(*args, **kwargs)
        _start()
        return result

    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        if not args and kwargs.get("group") is None:
            _finish()
        return destroy(*args, **kwargs)

    for new, old in ((init_process_group, init), (destroy_process_group, destroy)):
        setattr(module, old.__name__, functools.wraps(old)(new))


def _patch_spawn(module: Any) -> None:
    """torch.multiprocessing.spawn catches a rank's exception itself: note it first."""
    wrap = module._wrap

    def _wrap(fn: Any, i: int, args: Any, error_file: Any) -> Any:
        def noted(index: int, *a: Any) -> Any:
            try:
                return fn(index, *a)
            except BaseException as exc:
                _finish(_describe(exc))
                raise

        return wrap(noted, i, args, error_file)

    module._wrap = functools.wraps(wrap)(_wrap)  # same qualname: spawn pickles it by name


_PATCHES = {"torch.distributed.distributed_c10d": _patch_c10d,
            "torch.multiprocessing.spawn": _patch_spawn}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _excepthook(kind: Any, exc: BaseException, tb: Any) -> None:
    _finish(_describe(exc))
    _previous_hook(kind, exc, tb)


def _chain_previous_sitecustomize() -> None:
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_previous_hook = sys.excepthook
if _OUT:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.meta_path.insert(0, _Finder())
    sys.excepthook = _excepthook
    atexit.register(_finish)
_chain_previous_sitecustomize()
