"""Analysis-level facts on the real Kineto reference traces (HTA's test data), each derived
from the raw JSON (``distributedInfo``, the NCCL kernels it holds), never from tracekit's output.

GIVEN a real third-party trace WHEN it is analysed with a hardware profile THEN
- every collective kernel of the file is one MEASURED row, with its exact integer times;
- ranks absent from the run are named by a ``coverage.ranks-missing`` finding and the coverage
  block counts them against the world size the trace declares;
- no efficiency exceeds the bound, and a rank seen alone claims no wait for peers.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import api, schema
from tracekit.measure.coverage import RANKS_MISSING_RULE

# (file under kineto/hta, hardware profile of the machine it was recorded on per the README)
TRACES = {
    "nccl_parser_config": ("nccl_parser_config/nccl_data.json.gz", "a100"),
    "trace_filter": ("trace_filter", "a100"),
    "negative_queue": ("negative_queue_length_values_check/rank0.json.gz", "a100"),
    "df_index_resolver": ("df_index_resolver/df_index_resolver.json.gz", "a100"),
}
NCCL_KERNEL = re.compile(r"^(?:void )?nccl(?:Dev)?Kernel_([A-Za-z]+)")
NCCL_OP = {"AllReduce": schema.Op.ALL_REDUCE, "Broadcast": schema.Op.BROADCAST}
TOLERANCE = 0.10  # the profiles' default tolerance (docs/coverage.md)


def _raw(path: Path) -> list[dict]:
    files = sorted(path.glob("*.json.gz")) if path.is_dir() else [path]
    return [json.loads(gzip.open(f).read()) for f in files]


def _kernels(doc: dict) -> list[str]:
    return [NCCL_KERNEL.match(e["name"]).group(1) for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and NCCL_KERNEL.match(e.get("name", ""))]


@pytest.fixture(scope="module", params=sorted(TRACES))
def case(request, kineto_hta: Path) -> tuple[str, list[dict], api.Analysis]:
    rel, hardware = TRACES[request.param]
    path = kineto_hta / rel
    analysis = api.analyze(path, api.LoadOptions(jobs=1), api.AnalyzeOptions(hardware=hardware))
    return request.param, _raw(path), analysis


def test_every_nccl_kernel_is_one_measured_row_with_exact_times(case):
    name, docs, analysis = case
    measured = analysis.measured
    kernels = [k for doc in docs for k in _kernels(doc)]
    assert measured is not None and measured.num_rows == len(kernels), name
    events = analysis.run.events
    keys = ["rank", "event_id"]
    joined = measured.select([schema.RANK, schema.EVENT_ID, schema.TS_NS, schema.DUR_NS]) \
        .rename_columns([*keys, "m_ts", "m_dur"]) \
        .join(events.select([schema.RANK, schema.EVENT_ID, schema.TS_NS, schema.DUR_NS])
              .rename_columns([*keys, "e_ts", "e_dur"]), keys)
    assert joined.num_rows == measured.num_rows
    assert pc.all(pc.equal(joined["m_ts"], joined["e_ts"])).as_py(), name
    assert pc.all(pc.equal(joined["m_dur"], joined["e_dur"])).as_py(), name
    # the raw literal, not a float round trip: every start is a whole number of ns in int64
    assert joined["m_ts"].type == pa.int64()


def test_op_counts_follow_the_kernels_the_file_holds(case):
    name, docs, analysis = case
    want = Counter(NCCL_OP[k] for doc in docs for k in _kernels(doc) if k in NCCL_OP)
    ops = Counter(analysis.measured.column(schema.OP).to_pylist())
    for op, n in want.items():
        assert ops[op] == n, (name, op)


def test_absent_ranks_are_a_finding_and_counted_against_the_declared_world(case):
    name, docs, analysis = case
    world = docs[0]["distributedInfo"]["world_size"]
    present = sorted({doc["distributedInfo"]["rank"] for doc in docs})
    rules = analysis.findings_table.column(schema.RULE_ID).to_pylist()
    run_row = next(r for r in analysis.tables["coverage"].to_pylist()
               if r[schema.SCOPE] == schema.Scope.RUN)
    assert run_row[schema.RANKS_PRESENT] == len(present)
    assert run_row[schema.GROUP_SIZE] == world
    assert run_row[schema.RANKS_ABSENT] == world - len(present)
    assert (RANKS_MISSING_RULE in rules) == (world > len(present)), name


def test_no_efficiency_above_the_bound(case):
    name, _docs, analysis = case
    eff = [e for e in analysis.measured.column(schema.EFFICIENCY).to_pylist() if e is not None]
    assert all(e <= 1 + TOLERANCE for e in eff), (name, max(eff, default=None))


def test_a_rank_seen_alone_claims_no_wait(case):
    name, docs, analysis = case
    if len(docs) > 1:
        pytest.skip("two ranks of the run are present")
    waits = analysis.measured.column(schema.WAIT_NS)
    assert waits.null_count == len(waits), name
