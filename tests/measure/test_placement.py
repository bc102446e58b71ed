"""tracekit.measure.placement.group_layout and the per-distinct-value conversions of the
cross-rank frame (crossrank.table_of's text columns, evidence's member counts)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.measure import crossrank, evidence
from tracekit.measure.placement import group_layout


def test_group_layout_per_row_from_each_distinct_member_list() -> None:
    # GIVEN ranks 0-3 on node 0 and 4-7 on node 1, and rows with a list spanning both
    # nodes, one within node 1, one naming an unknown rank, an empty list and no list
    nodes = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=np.int64)
    members = pd.Series(["0,1,4", "4,5", "0,1,4", "6,99", "", None, "4,5"], index=range(10, 17))
    fallback = pd.Series([3, 2, 3, 2, 5, np.nan, 2], index=members.index)
    # WHEN laid out
    out = group_layout(members, fallback, nodes)
    # THEN each row has its list's node count and most members on one node; rows without
    # members (empty or missing) are their fallback size on one node (1 when unknown)
    assert list(out.index) == list(members.index)
    assert out["nodes"].tolist() == [2, 1, 2, 2, 1, 1, 1]
    assert out["per_node"].tolist() == [2, 2, 2, 1, 5, 1, 2]
    assert out.dtypes.tolist() == [np.dtype("int64")] * 2


def test_group_layout_without_any_members_keeps_the_fallback() -> None:
    members = pd.Series([None, ""], dtype=object)
    out = group_layout(members, pd.Series([4.0, np.nan]), np.zeros(1, dtype=np.int64))
    assert out["nodes"].tolist() == [1, 1] and out["per_node"].tolist() == [4, 1]


def test_member_counts_and_text_columns_match_their_per_row_forms() -> None:
    # GIVEN a frame whose member lists and names repeat, with gaps
    df = pd.DataFrame({crossrank.MEMBERS: ["0,1", None, "0,1", "2", np.nan],
                       schema.GROUP_SIZE: [None] * 5})
    # THEN the member counts are the per-row str.count ones, NA where there is no list
    counts = evidence._member_counts(df[crossrank.MEMBERS])
    assert counts.dtype == "Float64"
    assert counts.tolist() == [2.0, pd.NA, 2.0, 1.0, pd.NA]
    # AND a text column converts to the same array as a per-row conversion and cast would
    # give, nulls included (values, dictionary and what lies under a null)
    names = pd.Series(["ar", None, "ag", "ar", np.nan], dtype=object)
    per_row = pa.array(["ar", None, "ag", "ar", None], type=pa.string())
    dict_type = pa.dictionary(pa.int32(), pa.string())
    assert crossrank._text_array(names, pa.string()).equals(per_row)
    got = crossrank._text_array(names, dict_type)
    want = per_row.cast(dict_type)
    assert got.equals(want)
    assert got.indices.buffers()[1].to_pybytes() == want.indices.buffers()[1].to_pybytes()
