"""torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``) -> EVENTS of one rank.

``load_kineto_file`` parses one file (TRACE_FORMATS.md Part A): ``kineto_parse`` streams the
event array into columns, ``kineto_events_table`` derives kinds, threads, devices and communication
columns, and this module reads ``distributedInfo`` into PROCESS_GROUPS and RANK_INFO.

As a format of the per-rank driver (tracekit.parsers) it finds the rank files of a path
(``rank_inputs``), parses one (``parse_rank``), keys, stores and restores it in the parse
cache (``cache_key``, ``to_entry``, ``from_entry``) and puts the ranks into one Run
(``assemble``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError, ConfigError
from tracekit.model import LoadOptions, Run
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.comm import kernel_rules_digest, parse_int_list
from tracekit.parsers.kineto.dict_codes import conform
from tracekit.parsers.kineto.files import trace_files
from tracekit.parsers.kineto.heap import reused_heap
from tracekit.parsers.kineto.native_reader import kept_block_buffers
from tracekit.parsers.kineto.parse import no_gc, parse_file, release_memory
from tracekit.parsers.kineto.sparse_columns import SMALL_ROWS, lean_memory
from tracekit.parsers.names import rank_from_name
from tracekit.parsers.rank_input import RankInput, entry_key, file_identity

FORMAT = "kineto"
# part of the parse-cache key: raise it when the same file parses into other tables
PARSER_VERSION = "kineto-1"
_PARTS = ("events", "process_groups", "rank_info")


@dataclass
class RankTables:
    """What one rank file yields (picklable: it crosses process boundaries)."""

    rank: int
    events: pa.Table
    process_groups: pa.Table
    rank_info: pa.Table


def _dist_info(meta: Mapping[str, Any]) -> dict[str, Any]:
    """distributedInfo, merged with a second block kineto may append at the end of the file."""
    info = meta.get("distributedInfo")
    merged: dict[str, Any] = dict(info) if isinstance(info, dict) else {}
    for more in meta.get("_distributedInfo_more", []):
        if not isinstance(more, dict):
            continue
        for k, v in more.items():
            if k == "pg_config" and isinstance(v, list):
                merged["pg_config"] = list(merged.get("pg_config") or []) + v
            else:
                merged.setdefault(k, v)
    return merged


_I32 = (1 << 31) - 1
_I64 = (1 << 63) - 1


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", float: "a float",
            bool: "a boolean"}.get(type(value), type(value).__name__)


def _bounded_int(value: Any, where: str, path: Path, low: int, high: int) -> int | None:
    """An integer field of distributedInfo / the top level: None when absent or not an
    integer (the column is nullable), an error when an integer is out of its column's range."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if not low <= value <= high:
        raise BadInputError(
            f"{where} = {str(value)[:30]} is out of range ({low} to {high})", path)
    return value


def _rank(info: Mapping[str, Any], path: Path, forced: int | None) -> int:
    if forced is not None:
        return forced
    value = info.get("rank")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise BadInputError(
            f"distributedInfo.rank is {_kind(value)} ({str(value)[:30]}), expected an integer;"
            " pass the rank with --rank N", path)
    value = _bounded_int(value, "distributedInfo.rank", path, 0, _I32)
    if value is not None:
        return value
    guess = rank_from_name(path.name)
    if guess is not None:
        return guess
    raise BadInputError(
        "no rank: the trace has no distributedInfo.rank and the file name carries none;"
        " pass it with --rank N (or name the file rank-N.json)", path)


def _groups(info: Mapping[str, Any], rank: int,
            path: Path) -> tuple[list[dict[str, Any]], dict, dict]:
    """pg_config entries (every era) -> rows, {pg_name: {desc, ranks}}, {uid: pg_name}."""
    rows: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    by_uid: dict[str, str] = {}
    seen: set[str] = set()
    for i, pg in enumerate(_pg_config(info, path)):
        if not isinstance(pg, dict):
            continue
        name = _text(pg, "pg_name", i, path)
        ranks = parse_int_list(pg.get("ranks"), bits=32)
        desc = _text(pg, "pg_desc", i, path)
        size = pg.get("pg_size")
        size = (size if isinstance(size, int) and -(1 << 31) <= size < 1 << 31
                else (len(ranks) if ranks else None))
        if name is not None:
            if name in seen:
                continue
            seen.add(name)
            by_name[name] = {"desc": desc, "ranks": ranks}
            if pg.get("uid") is not None:
                by_uid[str(pg["uid"])] = name
        rows.append({
            S.RANK: rank, S.PG_NAME: name, S.PG_DESC: desc, S.PG_RANKS: ranks,
            S.GROUP_SIZE: size,
            S.GROUP_RANK: ranks.index(rank) if ranks and rank in ranks else None,
            S.BACKEND: _text(pg, "backend_config", i, path),
        })
    return rows, by_name, by_uid


def _pg_config(info: Mapping[str, Any], path: Path) -> list[Any]:
    value = info.get("pg_config")
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInputError(
            f"distributedInfo.pg_config is {_kind(value)}, expected a list of groups", path)
    return value


def _text(pg: Mapping[str, Any], key: str, i: int, path: Path) -> str | None:
    """A string field of a pg_config entry (numbers are read as their text)."""
    value = pg.get(key)
    if value is None:
        return None
    if isinstance(value, dict | list | bool):
        raise BadInputError(
            f"distributedInfo.pg_config[{i}].{key} is {_kind(value)}, expected a string", path)
    return str(value)


# the modules that build EVENTS (not needed by the scan), in import order, each a step
_BUILD_MODULES = tuple(f"tracekit.parsers.kineto.{m}" for m in (
    "columns", "params", "shapes", "call_sites", "events_table"))


