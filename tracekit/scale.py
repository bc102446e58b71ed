"""Many ranks in bounded memory: a per-rank pipeline writing a Parquet dataset (issue 8).

Per rank, independently (one task per trace file, run by :func:`tracekit.engine.map_per_rank`
on the local process pool or on Dask): parse -> attribute (rules) -> per-rank measures (the
device timeline: time classes, exposed communication of every collective) -> Parquet files
partitioned by rank::

    OUT/events/rank=R/part-0.parquet     ATTRIBUTED rows of rank R
    OUT/comm/rank=R/part-0.parquet       the communication subset: one row per collective
                                         instance with its exposed time (a few % of events)
    OUT/classes/rank=R/part-0.parquet    TIME_CLASSES of rank R
    OUT/findings/rank=R/part-0.parquet   per-rank FINDINGS (lints)
    OUT/groups/rank=R/..., OUT/info/rank=R/...   PROCESS_GROUPS, RANK_INFO
    OUT/sources/<file>.json              which file made which rank, with the file's key

Cross-rank steps (instance matching, transfer / wait / skew, stragglers) then read only the
``comm`` subset. A worker holds one rank at a time, so ``jobs`` workers need about ``jobs``
ranks' worth of memory; the main process holds only the subset.

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
from tracekit.api import AnalyzeOptions, LoadOptions, Run
from tracekit.engine import map_per_rank
from tracekit.errors import BadInputError

PARTS = ("events", "comm", "classes", "findings", "groups", "info")
SOURCES = "sources"
PIPELINE_VERSION = "1"


@dataclass(frozen=True)
class RankTask:
    """One trace file to take through the per-rank pipeline (picklable)."""

    path: str
    out_dir: str
    rank: int | None = None
    options: AnalyzeOptions = field(default_factory=AnalyzeOptions)
    on_error: str = "stop"
    keep_events: bool = True
    attribute: bool = True  # False: no rules; kernel classes from the parser's op column


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    with _atomic(path) as tmp:
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


def _already_done(task: RankTask) -> RankDone | None:
    path, out = Path(task.path), Path(task.out_dir)
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


def process_rank(task: RankTask) -> RankDone:
    """The per-rank pipeline for one file (top-level: it runs in worker processes)."""
    from tracekit.measure.phases import build_timeline, time_classes
    from tracekit.parsers import load_run
    from tracekit.rules.engine import attribute_run

    reused = _already_done(task)
    if reused is not None:
        return reused
    started = time.perf_counter()
    path, out = Path(task.path), Path(task.out_dir)
    try:
        run = load_run(path, LoadOptions(rank=task.rank, jobs=1))
    except BadInputError as exc:
        if task.on_error == "skip":
            return RankDone(str(path), None, 0, 0, 0.0, error=exc.one_line())
        raise
    if len(run.ranks) != 1:
        raise BadInputError(f"expected one rank per file, found ranks {run.ranks}", path)
    rank = run.ranks[0]
    if task.attribute:
        attributed, findings = attribute_run(run, task.options)
    else:
        attributed, findings = unattributed(run.events), S.empty(S.FINDINGS)
    attributed = S.conform(attributed, S.ATTRIBUTED)
    timeline = build_timeline(attributed)
    comm = comm_subset(attributed, timeline)
    classes = time_classes(timeline)
    del timeline
    n_events = attributed.num_rows
    if task.keep_events:
        _write_parquet(attributed, part_path(out, "events", rank))
    del attributed, run.events
    _write_parquet(comm, part_path(out, "comm", rank))
    _write_parquet(classes, part_path(out, "classes", rank))
    _write_parquet(S.conform(findings, S.FINDINGS), part_path(out, "findings", rank))
    _write_parquet(run.process_groups, part_path(out, "groups", rank))
    _write_parquet(run.rank_info, part_path(out, "info", rank))
    record = {"key": source_key(path), "forced": task.rank, "attribute": task.attribute,
              "rank": rank, "events": n_events, "comm_rows": comm.num_rows}
    rec_path = _source_record(out, path)
    with _atomic(rec_path) as tmp:
        tmp.write_text(json.dumps(record))
    return RankDone(str(path), rank, n_events, comm.num_rows, time.perf_counter() - started)


# ---------------------------------------------------------------------------------------------
# Cross-rank
# ---------------------------------------------------------------------------------------------


def read_part(out: Path, part: str, ranks: list[int]) -> pa.Table:
    """The ``part`` tables of ``ranks``, concatenated in rank order."""
    import pyarrow.parquet as pq

    tables = [pq.read_table(part_path(out, part, r)) for r in ranks]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def cross_rank(out: Path, ranks: list[int], options: AnalyzeOptions) -> dict[str, pa.Table]:
    """Match collective instances across ranks from the ``comm`` subset only, then size and
    bound them exactly as the whole-run measure stage does (``options.hardware``)."""
    import numpy as np
    import pandas as pd

    from tracekit.api import Run
    from tracekit.measure import crossrank
    from tracekit.measure.hardware import load_profile
    from tracekit.measure.run import measured_frame, size_and_bound

    df = read_part(out, "comm", ranks).to_pandas()
    if not len(df):
        df = crossrank.instance_rows(S.empty(S.ATTRIBUTED))
        df[S.EXPOSED_NS] = pd.Series(dtype="int64")
    df = crossrank.fill_members(df, options.topology)
    matched = crossrank.match(df)
    profile = load_profile(options.hardware) if options.hardware is not None else None
    info = Run(events=S.empty(S.EVENTS), process_groups=S.empty(S.PROCESS_GROUPS),
               rank_info=S.conform(read_part(out, "info", ranks), S.RANK_INFO))
    sized = size_and_bound(matched, info, profile)
    exposed = matched[S.EXPOSED_NS].to_numpy(dtype=np.float64)
    measured = measured_frame(matched, sized, exposed)
    measured = measured.sort_values([S.RANK, S.TS_NS, S.EVENT_ID], kind="stable")
    strag = crossrank.stragglers(matched)
    return {
        "measured": crossrank.table_of(measured, S.MEASURED),
        "stragglers": strag,
        "straggler_findings": crossrank.straggler_findings(strag, matched),
    }


def analyze_partitioned(
    path: str | Path,
    out_dir: str | Path,
    *,
    load: LoadOptions | None = None,
    options: AnalyzeOptions | None = None,
    keep_events: bool = True,
    attribute: bool = True,
) -> ScaleResult:
    """Run the per-rank pipeline over every rank file of ``path`` into ``out_dir``, then the
    cross-rank steps; ``load.engine`` / ``load.jobs`` / ``load.scheduler`` choose where."""
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
    tasks = [RankTask(str(f), str(out), forced, options, load.on_error, keep_events, attribute)
             for f in files]
    done = map_per_rank(process_rank, tasks, engine=load.engine, jobs=load.jobs,
                        scheduler=load.scheduler, progress=load.progress, label="ranks")
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
    per_rank = read_part(out, "findings", ranks)
    findings = pa.concat_tables([S.conform(per_rank, S.FINDINGS),
                                 S.conform(cross["straggler_findings"], S.FINDINGS)])
    return ScaleResult(out, ranks, cross["measured"], cross["stragglers"], findings,
                       read_part(out, "classes", ranks), list(done), skipped)


def load_partitioned(out_dir: str | Path, ranks: list[int] | None = None) -> Run:
    """Read a partitioned dataset back as a Run (EVENTS only: attribution columns dropped)."""
    out = Path(out_dir)
    if ranks is None:
        ranks = sorted(int(p.name.split("=", 1)[1]) for p in (out / "info").glob("rank=*"))
    events = S.conform(read_part(out, "events", ranks), S.EVENTS)
    return Run(events, S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               S.conform(read_part(out, "info", ranks), S.RANK_INFO))
