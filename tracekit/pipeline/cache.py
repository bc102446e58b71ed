"""Cache of derived results: a second analysis of the same run skips parse, attribute, measure.

``tracekit analyze --cache-dir D`` stores, beside the parse cache's per-file entries (see
tracekit.parsers.cache), one entry per analysis under ``D/derived/<key>``: the result tables
the reports
read (MEASURED, PHASES, FINDINGS, the instance rows of ATTRIBUTED, every further table of
``Analysis.tables``), RANK_INFO, PROCESS_GROUPS, the first summary's tables and the report
digest (tracekit.reports.digest), with ``meta.json`` naming them. EVENTS is not stored: the
reports never read it past the digest.

The key (:func:`derived_key`) covers everything the results depend on: each input file's
identity (the parse cache's key: resolved path, size, modification time, schema and parser
versions), the rules' content (packaged rule YAML and the user's rule files), the hardware
profile's content, the analysis options (topology, layout, forced rank, on-error), tracekit's
version, the schema version and the content of tracekit's own source. Options that only shape
reports (which reports, the check thresholds) are not part of it, so another report of the same
run is a hit.

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
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracekit import schema as S

if TYPE_CHECKING:
    from tracekit.model import Analysis, AnalyzeOptions, LoadOptions
    from tracekit.summary import Summary

log = logging.getLogger("tracekit.parsers.cache")

FORMAT = "tracekit-derived"
FORMAT_VERSION = "1"
SUBDIR = "derived"
META = "meta.json"
# the result tables of an Analysis stored one file each (None-ness is kept in meta.json)
RESULTS = ("attributed", "measured", "phases", "findings")
SUMMARY = ("ranks", "kernel_time", "communication")


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


def input_identity(paths: Iterable[Path], forced_rank: int | None) -> list[str]:
    """The parse cache's key of each input file (OSError when one cannot be read)."""
    from tracekit.parsers.cache import cache_key

    return [cache_key(p, forced_rank) for p in paths]


def rules_fingerprint(user_files: Sequence[Path]) -> str:
    """The rules' part of the key: tracekit.rules.loader.rules_fingerprint (the packaged
    rules' version and content digest, then each user rule file's content, in load order)."""
    from tracekit.rules.loader import rules_fingerprint as of_rules

    return of_rules(user_files)


def hardware_fingerprint(spec: str | Path | None) -> str:
    """The content of the hardware profile ``spec`` resolves to (as load_profile finds it)."""
    from tracekit.measure.hardware import user_config_dir

    if spec is None:
        return "none"
    candidate = Path(spec)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        return "file:" + _sha(candidate.read_bytes())
    name = str(spec)
    user = user_config_dir() / f"{name}.yaml"
    if user.is_file():
        return "user:" + _sha(user.read_bytes())
    packaged = resources.files("tracekit.measure") / "data" / f"{name}.yaml"
    if packaged.is_file():
        return "packaged:" + _sha(packaged.read_bytes())
    return "unknown:" + name  # the analysis itself reports the unknown name


CODE_ROOT = Path(__file__).resolve().parents[1]  # the tracekit package, every module of it


