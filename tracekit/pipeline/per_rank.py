"""The partitioned run's worker: the rank-local stages (parse, attribute, measure) over the
files of one task, each rank written to its Parquet parts (tracekit.pipeline.parts).

:func:`process_batch` runs in a worker of :func:`tracekit.engine.map_per_rank` (the local
process pool or Dask), so it is a top-level function of an importable module. A worker holds
one task at a time, so ``jobs`` workers need about ``jobs`` large ranks' worth of memory.
Each rank of a batch is attributed as if it were alone (its own topology, no evidence from
other ranks) and its ids are renumbered from its own start (tracekit.pipeline.batch_split).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.measure.crossrank import ROW
from tracekit.measure.run import measure_ranks
from tracekit.model import LoadOptions, Run
from tracekit.parsers import load_run
from tracekit.parsers.kineto.heap import reused_heap
from tracekit.pipeline import batch_split, parts
from tracekit.pipeline.batches import BatchTask, RankDone
from tracekit.pipeline.rank_measures import unattributed
from tracekit.rules.engine import attribute_events, resolve_topology
from tracekit.rules.loader import load_rules


@dataclass
class _Parsed:
    path: Path
    run: Run
    rank: int
    seconds: float


def process_batch(task: BatchTask) -> list[RankDone]:
    """The per-rank stages for the files of one batch (top-level: it runs in workers)."""
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


def _already_done(task: BatchTask, path: Path) -> RankDone | None:
    """The rank of ``path`` when an earlier run wrote all its parts from the same file."""
    out = Path(task.out_dir)
    saved = parts.read_record(out, path)
    if saved is None:
        return None
    rank = saved.get("rank")
    wanted = [p for p in parts.PARTS if task.keep_events or p != "events"]
    if not isinstance(rank, int) or saved.get("key") != parts.source_key(path) or \
            saved.get("forced") != task.rank or saved.get("attribute") != task.attribute or \
            not all(parts.part_path(out, p, rank).is_file() for p in wanted):
        return None
    return RankDone(str(path), rank, saved["events"], saved["comm_rows"], 0.0, reused=True)


def _parse(task: BatchTask, path: Path) -> _Parsed | RankDone:
    """Stage parse for one file of the batch: parsed, or the RankDone of a skipped bad file."""
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
    rules = load_rules(task.options.rules_files)
    groups: dict[Any, list[_Parsed]] = {}
    for p in parsed:
        groups.setdefault(resolve_topology(p.run, task.options, rules), []).append(p)
    return list(groups.items())


@dataclass
class _Measured:
    """What the rank-local stages made of a group of ranks (rows of every rank together)."""

    attributed: pa.Table  # ATTRIBUTED
    units: pa.Table  # COLLECTIVE_UNITS
    comm: pa.Table  # the communication subset
    classes: pa.Table  # TIME_CLASSES


def _attribute_and_measure(task: BatchTask, run: Run, topo: Any) -> _Measured:
    """Stages attribute (rank-local evidence only) and measure (its per-rank half)."""
    if task.attribute:
        rules = load_rules(task.options.rules_files)
        attributed, units = attribute_events(run, rules, topo, cross_rank=False)
    else:
        attributed, units = unattributed(run.events), S.empty(S.COLLECTIVE_UNITS)
    attributed = S.conform(attributed, S.ATTRIBUTED)
    measures = measure_ranks(attributed)  # the per-rank half of the measure stage
    return _Measured(attributed, units, measures.comm, measures.classes)


def _process_group(task: BatchTask, group: list[_Parsed], topo: Any) -> dict[str, RankDone]:
    """Attribute and measure the ranks of ``group`` together, then write each rank apart,
    under one allocation policy (heap.reused_heap, as the in-memory run's stages after the
    parse): its end gives the worker's heap back before the next task's parse."""
    with reused_heap():
        return _attribute_measure_write(task, group, topo)


def _attribute_measure_write(task: BatchTask, group: list[_Parsed], topo: Any
                             ) -> dict[str, RankDone]:
    started = time.perf_counter()
    run = group[0].run if len(group) == 1 else Run(
        pa.concat_tables([p.run.events for p in group]),
        pa.concat_tables([p.run.process_groups for p in group]),
        pa.concat_tables([p.run.rank_info for p in group]))
    sizes = [p.run.events.num_rows for p in group]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    m = _attribute_and_measure(task, run, topo)
    if len(group) > 1:
        # logical ids and row positions count across the batch: make them the rank's own
        lid_base = batch_split.first_ids(m.attributed, starts, sizes)
        row_base = {p.rank: int(s) for p, s in zip(group, starts, strict=True)}
        m.attributed = batch_split.rank_local(m.attributed, S.LOGICAL_ID, lid_base)
        m.comm = batch_split.rank_local(
            batch_split.rank_local(m.comm, S.LOGICAL_ID, lid_base), ROW, row_base)
        m.units = batch_split.rank_local(m.units, S.LOGICAL_ID, lid_base)
    per_rank = (time.perf_counter() - started) / len(group)
    out_done: dict[str, RankDone] = {}
    for p, begin, size in zip(group, starts, sizes, strict=True):
        comm_rows = _write_rank(task, p, m, int(begin), size, alone=len(group) == 1)
        out_done[str(p.path)] = RankDone(str(p.path), p.rank, size, comm_rows,
                                         p.seconds + per_rank)
    return out_done


def _write_rank(task: BatchTask, p: _Parsed, m: _Measured, begin: int, size: int, *,
                alone: bool) -> int:
    """Rank ``p``'s parts, then its ``sources`` record; returns its communication rows."""
    out, rank = Path(task.out_dir), p.rank
    mine = [m.comm, m.classes, m.units] if alone else [
        batch_split.of_rank(t, rank) for t in (m.comm, m.classes, m.units)]
    if task.keep_events:
        events = m.attributed.slice(begin, size)
        if not alone:
            events = batch_split.own_dictionaries(events)
        parts.write_parquet(events, parts.part_path(out, "events", rank))
    for part, table in zip(("comm", "classes", "units"), mine, strict=True):
        parts.write_parquet(table, parts.part_path(out, part, rank))
    parts.write_parquet(p.run.process_groups, parts.part_path(out, "groups", rank))
    parts.write_parquet(p.run.rank_info, parts.part_path(out, "info", rank))
    parts.write_record(out, p.path, {
        "key": parts.source_key(p.path), "forced": task.rank, "attribute": task.attribute,
        "rank": rank, "events": size, "comm_rows": mine[0].num_rows})
    return mine[0].num_rows
