"""Parser registry and the one per-rank driver: sniff the format of a path, find its ranks,
parse each (in parallel, through the parse cache), apply the ``on_error`` policy and put the
ranks into one Run.

``load_run(path, options)`` is the stage contract (ARCHITECTURE.md). A format is a module of
this package that provides:

* ``rank_inputs(path, options) -> list[RankInput]``: the ranks of the path (a Kineto rank
  file, an Ascend rank directory), or a one-line error when there are none;
* ``parse_rank(RankInput)``: one rank, parsed (picklable; BadInputError when it is bad input);
* ``cache_key(RankInput)``, ``to_entry(parsed)``, ``from_entry(tables)``: its parse-cache
  entry (tracekit.parsers.cache), keyed by the files the rank reads;
* ``rank_of(parsed)``, ``source_of(parsed)``: its rank and what it was read from;
* ``assemble(path, parsed ranks, skipped) -> Run``: the ranks put together (concatenated for
  Kineto; for Ascend, with the steps that need every rank: communicator names, members, seq).

The driver owns the rest, once for every format: the ranks are parsed through
``tracekit.engine.map_per_rank`` (in this process for a small run: Kineto ranks on a thread
per core, as the native reader scans and inflates without the GIL and shares no state
between files), each through the cache when ``options.cache_dir`` is set; a rank that is
bad input stops the load (``on_error="stop"``, its one-line error) or is listed in
``Run.skipped`` with the reason (``"skip"``); no readable rank, or a rank read twice, is an
error. Importing this module is cheap: the formats load lazily, and a flat folder of files
never imports the Ascend parser.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tracekit.errors import BadInputError
from tracekit.parsers.rank_input import RankFailure, RankInput

if TYPE_CHECKING:
    from tracekit.model import LoadOptions, Run

# the formats, in the order they are sniffed (the last one takes whatever is left)
ASCEND = "tracekit.parsers.ascend"
KINETO = "tracekit.parsers.kineto"
# tracekit.parsers.ascend.rank.OUTPUT, spelled here so that the check below imports nothing
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"


def _ascend() -> ModuleType | None:
    try:
        return importlib.import_module(ASCEND)
    except ModuleNotFoundError as exc:
        if exc.name == ASCEND:
            return None
        raise


def _may_be_ascend(path: Path) -> bool:
    """False only when ``path`` cannot be an Ascend export: a directory, not named
    ASCEND_OUTPUT, without any subdirectory (an export always has its ASCEND_OUTPUT
    folder in the directory or one level below it). Such a flat folder of Kineto rank
    files then never pays for importing the Ascend parser's modules (about 40 ms of CPU
    on the benchmark machine; pandas, which they import too, comes in with pyarrow's first
    ``pa.array`` anyway)."""
    if path.name == ASCEND_OUTPUT:
        return True
    try:
        return any(p.is_dir() for p in path.iterdir())
    except OSError:
        return True  # the Ascend sniffer decides (and finds nothing)


def format_of(path: Path) -> ModuleType:
    """The format module that reads ``path``: an Ascend export (always a directory with an
    ASCEND_OUTPUT folder in it or below it), else Kineto."""
    ascend = _ascend() if path.is_dir() and _may_be_ascend(path) else None
    if ascend is not None and ascend.sniff(path):
        return ascend
    return importlib.import_module(KINETO)


def trace_files(directory: Path) -> list[Path]:
    """The Kineto rank files of a run directory (tracekit.parsers.kineto.files)."""
    from tracekit.parsers.kineto.files import trace_files as kineto_files

    return kineto_files(directory)


def load_run(path: Path, options: LoadOptions) -> Run:
    """Read a trace file or a run directory into a Run (EVENTS, PROCESS_GROUPS, RANK_INFO)."""
    path = Path(path)
    if not path.exists():
        raise BadInputError("no such file or directory", path)
    fmt = format_of(path)
    inputs: list[RankInput] = fmt.rank_inputs(path, options)
    cache_dir = str(options.cache_dir) if options.cache_dir else None
    cached = _cached(fmt, inputs, options.cache_dir)
    if all(cached):
        # every rank is read back from the parse cache: no worker would parse anything, and
        # starting a pool or a Dask cluster (tracekit's import in each worker, the tables
        # pickled back) costs more than the reads
        options = dataclasses.replace(options, jobs=1, engine="local", scheduler=None)
    # a format's run_scope: what it keeps from one rank file to the next in this process
    with getattr(fmt, "run_scope", contextlib.nullcontext)():
        results = _map([(fmt.__name__, item, cache_dir) for item in inputs], options,
                       [0 if hit else item.size
                        for item, hit in zip(inputs, cached, strict=True)])
    ranks, skipped = _apply_policy(path, fmt, results, options.on_error)
    run: Run = fmt.assemble(path, ranks, skipped)
    return run


def _cached(fmt: ModuleType, inputs: Sequence[RankInput], cache_dir: Path | None
            ) -> list[bool]:
    """Whether each rank has an entry in the parse cache (tracekit.parsers.cache)."""
    if cache_dir is None:
        return [False] * len(inputs)
    out = []
    for item in inputs:
        try:
            out.append((Path(cache_dir) / fmt.cache_key(item)).is_dir())
        except OSError:
            out.append(False)  # the parser words the error
    return out


def parse_rank_item(item: tuple[str, RankInput, str | None]) -> Any:
    """Worker: one rank, parsed (through the cache), or its RankFailure when it is bad
    input."""
    from tracekit.parsers.cache import cached_rank

    module, rank, cache_dir = item
    fmt = importlib.import_module(module)
    try:
        return cached_rank(fmt, rank, Path(cache_dir) if cache_dir else None)
    except BadInputError as exc:
        return RankFailure(exc.path or rank.path, exc.message)


def _map(items: Sequence[tuple[str, RankInput, str | None]], options: LoadOptions,
         sizes: Sequence[int]) -> list[Any]:
    from tracekit.engine import map_per_rank

    # sizes: a small run is parsed in this process unless --jobs asks for workers; preload:
    # a local pool's forkserver imports the formats and the cache once, not each worker;
    # threads: Kineto ranks parsed in this process go two (cores) at a time
    formats = sorted({module for module, _, _ in items})
    return list(map_per_rank(
        parse_rank_item, items, engine=options.engine, jobs=options.jobs,
        scheduler=options.scheduler, progress=options.progress, label="parse", sizes=sizes,
        preload=[*formats, "tracekit.parsers.cache"], threads=formats == [KINETO]))


def _apply_policy(path: Path, fmt: ModuleType, results: Sequence[Any],
                  on_error: str) -> tuple[list[Any], list[tuple[str, str]]]:
    """The parsed ranks and the (file, reason) of each skipped one; the first failure is
    raised unless ``on_error`` is "skip"; no rank left, or one rank twice, is an error."""
    ranks: list[Any] = []
    skipped: list[tuple[str, str]] = []
    for res in results:
        if isinstance(res, RankFailure):
            if on_error != "skip":
                raise BadInputError(res.message, res.file)
            skipped.append((res.file, res.one_line()))
        else:
            ranks.append(res)
    if not ranks:
        reasons = "; ".join(r for _, r in skipped)
        raise BadInputError(f"no readable trace file ({reasons})", path)
    seen: dict[int, str] = {}
    for parsed in ranks:
        rank, src = fmt.rank_of(parsed), fmt.source_of(parsed)
        if rank in seen:
            raise BadInputError(
                f"rank {rank} appears twice ({Path(seen[rank]).name} and {Path(src).name});"
                " each rank's files must carry its own rank", path)
        seen[rank] = src
    return ranks, skipped
