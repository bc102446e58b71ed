"""Batched per-rank tasks: a rank's partition does not depend on the batch it fell in.

Small rank files are taken through the pipeline several at a time
(tracekit.pipeline.batches.plan_batches);
each rank must still be attributed as if alone (its own topology, no other rank's evidence) and
numbered from its own start.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracekit import schema as S
from tracekit.api import AnalyzeOptions, LoadOptions
from tracekit.parsers import load_run
from tracekit.pipeline.batches import json_bytes, plan_batches
from tracekit.pipeline.partitioned import analyze_partitioned
from tracekit.pipeline.parts import PARTS, part_path
from tracekit.rules.engine import attribute_run

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.mark.parametrize("scenario", ["tp8_dp4_ep2_maxlen_rs", "bug_double_reduce"])
def test_one_batch_equals_one_task_per_file(scenario: str, tmp_path: Path) -> None:
    # GIVEN a gloo sample run (8 or 4 ranks, several communicators, logical collectives)
    src = SAMPLES / scenario
    # WHEN it is analysed with a task per file, and with all its files in one batch
    alone = analyze_partitioned(src, tmp_path / "alone", load=LoadOptions(jobs=1),
                                batch_files=1)
    batched = analyze_partitioned(src, tmp_path / "batched", load=LoadOptions(jobs=1))
    # THEN every per-rank partition is identical (attribution, logical ids, row positions)
    assert alone.ranks == batched.ranks and len(alone.ranks) >= 4
    for part in PARTS:
        for r in alone.ranks:
            a = pq.read_table(part_path(tmp_path / "alone", part, r))
            b = pq.read_table(part_path(tmp_path / "batched", part, r))
            assert a.equals(b), (part, r)
    # and so is every cross-rank table
    assert alone.measured.equals(batched.measured)
    assert alone.findings.equals(batched.findings)
    assert alone.stragglers.equals(batched.stragglers)


def test_lints_run_once_over_all_ranks_like_the_whole_run(tmp_path: Path) -> None:
    # GIVEN the planted double reduction, whose finding names every rank that did it
    src = SAMPLES / "bug_double_reduce"
    _, whole = attribute_run(load_run(src, LoadOptions(jobs=1)), AnalyzeOptions())
    # WHEN the partitioned pipeline lints from the per-rank COLLECTIVE_UNITS
    res = analyze_partitioned(src, tmp_path / "out", load=LoadOptions(jobs=2))
    # THEN it reports the same lint findings as the whole-run analysis, not one per rank
    lint_ids = set(whole.column(S.RULE_ID).to_pylist())
    lints = [f for f in res.findings.to_pylist() if f[S.RULE_ID] in lint_ids]
    assert whole.num_rows > 0
    assert lints == whole.to_pylist()


def test_batches_keep_order_limits_and_give_every_worker_work(tmp_path: Path) -> None:
    # GIVEN ten small files and one large one
    files = []
    for i in range(10):
        f = tmp_path / f"rank{i:02d}.json"
        f.write_bytes(b"x" * 100)
        files.append(f)
    big = tmp_path / "rank10.json"
    big.write_bytes(b"x" * 5000)
    files.append(big)
    # WHEN planned for 2 workers, at most 4 files and 1,000 bytes per batch
    batches = plan_batches(files, 2, max_files=4, max_bytes=1000)
    # THEN the order is kept, no batch breaks a limit except a file too large alone
    assert [f for b in batches for f in b] == files
    assert all(len(b) <= 4 for b in batches)
    assert batches[-1] == [big]
    assert all(sum(f.stat().st_size for f in b) <= 1000 for b in batches[:-1])
    # and 3 files for 2 workers make 2 batches, not 1
    assert len(plan_batches(files[:3], 2)) == 2


def test_a_gzip_file_counts_its_json_size(tmp_path: Path) -> None:
    import gzip

    # GIVEN 1 MB of JSON that gzips to a few KB
    path = tmp_path / "rank0.trace.json.gz"
    path.write_bytes(gzip.compress(b"[" + b" " * 1_000_000 + b"]"))
    assert path.stat().st_size < 10_000
    # THEN the batch planner counts the megabyte, and a broken file counts 0
    assert json_bytes(path) == 1_000_002
    assert json_bytes(tmp_path / "missing.json.gz") == 0
