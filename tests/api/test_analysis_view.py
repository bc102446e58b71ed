"""Analysis in a notebook: short repr, escaped HTML, DataFrames with NA, Arrow tables."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.api import Analysis, Run


def _analysis(**kw: object) -> Analysis:
    run = Run(events=S.empty(S.EVENTS), process_groups=S.empty(S.PROCESS_GROUPS),
              rank_info=S.empty(S.RANK_INFO))
    return Analysis(run=run, **kw)  # type: ignore[arg-type]


def _measured() -> pa.Table:
    # two ranks of one all_reduce; rank 1's transfer could not be told from wait
    rows = [{S.RANK: 0, S.OP: "all_reduce", S.GROUP: "TP", S.MSG_BYTES: 1024,
             S.TRANSFER_NS: 2000, S.WAIT_NS: 0, S.BOUND_NS: 1000, S.EFFICIENCY: 0.5,
             S.TS_NS: 0, S.DUR_NS: 2000, S.INSTANCE: 7},
            {S.RANK: 1, S.OP: "all_reduce", S.GROUP: "TP", S.MSG_BYTES: None,
             S.TRANSFER_NS: None, S.WAIT_NS: None, S.BOUND_NS: None, S.EFFICIENCY: None,
             S.TS_NS: 0, S.DUR_NS: 2500, S.INSTANCE: 7}]
    return S.conform(pa.Table.from_pylist(rows), S.MEASURED)


def test_unknown_stays_na_not_zero() -> None:
    # GIVEN a collective whose size, transfer, bound and efficiency are unknown on rank 1
    c = _analysis(measured=_measured()).collectives()
    # THEN those cells are NA in nullable columns, and rank 0's figures are kept
    one = c[c[S.RANK] == 1].iloc[0]
    for col in (S.MSG_BYTES, S.TRANSFER_NS, S.WAIT_NS, S.BOUND_NS, S.EFFICIENCY, S.PATH):
        assert one[col] is pd.NA, col
    zero = c[c[S.RANK] == 0].iloc[0]
    assert (zero[S.BOUND_NS], zero[S.EFFICIENCY], zero[S.GROUP]) == (1000, 0.5, "TP")


def test_empty_analysis_gives_empty_frames_with_the_schema_columns() -> None:
    a = _analysis()
    assert list(a.collectives().columns)[:3] == [S.RANK, S.GROUP, S.PATH]
    assert list(a.phases().columns) == S.names(S.PHASES)
    assert list(a.findings().columns) == S.names(S.FINDINGS)
    assert list(a.coverage().columns) == S.names(S.COVERAGE)
    assert len(a.collectives()) == 0 and dict(a.tables) == {}


def test_repr_is_short_and_html_escapes_trace_strings() -> None:
    # GIVEN an analysis whose source name and finding come from a hostile trace
    evil = "<script>alert('x')</script>"
    findings = S.conform(pa.Table.from_pylist([{S.RULE_ID: "r", S.SEVERITY: evil}]),
                         S.FINDINGS)
    a = _analysis(measured=_measured(), findings_table=findings, source=evil)
    # THEN the repr is a few lines and the HTML carries no raw markup from the trace
    text = repr(a)
    assert len(text.splitlines()) <= 10 and len(text) < 1000
    assert "collectives: 2 rows (collective x rank), 1 instances" in text
    html = a._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_tables_names_every_result_table_read_only() -> None:
    a = _analysis(measured=_measured(), extra_tables={"coverage": S.empty(S.COVERAGE)})
    assert list(a.tables) == ["measured", "coverage"]
    with pytest.raises(TypeError):
        a.tables["x"] = S.empty(S.PHASES)  # type: ignore[index]
    with pytest.raises(ValueError, match="phases"):
        _ = _analysis(extra_tables={"phases": S.empty(S.PHASES)}).tables
