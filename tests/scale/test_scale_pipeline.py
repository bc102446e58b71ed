"""tracekit.pipeline.partitioned: per-rank Parquet partitions, cross-rank from the comm subset,
engines agree.

The Dask test runs a real ``distributed.LocalCluster`` of 2 worker processes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tracekit import engine
from tracekit import schema as S
from tracekit.api import LoadOptions
from tracekit.errors import BadInputError
from tracekit.measure import crossrank
from tracekit.measure.run import size_and_bound
from tracekit.parsers import load_run
from tracekit.pipeline import partitioned
from tracekit.pipeline.partitioned import analyze_partitioned, load_partitioned
from tracekit.pipeline.parts import PARTS, part_path
from tracekit.pipeline.rank_measures import unattributed
from tracekit.synth import ModelShape, SynthConfig, synth_run
from tracekit.synth.config import trace_name

SHAPE = ModelShape(hidden=256, tokens=8, extend_tokens=32, layers=2)
CFG = SynthConfig(tp=4, dp=2, enable_dp_attention=True, ep=4, steps=3, stragglers=(2,),
                  straggle_factor=2.0, shape=SHAPE)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("synth")
    synth_run(CFG, d, jobs=1)
    return d


@pytest.fixture(scope="module")
def attributed_local(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A one-step run (eager: every collective has its metadata) analysed with the rules."""
    d = tmp_path_factory.mktemp("one")
    synth_run(dataclasses.replace(CFG, steps=1, stragglers=()), d, jobs=1)
    out = tmp_path_factory.mktemp("one-local")
    analyze_partitioned(d, out, load=LoadOptions(jobs=2))
    return d, out


def test_partitions_per_rank_and_no_temporary_files(run_dir: Path, tmp_path: Path) -> None:
    # GIVEN a 4-rank run WHEN analysed partitioned on 2 local processes
    res = analyze_partitioned(run_dir, tmp_path / "out", load=LoadOptions(jobs=2),
                              attribute=False)
    # THEN every part exists for every rank, and nothing dot-named (temporary) is left
    assert res.ranks == [0, 1, 2, 3]
    for part in PARTS:
        for r in res.ranks:
            assert part_path(tmp_path / "out", part, r).is_file()
    assert not [p for p in (tmp_path / "out").rglob(".*")]
    # the comm subset is a small part of the events
    for r in res.ranks:
        n_comm = pq.read_metadata(part_path(tmp_path / "out", "comm", r)).num_rows
        n_events = pq.read_metadata(part_path(tmp_path / "out", "events", r)).num_rows
        assert 0 < n_comm < n_events / 5


def test_cross_rank_from_the_subset_equals_the_whole_run(run_dir: Path, tmp_path: Path) -> None:
    # GIVEN the whole run in memory, matched the way measure does
    run = load_run(run_dir, LoadOptions(jobs=1))
    whole = crossrank.match(crossrank.instance_rows(S.conform(unattributed(run.events),
                                                                S.ATTRIBUTED)))
    # (the measure stage then withholds transfer / wait where too few members were seen)
    size_and_bound(whole, run, None)
    # WHEN the partitioned pipeline matches from the per-rank comm subsets only
    res = analyze_partitioned(run_dir, tmp_path / "out", load=LoadOptions(jobs=2),
                              attribute=False)
    part = crossrank.int_frame(res.measured)
    # THEN every collective row has the same transfer, wait and skew
    key = [S.RANK, S.EVENT_ID]
    cols = [S.TRANSFER_NS, S.WAIT_NS, S.SKEW_NS, S.DUR_NS]
    a = whole.sort_values(key).reset_index(drop=True)[key + cols]
    b = part.sort_values(key).reset_index(drop=True)[key + cols]
    assert len(a) == len(b) > 0
    assert a.astype("Int64").equals(b.astype("Int64"))
    # and the partitioned events read back are the parsed events
    back = load_partitioned(tmp_path / "out")
    assert back.events.num_rows == run.events.num_rows
    assert back.events.column(S.TS_NS).to_pylist() == run.events.column(S.TS_NS).to_pylist()


