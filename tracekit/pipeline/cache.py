"""Cache of derived results: a second analysis of the same run skips parse, attribute, measure.

``tracekit analyze --cache-dir D`` stores, beside the parse cache's per-file entries (see
tracekit.parsers.cache), one entry per analysis under ``D/derived/<key>``: the result tables
the reports read (MEASURED, PHASES, FINDINGS, the instance rows of ATTRIBUTED, every further
table of ``Analysis.tables``), RANK_INFO, PROCESS_GROUPS, the first summary's tables and the
report digest (tracekit.reports.digest), with ``meta.json`` naming them. EVENTS is not stored:
the reports never read it past the digest. Each table is one Arrow IPC stream file, read back
memory-mapped: a small table is stored plain (no copy on reading), a large one LZ4-compressed.

The key (:func:`derived_key`) covers everything the results depend on: each input file's
identity (resolved path, size, modification time and inode: one ``stat``, the file is not
read), the user's rule files (content), the hardware profile's content, the analysis options
(topology, layout, forced rank, on-error), tracekit's version and the content of tracekit's own
modules and data files (which holds the packaged rules and profiles, the schema, the parsers
and their versions). Options that only shape reports (which reports, the check thresholds) are
not part of it, so another report of the same run is a hit. Computing a key imports neither
pyarrow nor the stages: a warm `tracekit analyze` whose reports are all stored
(tracekit.reports.memo) reads nothing else.

An entry is written through tracekit.io's atomic folder writer. An entry that cannot be read,
is incomplete or names another key is ignored (the analysis is computed again and the entry
replaced), without a traceback.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from tracekit.model import Analysis, AnalyzeOptions, LoadOptions
    from tracekit.summary import Summary

log = logging.getLogger("tracekit.parsers.cache")

FORMAT = "tracekit-derived"
FORMAT_VERSION = "2"  # 2: Arrow IPC files, inputs keyed by stat
SUBDIR = "derived"
META = "meta.json"
SUFFIX = ".arrow"
# the result tables of an Analysis stored one file each (None-ness is kept in meta.json)
RESULTS = ("attributed", "measured", "phases", "findings")
SUMMARY = ("ranks", "kernel_time", "communication")
# a table of at least this many bytes is stored LZ4-compressed (ATTRIBUTED's instance rows
# are tens of MB in memory, mostly repeated strings); a smaller one plain, mapped as it is
COMPRESS_BYTES = 1 << 20


@dataclass
class Hit:
    """What a cache hit gives back: the analysis (EVENTS empty) and the first summary."""

    analysis: Analysis
    summary: Summary | None  # None: the entry was stored without one (tracekit check)
    key: str


@dataclass
class _Stats:
    """Hits, misses and writes of this process (tests read them)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    keys: list[str] = field(default_factory=list)


STATS = _Stats()


# ------------------------------------------------------------------ the key


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_files(path: Path) -> list[Path]:
    """Every file the analysis of ``path`` may read: the file, or each file under the folder."""
    if not path.is_dir():
        return [path]
    out: list[Path] = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        out.extend(Path(root) / f for f in sorted(files))
    return out


def file_identity(path: Path) -> list[Any]:
    """One file's identity: resolved path, size, modification time (ns) and inode (OSError
    when it cannot be read). A rewritten file has a new mtime, a replaced one a new inode."""
    st = path.stat()
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{path}: not readable")
    return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino]


def input_identity(paths: Iterable[Path], forced_rank: int | None) -> list[Any]:
    """The identity of each input file, and the forced rank (OSError when one cannot be
    read). What parses them (the parsers, their versions, the packaged kernel rules) is in
    the code fingerprint."""
    return [[file_identity(p) for p in paths], forced_rank]


def rules_fingerprint(user_files: Sequence[Path]) -> str:
    """The user's rule files, by content, in load order (OSError when one cannot be read);
    the packaged rules are data files of tracekit, in the code fingerprint."""
    h = hashlib.sha256()
    for path in user_files:
        h.update(hashlib.sha256(Path(path).read_bytes()).digest())
    return h.hexdigest()


