"""Start, stop and export torch.profiler the way every tracekit capture does it.

Kept free of tracekit imports beyond the standard library so that the injected
``sitecustomize`` hook can load it inside any program.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def trace_file_name(rank: int | None) -> str:
    return f"rank{rank}.trace.json.gz" if rank is not None else f"pid{os.getpid()}.trace.json.gz"


def current_rank() -> int | None:
    """The global rank when torch.distributed is initialised, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return None


def start_profiler(*, with_stack: bool = True, record_shapes: bool = True,
                   activities: list[str] | None = None) -> Any:
    """A started torch.profiler.profile: CPU, plus CUDA when a GPU is present."""
    import torch
    from torch.profiler import ProfilerActivity

    wanted = [a.upper() for a in (activities or ["CPU", "GPU"])]
    acts = []
    if "CPU" in wanted:
        acts.append(ProfilerActivity.CPU)
    if ("GPU" in wanted or "CUDA" in wanted) and torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    prof = torch.profiler.profile(activities=acts, record_shapes=record_shapes,
                                  with_stack=with_stack)
    prof.start()
    return prof


def stop_and_export(prof: Any, out_dir: Path, rank: int | None = None) -> Path:
    """Stop ``prof`` and write ``rank{r}.trace.json.gz`` atomically into ``out_dir``.

    ``distributedInfo`` is taken again before stopping so that groups created after the
    profiler started still appear in ``pg_config``.
    """
    with contextlib.suppress(Exception):
        info = prof._get_distributed_info()
        if info:
            prof.add_metadata_json("distributedInfo", json.dumps(info))
    prof.stop()
    from tracekit import io  # standard library only, like this module

    io.make_folder(out_dir)
    rank = current_rank() if rank is None else rank
    final = out_dir / trace_file_name(rank)
    raw = io.temp_file(final)  # torch writes plain JSON here; the .gz target compresses it
    try:
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as fin, io.atomic_stream(final) as fout:
            shutil.copyfileobj(fin, fout)
    finally:
        raw.unlink(missing_ok=True)
    return final


@contextlib.contextmanager
def profile(out_dir: str | Path = "tracekit-traces", *, rank: int | None = None,
            with_stack: bool = True, record_shapes: bool = True,
            activities: list[str] | None = None) -> Iterator[Any]:
    """Profile the enclosed region and write this rank's trace into ``out_dir``.

    >>> with tracekit.capture.profile("traces"):      # doctest: +SKIP
    ...     model(batch)

    The file is ``rank{r}.trace.json.gz`` (``r`` = torch.distributed rank, or the pid when
    torch.distributed is not initialised). Yields the torch profiler.
    """
    prof = start_profiler(with_stack=with_stack, record_shapes=record_shapes,
                          activities=activities)
    try:
        yield prof
    finally:
        stop_and_export(prof, Path(out_dir), rank)
