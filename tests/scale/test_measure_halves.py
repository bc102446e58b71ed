"""The measure in two halves (tracekit.measure.run): both executions run the same halves.

GIVEN a small synth run WHEN the per-rank half runs on each rank alone (the partitioned
workers) and the cross-rank half over the comm parts THEN the tables equal those of both
halves over the whole run in memory; the comm rows hold a call-site flag, not the strings.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracekit import schema as S
from tracekit.api import AnalyzeOptions, LoadOptions
from tracekit.measure import crossrank
from tracekit.measure.run import comm_frame, cross_rank, measure_ranks, measure_run, member_lists
from tracekit.parsers import load_run
from tracekit.pipeline.partitioned import analyze_partitioned
from tracekit.pipeline.parts import part_path
from tracekit.pipeline.rank_measures import unattributed
from tracekit.synth import ModelShape, SynthConfig, synth_run

CFG = SynthConfig(tp=4, dp=2, enable_dp_attention=True, ep=4, steps=2, stragglers=(1,),
                  straggle_factor=2.0, shape=ModelShape(hidden=256, tokens=8,
                                                        extend_tokens=32, layers=2))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("halves")
    synth_run(CFG, d, jobs=1)
    return d


def _value(v: object) -> object:
    """A cell as a comparable value: None for a null (None or NaN), a list for an array."""
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    return [int(x) for x in v] if not isinstance(v, str) else v


def test_partitioned_halves_equal_the_whole_run_halves(run_dir: Path, tmp_path: Path) -> None:
    # GIVEN the whole run in memory, both halves over every rank at once
    run = load_run(run_dir, LoadOptions(jobs=1))
    attributed = S.conform(unattributed(run.events), S.ATTRIBUTED)
    whole = cross_rank(measure_ranks(attributed).comm, run, AnalyzeOptions(hardware="h200"),
                       rank_order=True)
    # WHEN the partitioned run measures each rank in a worker and cross-ranks the parts
    res = analyze_partitioned(run_dir, tmp_path / "out", attribute=False,
                              load=LoadOptions(jobs=2), options=AnalyzeOptions(hardware="h200"))
    # THEN MEASURED and STRAGGLERS are the same tables
    assert whole.measured.num_rows == res.measured.num_rows > 0
    assert whole.measured.equals(res.measured)
    assert whole.stragglers.equals(res.stragglers)
    # and the comm parts carry the call-site flag, never the strings
    names = pq.read_schema(part_path(tmp_path / "out", "comm", 0)).names
    assert crossrank.HAS_CALL_SITE in names and S.CALL_SITE not in names


def test_measure_run_is_the_two_halves(run_dir: Path) -> None:
    run = load_run(run_dir, LoadOptions(jobs=1))
    attributed = S.conform(unattributed(run.events), S.ATTRIBUTED)
    options = AnalyzeOptions(hardware="h200")
    analysis = measure_run(run, attributed, options)
    halves = cross_rank(measure_ranks(attributed).comm, run, options)
    assert analysis.measured is not None and analysis.measured.equals(halves.measured)
    assert analysis.extra_tables["coverage"].equals(halves.coverage)
    assert analysis.extra_tables["fits"].equals(halves.fits)


def test_comm_frame_shares_member_lists_and_keeps_the_values(run_dir: Path) -> None:
    # GIVEN the comm rows of the whole run
    run = load_run(run_dir, LoadOptions(jobs=1))
    comm = measure_ranks(S.conform(unattributed(run.events), S.ATTRIBUTED)).comm
    # WHEN they become the cross-rank frame
    df = comm_frame(comm)
    plain = crossrank.frame(comm)
    # THEN every value is the plain conversion's (member lists and text too)
    assert len(df) == len(plain) > 0
    for col in (S.PG_RANKS, S.NAME, crossrank.MEMBERS, S.OP):
        assert [_value(v) for v in df[col]] == [_value(v) for v in plain[col]], col
    # but the rows of one communicator share one member list, one string per distinct name
    keyed = df[df[crossrank.MEMBERS].notna()]
    assert keyed[crossrank.MEMBERS].nunique() == len({id(v) for v in keyed[S.PG_RANKS]})
    assert df[S.NAME].nunique() == len({id(v) for v in df[S.NAME]})


def test_old_comm_rows_with_call_site_strings_give_the_flag() -> None:
    rows = pa.table({S.RANK: [0, 0, 1], S.CALL_SITE: ["a.py:1", "", None]})
    flagged = crossrank.with_call_site_flag(rows)
    assert S.CALL_SITE not in flagged.column_names
    assert flagged.column(crossrank.HAS_CALL_SITE).to_pylist() == [True, False, False]
    assert crossrank.with_call_site_flag(flagged).equals(flagged)


def test_member_lists_split_the_members_text_back() -> None:
    texts = pa.array(["0,1,2", "", None, "7"])
    lists = member_lists(texts)
    assert lists.type == pa.list_(pa.int32())
    assert lists.to_pylist() == [[0, 1, 2], [], [], [7]]


def test_comm_frame_without_pg_ranks_rebuilds_them_from_members(run_dir: Path) -> None:
    # GIVEN comm rows read without their member lists (as a partitioned run reads them)
    run = load_run(run_dir, LoadOptions(jobs=1))
    comm = measure_ranks(S.conform(unattributed(run.events), S.ATTRIBUTED)).comm
    # WHEN they become the cross-rank frame
    full, bare = comm_frame(comm), comm_frame(comm.drop_columns([S.PG_RANKS]))
    # THEN the frame is the same, columns in the same order
    assert list(full.columns) == list(bare.columns)
    keyed = full[crossrank.MEMBERS].notna()
    assert [_value(v) for v in full.loc[keyed, S.PG_RANKS]] == \
        [_value(v) for v in bare.loc[keyed, S.PG_RANKS]]
