"""The group label COVERAGE gives each communicator: the one most of its rows carry."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.measure import coverage


def _by_groupby(code: np.ndarray, group: pd.Series) -> pd.Series:
    """The same choice through pandas: counts per (code, label), the largest first (stable,
    so ties keep the sorted labels' order), one per code."""
    side = pd.DataFrame({"k": code, "g": group})
    size = side.dropna(subset=["g"]).groupby(["k", "g"]).size()
    return (size.sort_values(ascending=False, kind="stable").reset_index()
            .drop_duplicates("k").set_index("k")["g"])


def test_labels_are_the_most_frequent_with_ties_to_the_first_sorted() -> None:
    """GIVEN 7 communicators whose rows carry labels among 4 (some missing, one code with
    none at all, ties) WHEN choosing each one's label
    THEN it equals the pandas count-and-sort choice, and a code without labels has none."""
    rng = np.random.default_rng(5)
    code = rng.integers(0, 7, 300).astype(np.int64)
    group = pd.Series(rng.choice(np.array(["TP", "EP", "DP", "ATTN_TP", None], dtype=object),
                                 300), dtype=object)
    group[code == 3] = None
    got = coverage._labels(code, group)
    want = _by_groupby(code, group)
    assert 3 not in got.index
    assert got.sort_index().to_dict() == want.sort_index().to_dict()
    tie = coverage._labels(np.array([0, 0, 0, 0]), pd.Series(["TP", "EP", "EP", "TP"]))
    assert tie.to_dict() == {0: "EP"}
    assert coverage._labels(np.array([0, 1]), pd.Series([None, None], dtype=object)).empty


def test_firsts_are_the_groupby_firsts() -> None:
    """GIVEN text with missing values on rows of 5 communicator codes, one code with no value
    and one with no row WHEN taking each code's first value THEN it is groupby().first() on
    every code that has one, and the others align as missing."""
    code = np.array([3, 0, 0, 1, 3, 2, 0, 1, 3])
    column = pd.Series([None, None, "b", "x", "c", None, "d", "y", "e"], dtype=object)
    got = coverage._firsts(code, column, 5)
    want = column.groupby(code).first()
    assert got.to_dict() == {0: "b", 1: "x", 3: "c"}
    frame = pd.DataFrame(index=np.arange(5))
    assert frame.assign(v=got)["v"].tolist()[:2] == want.tolist()[:2]
    assert pd.isna(frame.assign(v=got)["v"][[2, 4]]).all()


def test_in_graph_matches_rank_and_correlation_pairs() -> None:
    """GIVEN graph launches (rank, correlation), one of them without a correlation, and
    collective rows whose correlation is one of them on the same rank, on another rank, or
    missing WHEN flagging the rows run inside a graph THEN only same-rank, same-correlation
    rows are."""
    import pyarrow as pa

    from tracekit import schema

    launches = pa.table({schema.RANK: pa.array([0, 0, 1], pa.int32()),
                         schema.CORRELATION: pa.array([7, None, 9], pa.int64())})
    df = pd.DataFrame({schema.RANK: [0, 1, 1, 0, 2],
                       schema.CORRELATION: [7.0, 7.0, 9.0, np.nan, 9.0]})
    assert coverage._in_graph(df, launches).tolist() == [True, False, True, False, False]


def test_graph_launches_of_dictionary_and_plain_names() -> None:
    """GIVEN event names as a dictionary chunk (with a null row) and a plain chunk WHEN
    picking the CUDA/HIP graph launches THEN the rows whose name starts with one, of both."""
    import pyarrow as pa

    from tracekit import schema

    coded = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2], pa.int32()),
                                           pa.array(["cudaGraphLaunch", "k", "hipGraphLaunch"]))
    plain = pa.array(["x_cudaGraphLaunch", "cudaGraphLaunch_v2", None], pa.string())
    events = pa.table({
        schema.RANK: pa.array([0, 0, 0, 0, 1, 1, 1], pa.int32()),
        schema.CORRELATION: pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
        schema.NAME: pa.chunked_array([coded, plain.dictionary_encode()]),
    })
    got = coverage.graph_launches(events)
    assert got.column(schema.CORRELATION).to_pylist() == [1, 4, 6]
    events = events.set_column(2, schema.NAME, pa.chunked_array([coded.cast(pa.string()), plain]))
    assert coverage.graph_launches(events).column(schema.CORRELATION).to_pylist() == [1, 4, 6]


def test_comm_meta_flag_from_any_metadata_column() -> None:
    """GIVEN rows with exactly one kind of communicator metadata each (group size, comms id,
    pg name, pg desc, own member list, a member list from the topology) and one with none
    WHEN flagging the rows with metadata THEN all but the topology's and the bare row are."""
    from tracekit import schema
    from tracekit.measure import crossrank

    n = 7
    none = [None] * n
    df = pd.DataFrame({
        schema.GROUP_SIZE: [8.0, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        schema.COMMS_ID: [np.nan, 3.0, np.nan, np.nan, np.nan, np.nan, np.nan],
        schema.PG_NAME: np.array([None, None, "0", None, None, None, None], dtype=object),
        schema.PG_DESC: np.array([None, None, None, "tp", None, None, None], dtype=object),
        schema.PG_RANKS: np.array([None, None, None, None, np.array([0, 1]), np.array([0, 1]),
                                   None], dtype=object),
        crossrank.FROM_TOPOLOGY: [False, False, False, False, False, True, False],
        crossrank.HAS_CALL_SITE: [False] * n, schema.IN_BYTES: [np.nan] * n,
        schema.OUT_BYTES: [np.nan] * n, crossrank.N_SEEN: [1] * n, crossrank.KEY: ["k"] * n,
        schema.RANK: [0] * n, schema.CORRELATION: [np.nan] * n,
    })
    measured = pd.DataFrame({schema.EFFICIENCY: [np.nan] * n, schema.TRANSFER_NS: none,
                             schema.BOUND_NS: [np.nan] * n, schema.BOUND_STATUS: ["ok"] * n})
    flags = coverage._flags(df, measured, None)
    assert flags[schema.WITH_COMM_META].tolist() == [True, True, True, True, True, False, False]
