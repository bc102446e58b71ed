"""Parser registry: sniff the format of a file or run directory and load it into a Run.

``load_run(path, options)`` is the stage contract (ARCHITECTURE.md): a Kineto file, a directory
of Kineto rank files (parsed in parallel through ``tracekit.engine.map_per_rank``, cached as
Parquet with ``options.cache_dir``), or an Ascend export (delegated to
``tracekit.parsers.ascend``). Importing this module is cheap: the parsers load lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tracekit.errors import BadInputError, ConfigError

if TYPE_CHECKING:
    from tracekit.model import LoadOptions, Run
    from tracekit.parsers.kineto import RankTables

TRACE_SUFFIXES = (".json", ".json.gz")
# files that sit beside rank traces and are not traces themselves
IGNORED_NAMES = ("manifest.json",)
IGNORED_PATTERNS = ("*sidecar*.json", "*sidecar*.json.gz", "*fr_trace*.json", "*.fr_groups.json")
_SNIFF_BYTES = 1 << 20
# tracekit.parsers.ascend.rank.OUTPUT, spelled here so that the check below imports nothing
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"


def _ascend() -> ModuleType | None:
    try:
        return importlib.import_module("tracekit.parsers.ascend")
    except ModuleNotFoundError as exc:
        if exc.name == "tracekit.parsers.ascend":
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


def _is_trace_name(path: Path) -> bool:
    name = path.name
    if not name.endswith(TRACE_SUFFIXES) or name in IGNORED_NAMES:
        return False
    return not any(path.match(p) for p in IGNORED_PATTERNS)


def sniff_kineto(path: Path) -> bool | None:
    """True: a Kineto trace; False: some other JSON (a sidecar, a config); None: unreadable
    or not JSON (a broken trace, when its name says trace)."""
    from tracekit.parsers.kineto.read import open_trace, read_block

    try:
        with open_trace(path) as stream:
            head = read_block(stream, path, _SNIFF_BYTES)
            complete = not stream.read(1)
    except BadInputError:
        return None
    if b'"traceEvents"' in head:
        return True
    if not complete:
        return None
    import msgspec

    try:
        doc = msgspec.json.decode(head)
    except msgspec.DecodeError:
        return None
    return isinstance(doc, dict) and "traceEvents" in doc


def trace_files(directory: Path) -> list[Path]:
    """Rank files of a run directory (not recursive), sorted by name; sidecars and manifests
    (JSON without traceEvents) are left out, unreadable trace-named files are kept (they fail
    loudly when parsed)."""
    # a trace-named FIFO or device is kept: it is refused, by name, when it is read
    files = sorted(p for p in directory.iterdir() if not p.is_dir() and _is_trace_name(p))
    return [p for p in files if sniff_kineto(p) is not False]


def load_run(path: Path, options: LoadOptions) -> Run:
    """Read a trace file or a run directory into a Run (EVENTS, PROCESS_GROUPS, RANK_INFO)."""
    path = Path(path)
    if not path.exists():
        raise BadInputError("no such file or directory", path)
    # an Ascend export is always a directory with an ASCEND_OUTPUT folder in it or below
    # it: a file, or a flat folder of files, never pays for importing that parser
    ascend = _ascend() if path.is_dir() and _may_be_ascend(path) else None
    if ascend is not None and ascend.sniff(path):
        run: Run = ascend.load_ascend(path, options)
        return run
    if path.is_dir():
        if options.rank is not None:
            raise ConfigError("--rank applies to a single trace file, not to a run directory")
        files = trace_files(path)
        if not files:
            raise BadInputError(
                "no trace files in this directory (expected *.json or *.json.gz Kineto traces,"
                " or an Ascend *_ascend_pt export)", path)
        forced = None
    else:
        files = [path]
        forced = options.rank
    # one file: its pieces are decoded in parallel; several: one process per rank file
    inner = (options.jobs or _cores()) if len(files) == 1 else 1
    items = [(str(f), forced, str(options.cache_dir) if options.cache_dir else None, inner)
             for f in files]
    results = _map(load_rank_item, items, options, [_size(f) for f in files])
    return _combine(path, results, options.on_error)


def _map(func: Callable[[Any], Any], items: Sequence[Any], options: LoadOptions,
         sizes: Sequence[int] | None = None) -> list[Any]:
    try:
        from tracekit.engine import map_per_rank
    except ImportError:  # pragma: no cover - the engine module ships with tracekit
        return [func(i) for i in items]
    # sizes: a small run is parsed in this process unless --jobs asks for workers
    return list(map_per_rank(
        func, items, engine=options.engine, jobs=options.jobs, scheduler=options.scheduler,
        progress=options.progress, label="parse", sizes=sizes))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # reported as bad input by the reader
        return 0


def _cores() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def load_rank_item(
    item: tuple[str, int | None, str | None, int],
) -> RankTables | tuple[str, str]:
    """Worker: one rank file -> RankTables, or (file, reason) when it is bad input."""
    from tracekit.parsers.cache import cached_rank

    path, forced, cache_dir, jobs = item
    try:
        return cached_rank(Path(path), forced, Path(cache_dir) if cache_dir else None, jobs)
    except BadInputError as exc:
        return (path, exc.one_line())


def _combine(path: Path, results: Sequence[Any], on_error: str) -> Run:
    import pyarrow as pa

    from tracekit import schema as S
    from tracekit.model import Run

    good: list[RankTables] = []
    skipped: list[tuple[str, str]] = []
    for res in results:
        if isinstance(res, tuple):
            if on_error != "skip":
                raise BadInputError(res[1].removeprefix(res[0] + ": "), res[0])
            skipped.append(res)
        else:
            good.append(res)
    if not good:
        reasons = "; ".join(r for _, r in skipped)
        raise BadInputError(f"no readable trace file ({reasons})", path)
    by_rank: dict[int, str] = {}
    for r in good:
        src = r.rank_info.column(S.SOURCE)[0].as_py()
        if r.rank in by_rank:
            raise BadInputError(
                f"rank {r.rank} appears twice ({Path(by_rank[r.rank]).name} and"
                f" {Path(src).name}); each rank file must carry its own rank", path)
        by_rank[r.rank] = src
    good.sort(key=lambda r: r.rank)
    return Run(
        events=pa.concat_tables([r.events for r in good]),
        process_groups=pa.concat_tables([r.process_groups for r in good]),
        rank_info=pa.concat_tables([r.rank_info for r in good]),
        skipped=skipped,
    )