def hardware_fingerprint(spec: str | Path | None) -> str:
    """The content of the hardware profile ``spec`` resolves to (the lookup load_profile
    uses: tracekit.measure.profile_source)."""
    from tracekit.measure.profile_source import is_file_spec, named_profile

    if spec is None:
        return "none"
    if is_file_spec(spec):
        return "file:" + _sha(Path(spec).read_bytes())
    found = named_profile(str(spec))
    if found is None:
        return "unknown:" + str(spec)  # the analysis itself reports the unknown name
    return f"{found[0]}:" + _sha(found[1].read_bytes())


CODE_ROOT = Path(__file__).resolve().parents[1]  # the tracekit package, every module of it
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".c")


def code_fingerprint(root: Path = CODE_ROOT) -> str:
    """The content of tracekit's own modules and data: a changed tracekit misses."""
    h = hashlib.sha256()
    found: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.extend((os.path.relpath(os.path.join(folder, f), root), os.path.join(folder, f))
                     for f in files if f.endswith(CODE_SUFFIXES))
    for rel, full in sorted(found):
        with open(full, "rb") as fh:
            h.update(rel.replace(os.sep, "/").encode() + b"\0" + fh.read())
    return h.hexdigest()


def _inside(folder: Path, run: Path) -> bool:
    """Whether ``folder`` is ``run`` or lies under it (so writing there changes the input)."""
    try:
        return run.is_dir() and folder.resolve().is_relative_to(run.resolve())
    except OSError:
        return True


def derived_key(path: Path, load: LoadOptions, options: AnalyzeOptions,
                more_inputs: Sequence[Path] = (), variant: str = "analyze") -> str | None:
    """The key of the analysis of ``path`` with these options; None when an input, a rule
    file or the profile cannot be read (the analysis then words the error, uncached).
    ``variant``: which command's Analysis it is (``analyze`` adds the first summary's tables
    to it, ``check`` does not), so that each gets back exactly what it computes."""
    from tracekit.version import __version__

    if load.cache_dir is not None and _inside(Path(load.cache_dir), Path(path)):
        return None  # never written into an input folder (the parse cache still works there)
    try:
        parts: dict[str, Any] = {
            "format": [FORMAT, FORMAT_VERSION],
            "variant": variant,
            "tracekit": __version__,
            "code": code_fingerprint(),
            "inputs": input_identity(input_files(Path(path)), load.rank),
            "more_inputs": input_identity(
                [f for p in more_inputs for f in input_files(Path(p))], None),
            "rules": rules_fingerprint(tuple(options.rules_files)),
            "hardware": hardware_fingerprint(options.hardware),
            "topology": repr(options.topology),
            "layout": options.layout,
            "on_error": load.on_error,
        }
    except OSError:
        return None
    return _sha(json.dumps(parts, sort_keys=True).encode())[:32]


# ------------------------------------------------------------------ read / write


