"""Many ranks in bounded memory: a per-rank pipeline writing a Parquet dataset (issue 8).

Per rank, independently (tasks run by :func:`tracekit.engine.map_per_rank` on the local
process pool or on Dask): parse -> attribute (rules, rank-local evidence) -> per-rank measures
(the device timeline: time classes, exposed communication of every collective) -> Parquet
files partitioned by rank::

    OUT/events/rank=R/part-0.parquet     ATTRIBUTED rows of rank R
    OUT/comm/rank=R/part-0.parquet       the communication subset: one row per collective
                                         instance with its exposed time (a few % of events)
    OUT/classes/rank=R/part-0.parquet    TIME_CLASSES of rank R
    OUT/units/rank=R/part-0.parquet      COLLECTIVE_UNITS of rank R (what the lints read)
    OUT/groups/rank=R/..., OUT/info/rank=R/...   PROCESS_GROUPS, RANK_INFO
    OUT/sources/<file>.json              which file made which rank, with the file's key

A task takes one large file, or a batch of small consecutive ones (:func:`plan_batches`):
the rules engine and the measures are table programs whose fixed cost per call dominates a
small rank, so a batch pays it once. Each rank of a batch is attributed as if it were alone
(its own topology, no evidence from other ranks) and its ids are renumbered from its own
start, so its partition is the same whichever batch it falls in.

Cross-rank steps then read only the small parts: instance matching, transfer / wait / skew
and stragglers from ``comm``; the lints, once over all ranks, from ``units`` with the
topology of every rank's process groups. A worker holds one task at a time, so ``jobs``
workers need about ``jobs`` large ranks' worth of memory; the main process holds the subsets.

Every file is written under a dot-name and renamed into place (dataset readers skip dot-files),
and a rank's ``sources`` record is written last: a run interrupted with Ctrl-C leaves no
half-written entry, and the next run skips the ranks already done (same file size and mtime).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.engine import default_jobs, map_per_rank
from tracekit.errors import BadInputError
from tracekit.model import AnalyzeOptions, LoadOptions, Run

PARTS = ("events", "comm", "classes", "units", "groups", "info")
SOURCES = "sources"
PIPELINE_VERSION = "2"


@dataclass(frozen=True)
class BatchTask:
    """Trace files to take through the per-rank pipeline in one task (picklable).

    Small rank files are batched (see :func:`plan_batches`) so that the fixed cost of a
    pipeline pass (the rules engine's frame steps, the measures) is paid once per batch, not
    once per rank; every rank is still attributed as if it were alone (rank-local evidence),
    so a rank's results do not depend on the batch it fell in.
    """

    paths: tuple[str, ...]
    out_dir: str
    rank: int | None = None  # forced rank (a single file only)
    options: AnalyzeOptions = field(default_factory=AnalyzeOptions)
    on_error: str = "stop"
    keep_events: bool = True
    attribute: bool = True  # False: no rules; kernel classes from the parser's op column


# a batch holds at most this many files and this much JSON (a .gz file counts its
# uncompressed size): less than one rank of the 64 x 50 MB benchmark run; larger files run alone
BATCH_FILES = 64
BATCH_BYTES = 32 << 20


def json_bytes(path: Path) -> int:
    """Size of the JSON in ``path``: a gzip member's trailer holds it (mod 4 GiB), else the
    file size; 0 for a file that cannot be read (it fails later, with its own message)."""
    try:
        size = path.stat().st_size
        if path.suffix != ".gz" or size < 18:
            return size
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(f.read(4), "little"))
    except OSError:
        return 0


def plan_batches(files: list[Path], jobs: int, *, max_files: int = BATCH_FILES,
                 max_bytes: int = BATCH_BYTES) -> list[list[Path]]:
    """Consecutive runs of ``files`` (order kept) under both limits (``max_bytes`` of JSON, see
    :func:`json_bytes`), and at least ``jobs`` batches when there are that many files, so that
    every worker gets work."""
    per_batch = max(1, min(max_files, -(-len(files) // max(1, jobs))))
    batches: list[list[Path]] = []
    size = 0
    for f in files:
        nbytes = json_bytes(f)
        if not batches or len(batches[-1]) >= per_batch or size + nbytes > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(f)
        size += nbytes
    return batches


@dataclass(frozen=True)
class RankDone:
    """What a worker sends back: small, whatever the size of the rank."""

    source: str
    rank: int | None
    events: int
    comm_rows: int
    seconds: float
    reused: bool = False
    error: str | None = None


@dataclass
class ScaleResult:
    """The cross-rank results of a partitioned run (the per-rank tables stay on disk)."""

    out_dir: Path
    ranks: list[int]
    measured: pa.Table  # MEASURED (transfer / wait / skew / exposed; bounds need a profile)
    stragglers: pa.Table  # STRAGGLERS
    findings: pa.Table  # FINDINGS: per-rank lints plus the straggler findings
    classes: pa.Table  # TIME_CLASSES of every rank
    done: list[RankDone]
    skipped: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def source_key(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "schema": S.SCHEMA_VERSION, "pipeline": PIPELINE_VERSION}


def _source_record(out: Path, path: Path) -> Path:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    return out / SOURCES / f"{path.name}.{digest}.json"


def part_path(out: Path, part: str, rank: int) -> Path:
    return out / part / f"rank={rank}" / "part-0.parquet"


@contextlib.contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A dot-named temporary beside ``path``, renamed onto it when the block succeeds."""
    from tracekit import io

    with io.atomic_path(path, make_parents=True) as tmp:
        yield tmp


# below this size a part is written plain: compression, statistics and dictionary pages
# cost more time than the bytes they save (a small rank writes six parts)
SMALL_PART_BYTES = 1 << 20


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    small = table.nbytes < SMALL_PART_BYTES
    with _atomic(path) as tmp:
        if small:
            pq.write_table(table, tmp, compression="none", write_statistics=False,
                           use_dictionary=False)
        else:
            pq.write_table(table, tmp, compression="zstd")


def remove_stale_temporaries(out: Path) -> int:
    """Delete the temporaries of writers that no longer run (a worker killed by Ctrl-C or
    ``terminate`` cannot clean up after itself); returns how many were removed."""
    removed = 0
    for tmp in out.glob("*/**/.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # that writer still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed += 1
    return removed


def _already_done(task: BatchTask, path: Path) -> RankDone | None:
    out = Path(task.out_dir)
    record = _source_record(out, path)
    if not record.is_file():
        return None
    try:
        saved = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    rank = saved.get("rank")
    if saved.get("key") != source_key(path) or saved.get("forced") != task.rank or saved.get(
            "attribute") != task.attribute or not all(
            part_path(out, p, rank).is_file() for p in PARTS if task.keep_events or
            p != "events"):
        return None
    return RankDone(str(path), rank, saved["events"], saved["comm_rows"], 0.0, reused=True)


def comm_subset(attributed: pa.Table, timeline: Any = None) -> pa.Table:
    """One row per collective instance of one rank, with its exposed (not overlapped) time.

    The rows are measure's instance rows (metadata completed from the CPU wrappers, kernels of
    one logical collective merged) so that cross-rank matching sees exactly what the
    whole-run pipeline sees. ``attributed`` must be conformed to ATTRIBUTED; ``timeline`` is
    its ``build_timeline`` when the caller has it already.
    """
    import numpy as np

    from tracekit.measure import crossrank
    from tracekit.measure.phases import build_timeline, exposed_ns

    df = crossrank.instance_rows(attributed)
    if len(df):
        tl = timeline if timeline is not None else build_timeline(attributed)
        fused = (df[S.KERNEL_CLASS] == S.KernelClass.FUSED).to_numpy()
        df[S.EXPOSED_NS] = exposed_ns(
            tl, df[crossrank.ROW].to_numpy(dtype=np.int64),
            df[S.TS_NS].to_numpy(dtype=np.int64), df[crossrank.END].to_numpy(dtype=np.int64),
            fused)
    else:
        df[S.EXPOSED_NS] = pd_int64()
    return pa.Table.from_pandas(df, preserve_index=False)


def pd_int64() -> Any:
    import pandas as pd

    return pd.Series(dtype="int64")


def unattributed(events: pa.Table) -> pa.Table:
    """ATTRIBUTED without the rules: kernel classes from the parser's op column only, so that
    every kernel with an op counts as one collective instance."""
    from tracekit.summary import kernel_classes

    return events.append_column(S.KERNEL_CLASS, kernel_classes(events))


@dataclass
class _Parsed:
    path: Path
    run: Run
    rank: int
    seconds: float


def _parse(task: BatchTask, path: Path) -> _Parsed | RankDone:
    """One file of the batch: parsed, or the RankDone of a skipped bad file."""
    from tracekit.parsers import load_run

    started = time.perf_counter()
    try:
        run = load_run(path, LoadOptions(rank=task.rank, jobs=1))
    except BadInputError as exc:
        if task.on_error == "skip":
            return RankDone(str(path), None, 0, 0, 0.0, error=exc.one_line())
        raise
    if len(run.ranks) != 1:
        raise BadInputError(f"expected one rank per file, found ranks {run.ranks}", path)
    return _Parsed(path, run, run.ranks[0], time.perf_counter() - started)


def process_batch(task: BatchTask) -> list[RankDone]:
    """The per-rank pipeline for the files of one batch (top-level: it runs in workers)."""
    done: dict[str, RankDone] = {}
    parsed: dict[int, _Parsed] = {}  # by rank
    for name in task.paths:
        path = Path(name)
        try:
            reused = _already_done(task, path)
            item = reused if reused is not None else _parse(task, path)
        except BadInputError:
            # stop at the first bad file, as one file per task would: the ranks before it
            # are finished and written first
            _finish(task, list(parsed.values()))
            raise
        if isinstance(item, RankDone):
            done[name] = item
            continue
        if item.rank in parsed:
            raise BadInputError(f"rank {item.rank} appears twice ({parsed[item.rank].path.name}"
                                f" and {path.name})", path.parent)
        parsed[item.rank] = item
    done.update(_finish(task, list(parsed.values())))
    return [done[name] for name in task.paths]


def _finish(task: BatchTask, parsed: list[_Parsed]) -> dict[str, RankDone]:
    """Attribute, measure and write the parsed ranks, a topology group at a time."""
    done: dict[str, RankDone] = {}
    for topo, group in _topology_groups(task, parsed):
        done.update(_process_group(task, group, topo))
    return done


def _topology_groups(task: BatchTask, parsed: list[_Parsed]) -> list[tuple[Any, list[_Parsed]]]:
    """The batch split by the topology each rank implies alone (the options' topology, else
    the rank's own process groups), so that a rank is attributed exactly as if it were the
    only file; without the rules, one group."""
    if not parsed:
        return []
    if not task.attribute:
        return [(None, parsed)]
    from tracekit.rules.engine import resolve_topology
    from tracekit.rules.loader import load_rules

    rules = load_rules(task.options.rules_files)
    groups: dict[Any, list[_Parsed]] = {}
    for p in parsed:
        groups.setdefault(resolve_topology(p.run, task.options, rules), []).append(p)
    return list(groups.items())


def _rank_local(table: pa.Table, column: str, offsets: dict[int, int]) -> pa.Table:
    """``column`` (a count over the batch's concatenated ranks) made to count from the
    rank's own first value, as it does when the rank is processed alone."""
    import numpy as np
    import pyarrow.compute as pc

    if column not in table.column_names or not table.num_rows:
        return table
    ranks = table.column(S.RANK).to_numpy()
    base = np.zeros(int(ranks.max()) + 1, dtype=np.int64)
    for rank, offset in offsets.items():
        base[rank] = offset
    values = pc.subtract(table.column(column), pa.array(base[ranks]))
    return table.set_column(table.column_names.index(column), column, values)


def _process_group(task: BatchTask, group: list[_Parsed], topo: Any) -> dict[str, RankDone]:
    """Attribute and measure the ranks of ``group`` together, then write each rank apart."""
    import numpy as np

    from tracekit.measure.crossrank import ROW
    from tracekit.measure.phases import build_timeline, time_classes

    started = time.perf_counter()
    out = Path(task.out_dir)
    run = group[0].run if len(group) == 1 else Run(
        pa.concat_tables([p.run.events for p in group]),
        pa.concat_tables([p.run.process_groups for p in group]),
        pa.concat_tables([p.run.rank_info for p in group]))
    sizes = [p.run.events.num_rows for p in group]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    if task.attribute:
        from tracekit.rules.engine import attribute_events
        from tracekit.rules.loader import load_rules

        rules = load_rules(task.options.rules_files)
        attributed, units = attribute_events(run, rules, topo, cross_rank=False)
    else:
        attributed, units = unattributed(run.events), S.empty(S.COLLECTIVE_UNITS)
    attributed = S.conform(attributed, S.ATTRIBUTED)
    timeline = build_timeline(attributed)
    comm = comm_subset(attributed, timeline)
    classes = time_classes(timeline)
    del timeline
    if len(group) > 1:
        # logical ids and row positions count across the batch: make them the rank's own
        lid_base = _first_ids(attributed, starts, sizes)
        row_base = {p.rank: int(s) for p, s in zip(group, starts, strict=True)}
        attributed = _rank_local(attributed, S.LOGICAL_ID, lid_base)
        comm = _rank_local(_rank_local(comm, S.LOGICAL_ID, lid_base), ROW, row_base)
        units = _rank_local(units, S.LOGICAL_ID, lid_base)
    out_done: dict[str, RankDone] = {}
    per_rank = (time.perf_counter() - started) / len(group)
    for p, begin, size in zip(group, starts, sizes, strict=True):
        rank = p.rank
        mine = [_of_rank(t, rank) for t in (comm, classes, units)] if len(group) > 1 else [
            comm, classes, units]
        if task.keep_events:
            events = attributed.slice(int(begin), size)
            if len(group) > 1:
                events = _own_dictionaries(events)
            _write_parquet(events, part_path(out, "events", rank))
        for part, table in zip(("comm", "classes", "units"), mine, strict=True):
            _write_parquet(table, part_path(out, part, rank))
        _write_parquet(p.run.process_groups, part_path(out, "groups", rank))
        _write_parquet(p.run.rank_info, part_path(out, "info", rank))
        record = {"key": source_key(p.path), "forced": task.rank, "attribute": task.attribute,
                  "rank": rank, "events": size, "comm_rows": mine[0].num_rows}
        with _atomic(_source_record(out, p.path)) as tmp:
            tmp.write_text(json.dumps(record))
        out_done[str(p.path)] = RankDone(str(p.path), rank, size, mine[0].num_rows,
                                         p.seconds + per_rank)
    return out_done


def _first_ids(attributed: pa.Table, starts: Any, sizes: list[int]) -> dict[int, int]:
    """Each rank's smallest logical id in the batch's numbering."""
    import pyarrow.compute as pc

    out: dict[int, int] = {}
    for begin, size in zip(starts, sizes, strict=True):
        part = attributed.slice(int(begin), size)
        lo = pc.min(part.column(S.LOGICAL_ID))
        if lo.is_valid and size:
            out[int(part.column(S.RANK)[0].as_py())] = int(lo.as_py())
    return out


# columns the rules build over the whole batch (the parser's come per file already)
_BATCH_BUILT = frozenset({S.OP, *(f.name for f in S.ATTRIBUTION_FIELDS)})


def _own_dictionaries(events: pa.Table) -> pa.Table:
    """One rank's slice of the batch with the dictionaries of the batch-built columns
    re-encoded from its own values (in order of appearance, as when the rank is alone)."""
    for i, f in enumerate(events.schema):
        if f.name in _BATCH_BUILT and pa.types.is_dictionary(f.type):
            column = events.column(i).cast(f.type.value_type).cast(f.type)
            events = events.set_column(i, f, column)
    return events


def _of_rank(table: pa.Table, rank: int) -> pa.Table:
    import pyarrow.compute as pc

    return table.filter(pc.equal(table.column(S.RANK), rank))


# ---------------------------------------------------------------------------------------------
# Cross-rank
# ---------------------------------------------------------------------------------------------


def read_part(out: Path, part: str, ranks: list[int]) -> pa.Table:
    """The ``part`` tables of ``ranks``, concatenated in rank order."""
    import pyarrow.parquet as pq

    # ParquetFile.read: a plain file read, without read_table's dataset discovery (5x less
    # time a file, which counts when thousands of ranks each have a small file)
    tables = [pq.ParquetFile(part_path(out, part, r)).read() for r in ranks]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def cross_rank(out: Path, ranks: list[int], options: AnalyzeOptions) -> dict[str, pa.Table]:
    """Match collective instances across ranks from the ``comm`` subset only, then size and
    bound them exactly as the whole-run measure stage does (``options.hardware``)."""
    import numpy as np
    import pandas as pd

    from tracekit.measure import coverage, crossrank
    from tracekit.measure.hardware import load_profile
    from tracekit.measure.run import bound_findings, measured_frame, size_and_bound
    from tracekit.model import Run
    from tracekit.rules.engine import resolve_topology
    from tracekit.rules.lints import run_lints
    from tracekit.rules.loader import load_rules

    info = Run(events=S.empty(S.EVENTS),
               process_groups=S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               rank_info=S.conform(read_part(out, "info", ranks), S.RANK_INFO))
    # one topology for the whole run, from every rank's process groups (as analyze_run does)
    rules = load_rules(options.rules_files)
    topo = resolve_topology(info, options, rules)
    df = read_part(out, "comm", ranks).to_pandas()
    if not len(df):
        df = crossrank.instance_rows(S.empty(S.ATTRIBUTED))
        df[S.EXPOSED_NS] = pd.Series(dtype="int64")
    df = crossrank.fill_members(df, topo)
    matched = crossrank.match(df)
    del df
    profile = load_profile(options.hardware) if options.hardware is not None else None
    sized = size_and_bound(matched, info, profile)
    exposed = matched[S.EXPOSED_NS].to_numpy(dtype=np.float64)
    frame = measured_frame(matched, sized, exposed)
    # the evidence findings: impossible efficiencies, communicators with members absent
    evidence_findings = [bound_findings(frame, sized),
                         coverage.findings(coverage.coverage_table(info, matched, frame))]
    measured = crossrank.table_of(
        frame.sort_values([S.RANK, S.TS_NS, S.EVENT_ID], kind="stable"), S.MEASURED)
    del sized, exposed, frame
    strag = crossrank.stragglers(matched)
    strag_findings = S.conform(crossrank.straggler_findings(strag, matched), S.FINDINGS)
    del matched
    # the lints last, once the frames above are freed: the peak is one of the two, not both
    units = S.conform(read_part(out, "units", ranks), S.COLLECTIVE_UNITS)
    lint_findings = S.conform(run_lints(units, rules, topo, info), S.FINDINGS)
    return {"measured": measured, "stragglers": strag,
            "findings": pa.concat_tables([lint_findings, strag_findings,
                                          *(S.conform(f, S.FINDINGS) for f in evidence_findings)])}


def analyze_partitioned(
    path: str | Path,
    out_dir: str | Path,
    *,
    load: LoadOptions | None = None,
    options: AnalyzeOptions | None = None,
    keep_events: bool = True,
    attribute: bool = True,
    batch_files: int = BATCH_FILES,
) -> ScaleResult:
    """Run the per-rank pipeline over every rank file of ``path`` into ``out_dir``, then the
    cross-rank steps; ``load.engine`` / ``load.jobs`` / ``load.scheduler`` choose where, and
    ``batch_files`` caps the files of one task (1: a task per file)."""
    from tracekit.parsers import trace_files

    load = load or LoadOptions()
    options = options or AnalyzeOptions()
    src, out = Path(path), Path(out_dir)
    if not src.exists():
        raise BadInputError("no such file or directory", src)
    files = trace_files(src) if src.is_dir() else [src]
    if not files:
        raise BadInputError("no trace files in this directory", src)
    if out.is_dir():
        remove_stale_temporaries(out)
    forced = load.rank if not src.is_dir() else None
    tasks = [BatchTask(tuple(str(f) for f in batch), str(out), forced, options, load.on_error,
                       keep_events, attribute)
             for batch in plan_batches(files, load.jobs or default_jobs(),
                                       max_files=batch_files)]
    done = [d for batch in map_per_rank(process_batch, tasks, engine=load.engine, jobs=load.jobs,
                                        scheduler=load.scheduler, progress=load.progress,
                                        label="ranks", weights=[len(t.paths) for t in tasks])
            for d in batch]
    skipped = [(d.source, d.error) for d in done if d.error is not None]
    good = [d for d in done if d.error is None and d.rank is not None]
    if not good:
        raise BadInputError("no readable trace file", src)
    seen: dict[int, str] = {}
    for d in good:
        rank = int(d.rank)  # type: ignore[arg-type]  # not None in ``good``
        if rank in seen:
            raise BadInputError(f"rank {rank} appears twice ({Path(seen[rank]).name} and "
                                f"{Path(d.source).name})", src)
        seen[rank] = d.source
    ranks = sorted(seen)
    cross = cross_rank(out, ranks, options)
    return ScaleResult(out, ranks, cross["measured"], cross["stragglers"], cross["findings"],
                       read_part(out, "classes", ranks), list(done), skipped)


def load_partitioned(out_dir: str | Path, ranks: list[int] | None = None) -> Run:
    """Read a partitioned dataset back as a Run (EVENTS only: attribution columns dropped)."""
    out = Path(out_dir)
    if ranks is None:
        ranks = sorted(int(p.name.split("=", 1)[1]) for p in (out / "info").glob("rank=*"))
    events = S.conform(read_part(out, "events", ranks), S.EVENTS)
    return Run(events, S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               S.conform(read_part(out, "info", ranks), S.RANK_INFO))
