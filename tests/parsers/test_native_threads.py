"""Files read by the native reader in several threads at once give the tables they give one
after another: the C accumulator shares no written state between files, and the per-rank
driver's inline threads (tracekit.engine.map_threads) keep the ranks in order."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.model import LoadOptions
from tracekit.parsers import kineto, load_run
from tracekit.parsers.kineto import load_kineto_file
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto import read as kineto_read
from tracekit.parsers.kineto.raw_trace import NATIVE

pytestmark = pytest.mark.skipif(
    kineto_native.accumulator() is None,
    reason="native accumulator unavailable (no C compiler, or TRACEKIT_NATIVE=0)")


def _events(rank: int, n: int) -> list[dict[str, Any]]:
    """Timed events whose names, times and comm args differ by rank (so that a table read
    with another file's state mixed in could not pass), thread names, flows."""
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": f"t{rank}"}}]
    for i in range(n):
        t = 1000.0 * i + rank
        out += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op_{rank}_{i % 11}", "pid": 1,
             "tid": 1, "ts": t, "dur": 20.5, "args": {"External id": i}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
             "ts": t + 1.25, "dur": 5.0, "args": {
                 "External id": i, "Collective name": "allreduce", "dtype": "Float",
                 "In msg nelems": 64 * (rank + 1), "Out msg nelems": 64 * (rank + 1),
                 "Group size": 2, "Process Group Name": "0", "Seq": i}},
            {"ph": "X", "cat": "kernel", "name": f"kernel_{rank}_{i % 5}", "pid": 0,
             "tid": 7, "ts": t + 3.125, "dur": 2.0, "args": {"correlation": i}},
            {"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": t + 2.0, "cat": "ac2g",
             "name": "ac2g"},
        ]
    return out


def _write(path: Path, rank: int, n: int) -> Path:
    doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 4},
           "traceEvents": _events(rank, n)}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _ranks(tmp_path: Path, n: int = 300) -> list[Path]:
    return [_write(tmp_path / f"rank{r}.trace.json{'.gz' if r % 2 else ''}", r, n)
            for r in range(4)]


def _same(a: kineto.RankTables, b: kineto.RankTables) -> None:
    assert a.rank == b.rank
    assert a.events.schema.equals(b.events.schema, check_metadata=True)
    assert a.events.equals(b.events)  # same values, same dictionaries
    assert a.process_groups.equals(b.process_groups)
    assert a.rank_info.equals(b.rank_info)


def test_files_parsed_in_threads_at_once_equal_those_parsed_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN four ranks (plain and gzip) read in many small blocks, so that the scans of
    # several files interleave block by block
    monkeypatch.setattr(kineto_read, "CHUNK_BYTES", 4096)
    files = _ranks(tmp_path)
    alone = [load_kineto_file(f) for f in files]
    assert all(t.events.schema.metadata[S.READER_KEY.encode()] == NATIVE.encode()
               for t in alone)
    # WHEN each is parsed in a thread of its own, all started together, twice over
    start = threading.Barrier(len(files) * 2)
    out: dict[int, kineto.RankTables] = {}

    def parse(i: int) -> None:
        start.wait()
        out[i] = load_kineto_file(files[i % len(files)])

    threads = [threading.Thread(target=parse, args=(i,)) for i in range(2 * len(files))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN every table equals the one read alone
    for i, tables in sorted(out.items()):
        _same(tables, alone[i % len(files)])


def test_an_inline_run_parsed_in_threads_keeps_rank_order_and_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a small run (inline: below INLINE_MAX_BYTES) whose files sort in another order
    # than their ranks, on a machine of 2 cores
    monkeypatch.setattr("tracekit.engine.default_jobs", lambda: 2)
    for r, name in enumerate(("d", "c", "b", "a")):
        _write(tmp_path / f"{name}.trace.json", r, 50)
    names: list[str] = []
    real = kineto.parse_rank

    def parse_rank(item: Any) -> Any:
        names.append(threading.current_thread().name)
        return real(item)

    monkeypatch.setattr(kineto, "parse_rank", parse_rank)
    # WHEN loaded with threads and with one job
    threaded = load_run(tmp_path, LoadOptions())
    sequential = load_run(tmp_path, LoadOptions(jobs=1))
    # THEN the ranks were parsed on the pool's threads, and the run equals the one-job run
    assert all(n.startswith("tracekit-map") for n in names[:4])
    assert all(not n.startswith("tracekit-map") for n in names[4:])
    assert threaded.events.equals(sequential.events)
    assert threaded.rank_info.equals(sequential.rank_info)
    assert threaded.process_groups.equals(sequential.process_groups)


def test_a_bad_rank_among_threads_gives_the_one_line_error_of_a_sequential_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a run whose second and fourth files are truncated gzip
    monkeypatch.setattr("tracekit.engine.default_jobs", lambda: 2)
    files = [_write(tmp_path / f"rank{r}.trace.json.gz", r, 50) for r in range(4)]
    for f in (files[1], files[3]):
        f.write_bytes(f.read_bytes()[:-20])
    # WHEN loaded with threads and with one job
    errors = []
    for jobs in (None, 1):
        with pytest.raises(BadInputError) as exc:
            load_run(tmp_path, LoadOptions(jobs=jobs))
        errors.append((exc.value.path, str(exc.value)))
    # THEN both stop at the first bad file, in the same words
    assert errors[0] == errors[1]
    assert errors[0][0] == str(files[1])
    # AND with on_error="skip" both list the same skipped files
    skipped = [load_run(tmp_path, LoadOptions(jobs=jobs, on_error="skip")).skipped
               for jobs in (None, 1)]
    assert skipped[0] == skipped[1] and len(skipped[0]) == 2