def _prepare_build() -> Iterator[None]:
    """The one-off work of building EVENTS in a fresh process, in steps of 2-40 ms that the
    native reader runs while its worker scans (about 0.1 s of a cold load of the benchmark
    rank, paid after the scan otherwise): import the modules that build it, read the
    packaged NCCL kernel rules. In a warm process every step is a dictionary lookup."""
    for name in _BUILD_MODULES:
        importlib.import_module(name)
        yield
    from tracekit.parsers.kineto import comm

    yield from comm.prepare()


def load_kineto_file(path: Path, rank: int | None = None, jobs: int = 1) -> RankTables:
    """Parse one Kineto file; ``rank`` forces the rank (else distributedInfo, else the name).
    ``jobs`` is accepted for callers that pass it and has no effect: a file is read in this
    process (the native scan runs in a thread beside the read)."""
    with lean_memory(), no_gc():  # no collection passes over the decoded args meanwhile
        trace = parse_file(path, _prepare_build())
        from tracekit.parsers.kineto.events_table import build_events_from

        info = _dist_info(trace.meta)
        r = _rank(info, path, rank)
        rows, by_name, by_uid = _groups(info, r, path)
        # its column-sized temporaries reuse heap pages (heap.reused_heap): on the 500 MB
        # benchmark rank 165k -> 92k minor faults in the load, its CPU 1.19 -> 0.99 s
        # (medians of 5), the same peak RSS; a small file's build skips the policy's trim
        with reused_heap() if trace.raw.num_rows >= SMALL_ROWS else nullcontext():
            events = build_events_from([trace.detach_raw()], trace.detach_side(),
                                       trace.threads, rank=r, source=str(path),
                                       pg_by_name=by_name, pg_by_uid=by_uid)
        release_memory(events.num_rows)
    events = events.replace_schema_metadata(
        {**(events.schema.metadata or {}), S.READER_KEY.encode(): trace.reader.encode()})
    groups = V.from_rows(rows, _plain(S.PROCESS_GROUPS))
    base = _bounded_int(trace.meta.get("baseTimeNanoseconds"), "baseTimeNanoseconds", path,
                        -_I64 - 1, _I64)
    world = _bounded_int(info.get("world_size"), "distributedInfo.world_size", path, 0, _I32)
    rank_info = V.from_rows([{
        S.RANK: r, S.SOURCE: str(path), S.FORMAT: FORMAT,
        S.BACKEND: info.get("backend") if isinstance(info.get("backend"), str) else None,
        S.WORLD_SIZE: world,
        S.HOST: trace.meta.get("host_name") if isinstance(trace.meta.get("host_name"), str)
        else None,
        S.BASE_TIME_NS: base, S.COUNT: events.num_rows,
    }], _plain(S.RANK_INFO))
    return RankTables(
        r, events, conform(groups, S.PROCESS_GROUPS), conform(rank_info, S.RANK_INFO))


def _plain(schema: pa.Schema) -> pa.Schema:
    """The schema with dictionary columns as plain strings (for from_pylist)."""
    return pa.schema([
        pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
        for f in schema
    ])


# ------------------------------------------------------------------ per-rank driver


def run_scope() -> AbstractContextManager[None]:
    """What the driver enters while it parses a run's ranks in this process: each file's
    block buffers go on to the next file (``native_reader.kept_block_buffers``)."""
    return kept_block_buffers()


def rank_inputs(path: Path, options: LoadOptions) -> list[RankInput]:
    """The rank files of a trace file or run directory."""
    if not path.is_dir():
        return [RankInput(str(path), options.rank, _size(path))]
    if options.rank is not None:
        raise ConfigError("--rank applies to a single trace file, not to a run directory")
    files = trace_files(path)
    if not files:
        raise BadInputError(
            "no trace files in this directory (expected *.json or *.json.gz Kineto traces,"
            " or an Ascend *_ascend_pt export)", path)
    return [RankInput(str(f), None, _size(f)) for f in files]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # reported as bad input by the reader
        return 0


def parse_rank(item: RankInput) -> RankTables:
    return load_kineto_file(Path(item.path), item.rank)


def cache_key(item: RankInput) -> str:
    """The file, the EVENTS schema and parser versions, the kernel rules (an NCCL kernel's
    op comes from them) and the forced rank (OSError when the file cannot be read)."""
    return entry_key([
        *file_identity([Path(item.path)]), S.SCHEMA_VERSION, PARSER_VERSION,
        kernel_rules_digest(), "" if item.rank is None else str(item.rank)])


def to_entry(tables: RankTables) -> dict[str, pa.Table]:
    return dict(zip(_PARTS, (tables.events, tables.process_groups, tables.rank_info),
                    strict=True))


def from_entry(entry: Mapping[str, pa.Table]) -> RankTables:
    events, groups, info = (entry[p] for p in _PARTS)
    S.validate(events, S.EVENTS)
    return RankTables(int(info.column(S.RANK)[0].as_py()), events, groups, info)


def rank_of(tables: RankTables) -> int:
    return tables.rank


def source_of(tables: RankTables) -> str:
    return str(tables.rank_info.column(S.SOURCE)[0].as_py())


def assemble(path: Path, ranks: Sequence[RankTables], skipped: list[tuple[str, str]]) -> Run:
    """The ranks' tables, concatenated in rank order."""
    ordered = sorted(ranks, key=lambda r: r.rank)
    return Run(
        events=pa.concat_tables([r.events for r in ordered]),
        process_groups=pa.concat_tables([r.process_groups for r in ordered]),
        rank_info=pa.concat_tables([r.rank_info for r in ordered]),
        skipped=skipped,
    )