def test_a_small_run_without_jobs_stays_in_this_process(
        run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a run far below INLINE_MAX_BYTES and no pool allowed to start
    def no_pool(*_args: object) -> None:
        raise AssertionError("a pool was started")

    monkeypatch.setattr(engine, "_map_pool", no_pool)
    # WHEN analysed partitioned without --jobs THEN the tasks run here, every rank written
    res = analyze_partitioned(run_dir, tmp_path / "out", attribute=False)
    assert res.ranks == [0, 1, 2, 3]
    # AND with --jobs 2 the pool is asked for
    with pytest.raises(AssertionError, match="a pool was started"):
        analyze_partitioned(run_dir, tmp_path / "out2", load=LoadOptions(jobs=2),
                            attribute=False)


def test_planted_straggler_is_found(run_dir: Path, tmp_path: Path) -> None:
    # GIVEN rank 2 planted as a straggler by synth WHEN the cross-rank step runs
    res = analyze_partitioned(run_dir, tmp_path / "out", load=LoadOptions(jobs=1),
                              attribute=False)
    top = res.stragglers.sort_by([(S.CAUSED_WAIT_NS, "descending")])
    # THEN it is the rank that caused the most waiting
    assert top.column(S.RANK)[0].as_py() == 2


def test_dask_local_cluster_gives_identical_tables(attributed_local: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    # GIVEN a run analysed (with the rules) on 2 local processes
    d, local_out = attributed_local
    local = analyze_partitioned(d, local_out, load=LoadOptions(jobs=2))
    assert all(x.reused for x in local.done)
    # WHEN analysed again on a 2-worker LocalCluster (worker processes)
    dask = analyze_partitioned(d, tmp_path / "dask", load=LoadOptions(jobs=2, engine="dask"))
    assert not any(x.reused for x in dask.done)
    # THEN the cross-rank tables and every per-rank partition are identical
    assert dask.ranks == local.ranks
    assert dask.measured.num_rows > 0
    assert dask.measured.equals(local.measured)
    assert dask.stragglers.equals(local.stragglers)
    assert dask.findings.equals(local.findings)
    assert dask.classes.equals(local.classes)
    for part in PARTS:
        for r in local.ranks:
            a = pq.read_table(part_path(local_out, part, r))
            b = pq.read_table(part_path(tmp_path / "dask", part, r))
            assert a.equals(b), (part, r)


def test_lints_beside_the_cross_rank_stage_give_the_same_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the planted double reduction (lint findings) analysed with its lints in this
    # process, as a run this small always is
    src = Path(__file__).resolve().parents[2] / "sample_traces" / "bug_double_reduce"
    inline = analyze_partitioned(src, tmp_path / "inline", load=LoadOptions(jobs=2))
    lint_rows = inline.findings.filter(pc.invert(pc.starts_with(
        inline.findings.column(S.RULE_ID).cast(pa.string()), "measure."))).num_rows
    assert lint_rows > 0
    # WHEN the limit is lowered so that they run in a worker beside the cross-rank stage
    asked: list[bool] = []
    real = partitioned.beside

    def spy(func, item, *, separate):  # type: ignore[no-untyped-def]
        asked.append(separate)
        return real(func, item, separate=separate)

    monkeypatch.setattr(partitioned, "LINTS_BESIDE_UNITS", 0)
    monkeypatch.setattr(partitioned, "beside", spy)
    aside = analyze_partitioned(src, tmp_path / "aside", load=LoadOptions(jobs=2))
    # THEN they did, and FINDINGS is the same table
    assert asked == [True]
    assert aside.findings.equals(inline.findings)
    assert aside.measured.equals(inline.measured)


def test_failed_rank_leaves_complete_entries_and_a_rerun_resumes(run_dir: Path,
                                                                  tmp_path: Path) -> None:
    # GIVEN a copy of the run whose rank 3 file is truncated
    src = tmp_path / "run"
    src.mkdir()
    for p in run_dir.iterdir():
        (src / p.name).write_bytes(p.read_bytes())
    bad = src / trace_name(CFG, 3)
    good_bytes = bad.read_bytes()
    bad.write_bytes(good_bytes[: len(good_bytes) // 2])
    out = tmp_path / "out"
    # WHEN the run stops at the bad rank
    with pytest.raises(BadInputError) as err:
        analyze_partitioned(src, out, load=LoadOptions(jobs=1), attribute=False)
    assert err.value.path == str(bad)
    # THEN the ranks done before it are complete, and no temporary file is left
    assert not [p for p in out.rglob(".*")]
    done = sorted(p.parent.name for p in out.glob("comm/rank=*/part-0.parquet"))
    assert done == ["rank=0", "rank=1", "rank=2"]
    # GIVEN a temporary left by a killed writer (a pid that is not running)
    stale = out / "comm" / "rank=3" / ".part-0.parquet.999999999.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half")
    # WHEN the file is repaired and the run repeated THEN finished ranks are reused
    bad.write_bytes(good_bytes)
    res = analyze_partitioned(src, out, load=LoadOptions(jobs=1), attribute=False)
    assert [d.reused for d in res.done] == [True, True, True, False]
    assert not stale.exists()
    # and with --on-error skip the bad rank is listed, not fatal
    bad.write_bytes(good_bytes[:100])
    res = analyze_partitioned(src, tmp_path / "skip", load=LoadOptions(jobs=1, on_error="skip"),
                              attribute=False)
    assert res.ranks == [0, 1, 2]
    assert [s[0] for s in res.skipped] == [str(bad)]


def test_attributed_partitions_carry_the_rules_verdict(
        attributed_local: tuple[Path, Path]) -> None:
    _, out = attributed_local
    events = pq.read_table(part_path(out, "events", 0))
    S.validate(events, S.ATTRIBUTED)
    comm = crossrank.frame(pq.read_table(part_path(out, "comm", 1)))
    # tp4 / attn_tp2: the attention reduce on ATTN_TP, the gather's all-gather on TP
    assert {S.Group.TP, S.Group.ATTN_TP} <= set(comm[S.GROUP].dropna())


def test_partitioned_bounds_equal_the_whole_run_measure(run_dir: Path, tmp_path: Path) -> None:
    # GIVEN the run measured whole, in memory, against the h200 profile
    from tracekit import api

    options = api.AnalyzeOptions(hardware="h200")
    whole = api.analyze_run(load_run(run_dir, LoadOptions(jobs=1)), options)
    # WHEN the partitioned pipeline measures it from the per-rank comm subsets
    res = analyze_partitioned(run_dir, tmp_path / "out", load=LoadOptions(jobs=2),
                              options=options)
    # THEN every collective has the same size, link class, bound and efficiency
    key = [S.RANK, S.EVENT_ID]
    cols = [S.MSG_BYTES, S.LINK_CLASS, S.BOUND_NS, S.EFFICIENCY, S.BUSBW_GBPS, S.BOUND_STATUS]
    a = crossrank.frame(whole.measured).sort_values(key).reset_index(drop=True)[key + cols]
    b = crossrank.frame(res.measured).sort_values(key).reset_index(drop=True)[key + cols]
    assert len(a) == len(b) > 0
    # (collectives replayed without metadata, e.g. in CUDA graphs, have no size: no bound)
    # (synth's 3 us NVLink alpha beats h200's NCCL latency model: those bounds are computed,
    # then withheld as physically impossible, status 'exceeded', with a finding)
    computed = b[S.BOUND_STATUS].isin([S.BoundStatus.OK, S.BoundStatus.EXCEEDED])
    assert computed.sum() >= len(b) // 4
    assert a.astype(str).equals(b.astype(str))