def _entry(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / SUBDIR / key


def _read_table(path: Path) -> pa.Table:
    """One stored table, memory-mapped (a plain one is not copied; the columns a report
    never reads are never paged in). The IPC stream format, not the file format: it keeps
    each chunk's own dictionary, so a table reads back exactly as it was written."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def _write_table(table: pa.Table, path: Path) -> None:
    import pyarrow as pa

    compression = "lz4" if table.nbytes >= COMPRESS_BYTES else None
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.OSFile(str(path), "wb") as sink, \
            pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)


def read(cache_dir: Path, key: str) -> Hit | None:
    """The cached analysis of ``key``, or None (missing, unreadable, foreign: recompute)."""
    entry = _entry(cache_dir, key)
    try:
        meta = json.loads((entry / META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION \
                or meta.get("key") != key:
            raise ValueError("foreign entry")
        hit = _hit(entry, meta, key)
    except FileNotFoundError:
        STATS.misses += 1
        return None
    except Exception as exc:  # corrupt or foreign: ignored, recomputed and replaced
        log.info("derived cache entry %s ignored: %s", entry, exc)
        STATS.misses += 1
        return None
    STATS.hits += 1
    STATS.keys.append(key)
    log.info("derived cache hit %s", key)
    return hit


def stored_reports_hit(key: str) -> None:
    """Count and log a hit answered by the stored reports alone (tracekit.reports.memo):
    the entry ``key`` itself is not read."""
    STATS.hits += 1
    STATS.keys.append(key)
    log.info("derived cache hit %s (every report stored)", key)


def _hit(entry: Path, meta: dict[str, Any], key: str) -> Hit:
    from tracekit import schema as S
    from tracekit.model import Analysis, Run
    from tracekit.summary import Summary

    def table(name: str) -> pa.Table:
        return _read_table(entry / f"{name}{SUFFIX}")

    results = {n: (table(n) if n in meta["results"] else None) for n in RESULTS}
    tables = {n: table(f"table-{i}") for i, n in enumerate(meta["tables"])}
    extra = {n: table(f"extra-{i}") for i, n in enumerate(meta["extra"])}
    # the first summary's tables are among ``tables`` (analyze) unless stored apart
    summary = {n: tables[n] if n in meta["summary_shared"] else table(f"summary-{n}")
               for n in SUMMARY} if meta["summary"] else None
    run = Run(events=S.empty(S.EVENTS),
              process_groups=S.conform(table("process_groups"), S.PROCESS_GROUPS),
              rank_info=S.conform(table("rank_info"), S.RANK_INFO),
              skipped=[(str(f), str(r)) for f, r in meta["skipped"]], extra=extra)
    analysis = Analysis(run=run, extra_tables=tables, info=meta["info"],
                        attributed=results["attributed"], measured=results["measured"],
                        phases_table=results["phases"], findings_table=results["findings"])
    summ = None if summary is None else Summary(
        summary["ranks"], summary["kernel_time"], summary["communication"], list(run.skipped))
    return Hit(analysis, summ, key)


def _instances(attributed: pa.Table | None) -> pa.Table | None:
    """The collective instance rows of ATTRIBUTED: all that the reports read of it."""
    from tracekit import schema as S

    if attributed is None or S.IS_INSTANCE not in attributed.column_names:
        return attributed
    import pyarrow.compute as pc

    return attributed.filter(pc.fill_null(attributed.column(S.IS_INSTANCE), False))


def write(cache_dir: Path, key: str, analysis: Analysis, summary: Summary | None) -> bool:
    """Store ``analysis`` (with its report digest attached) and ``summary`` under ``key``.

    False when the analysis holds what an entry cannot (its info is not JSON); the caller
    goes on uncached."""
    import pyarrow as pa

    from tracekit import io

    results = {"attributed": _instances(analysis.attributed), "measured": analysis.measured,
               "phases": analysis.phases_table, "findings": analysis.findings_table}
    extra = {n: t for n, t in analysis.run.extra.items() if n.startswith("report:")}
    stored = [*results.values(), *analysis.extra_tables.values(), *extra.values()]
    if not all(t is None or isinstance(t, pa.Table) for t in stored):
        return False
    own = summary.tables() if summary is not None else {}
    shared = [n for n, t in own.items() if analysis.extra_tables.get(n) is t]
    try:
        meta = json.dumps({
            "format": FORMAT, "version": FORMAT_VERSION, "key": key,
            "results": [n for n, t in results.items() if t is not None],
            "tables": list(analysis.extra_tables), "extra": list(extra),
            "summary": summary is not None, "summary_shared": shared,
            "skipped": [[str(f), str(r)] for f, r in analysis.run.skipped],
            "info": analysis.info,
        }, indent=1)
    except (TypeError, ValueError):
        return False
    entry = _entry(cache_dir, key)
    if entry.exists():  # a corrupt or foreign entry read as a miss: replace it
        shutil.rmtree(entry, ignore_errors=True)
    with io.atomic_folder(entry) as tmp:
        named = [*((n, t) for n, t in results.items() if t is not None),
                 *((f"table-{i}", t) for i, t in enumerate(analysis.extra_tables.values())),
                 *((f"extra-{i}", t) for i, t in enumerate(extra.values())),
                 *((f"summary-{n}", t) for n, t in own.items() if n not in shared),
                 ("process_groups", analysis.run.process_groups),
                 ("rank_info", analysis.run.rank_info)]
        for name, table in named:
            _write_table(table, tmp / f"{name}{SUFFIX}")
        (tmp / META).write_text(meta, encoding="utf-8")  # last: an entry without it is a miss
    STATS.writes += 1
    return True