def code_fingerprint(root: Path = CODE_ROOT) -> str:
    """The content of tracekit's own modules and data: a changed tracekit misses."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".yaml", ".yml", ".json", ".c") and path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
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
            "schema": S.SCHEMA_VERSION,
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
    import pyarrow.parquet as pq

    return pq.read_table(path)


def read(cache_dir: Path, key: str) -> Hit | None:
    """The cached analysis of ``key``, or None (missing, unreadable, foreign: recompute)."""
    from tracekit.model import Analysis, Run
    from tracekit.summary import Summary

    entry = _entry(cache_dir, key)
    try:
        meta = json.loads((entry / META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION \
                or meta.get("key") != key:
            raise ValueError("foreign entry")
        results = {n: (_read_table(entry / f"{n}.parquet") if n in meta["results"] else None)
                   for n in RESULTS}
        tables = {n: _read_table(entry / f"table-{i}.parquet")
                  for i, n in enumerate(meta["tables"])}
        extra = {n: _read_table(entry / f"extra-{i}.parquet")
                 for i, n in enumerate(meta["extra"])}
        summary = {n: _read_table(entry / f"summary-{n}.parquet") for n in SUMMARY} \
            if meta["summary"] else None
        run = Run(events=S.empty(S.EVENTS),
                  process_groups=S.conform(_read_table(entry / "process_groups.parquet"),
                                           S.PROCESS_GROUPS),
                  rank_info=S.conform(_read_table(entry / "rank_info.parquet"), S.RANK_INFO),
                  skipped=[(str(f), str(r)) for f, r in meta["skipped"]], extra=extra)
        skipped = list(run.skipped)
        analysis = Analysis(run=run, extra_tables=tables, info=meta["info"],
                            attributed=results["attributed"], measured=results["measured"],
                            phases_table=results["phases"], findings_table=results["findings"])
        summ = None if summary is None else Summary(
            summary["ranks"], summary["kernel_time"], summary["communication"], skipped)
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
    return Hit(analysis, summ, key)


def _instances(attributed: pa.Table | None) -> pa.Table | None:
    """The collective instance rows of ATTRIBUTED: all that the reports read of it."""
    if attributed is None or S.IS_INSTANCE not in attributed.column_names:
        return attributed
    import pyarrow.compute as pc

    return attributed.filter(pc.fill_null(attributed.column(S.IS_INSTANCE), False))


def write(cache_dir: Path, key: str, analysis: Analysis, summary: Summary | None) -> bool:
    """Store ``analysis`` (with its report digest attached) and ``summary`` under ``key``.

    False when the analysis holds what an entry cannot (its info is not JSON); the caller
    goes on uncached."""
    import pyarrow.parquet as pq

    from tracekit import io

    results = {"attributed": _instances(analysis.attributed), "measured": analysis.measured,
               "phases": analysis.phases_table, "findings": analysis.findings_table}
    extra = {n: t for n, t in analysis.run.extra.items() if n.startswith("report:")}
    stored = [*results.values(), *analysis.extra_tables.values(), *extra.values()]
    if not all(t is None or isinstance(t, pa.Table) for t in stored):
        return False
    try:
        meta = json.dumps({
            "format": FORMAT, "version": FORMAT_VERSION, "key": key,
            "results": [n for n, t in results.items() if t is not None],
            "tables": list(analysis.extra_tables), "extra": list(extra),
            "summary": summary is not None,
            "skipped": [[str(f), str(r)] for f, r in analysis.run.skipped],
            "info": analysis.info,
        }, indent=1)
    except (TypeError, ValueError):
        return False
    entry = _entry(cache_dir, key)
    if entry.exists():  # a corrupt or foreign entry read as a miss: replace it
        shutil.rmtree(entry, ignore_errors=True)

    def put(table: pa.Table, name: str, folder: Path) -> None:
        pq.write_table(table, folder / name, compression="zstd")

    with io.atomic_folder(entry) as tmp:
        for name, table in results.items():
            if table is not None:
                put(table, f"{name}.parquet", tmp)
        for i, table in enumerate(analysis.extra_tables.values()):
            put(table, f"table-{i}.parquet", tmp)
        for i, table in enumerate(extra.values()):
            put(table, f"extra-{i}.parquet", tmp)
        for name, table in (summary.tables() if summary is not None else {}).items():
            put(table, f"summary-{name}.parquet", tmp)
        put(analysis.run.process_groups, "process_groups.parquet", tmp)
        put(analysis.run.rank_info, "rank_info.parquet", tmp)
        (tmp / META).write_text(meta, encoding="utf-8")  # last: an entry without it is a miss
    STATS.writes += 1
    return True
