"""Every stage's output on the golden cases equals tests/golden/expected/ (docs/golden.md).

A change of output fails here with the cells that differ; when the change is intended, run
``make golden`` and review ``git diff tests/golden/expected`` like code.
"""

from __future__ import annotations

import csv
import difflib
import io

import pytest

from golden.cases import CASES, EXPECTED, Case
from golden.render import render

MAX_LINES = 40
REGEN = "intended? run `make golden` and review `git diff tests/golden/expected`"


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def csv_diff(expected: str, got: str) -> list[str]:
    """Column-wise differences: columns added or gone, row counts, then cell by cell."""
    want, have = _csv(expected), _csv(got)
    if not want or not have:
        return ["one side is empty"] if want != have else []
    out: list[str] = []
    wcols, hcols = want[0], have[0]
    gone = [c for c in wcols if c not in hcols]
    added = [c for c in hcols if c not in wcols]
    if gone:
        out.append(f"columns gone: {', '.join(gone)}")
    if added:
        out.append(f"columns added: {', '.join(added)}")
    if wcols != hcols and not gone and not added:
        out.append(f"column order: expected {wcols}, got {hcols}")
    if len(want) != len(have):
        out.append(f"rows: expected {len(want) - 1}, got {len(have) - 1}")
    common = [c for c in wcols if c in hcols]
    wi = {c: wcols.index(c) for c in common}
    hi = {c: hcols.index(c) for c in common}
    ident = [c for c in ("rank", "event_id", "instance", "name", "phase", "layer") if c in wi]
    for n, (wrow, hrow) in enumerate(zip(want[1:], have[1:], strict=False), start=1):
        label = " ".join(f"{c}={wrow[wi[c]]}" for c in ident[:3])
        for c in common:
            if wrow[wi[c]] != hrow[hi[c]]:
                out.append(f"row {n} ({label}) {c}: expected {wrow[wi[c]]!r}, got "
                           f"{hrow[hi[c]]!r}")
    extra = have[len(want):] if len(have) > len(want) else want[len(have):]
    for row in extra[:5]:
        side = "extra" if len(have) > len(want) else "missing"
        out.append(f"{side} row: {','.join(row)}")
    return out


def text_diff(expected: str, got: str, name: str) -> list[str]:
    return list(difflib.unified_diff(expected.splitlines(), got.splitlines(),
                                     f"expected/{name}", f"current/{name}", lineterm="", n=1))


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.name)
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Case, dict[str, str]]:
    case: Case = request.param
    return case, render(case, tmp_path_factory.mktemp(case.name))


def test_outputs_equal_the_golden_files(rendered: tuple[Case, dict[str, str]]) -> None:
    # GIVEN a golden case WHEN it runs through load, attribute, measure and the text report
    case, files = rendered
    folder = EXPECTED / case.name
    assert folder.is_dir(), f"no golden files for {case.name}: {REGEN}"
    on_disk = {p.name for p in folder.iterdir()}
    problems: list[str] = []
    if on_disk != set(files):
        problems.append(f"files: expected {sorted(on_disk)}, produced {sorted(files)}")
    # THEN every file equals its golden copy
    for name in sorted(set(files) & on_disk):
        expected = (folder / name).read_text()
        if expected == files[name]:
            continue
        lines = (csv_diff(expected, files[name]) if name.endswith(".csv")
                 else text_diff(expected, files[name], name))
        more = f" (+{len(lines) - MAX_LINES} more)" if len(lines) > MAX_LINES else ""
        problems.append(f"--- {case.name}/{name}{more}\n" + "\n".join(lines[:MAX_LINES]))
    assert not problems, "\n".join([*problems, REGEN])


def test_hand_written_golden_keeps_the_times_it_was_written_with() -> None:
    # GIVEN the hand-written TP=2 run: each NCCL kernel ends at the same time on both ranks,
    # rank 1's starts 40 us after rank 0's, and rank 1's lasts 120 us (inputs/kineto_tp2);
    # its golden MEASURED (which the test above holds the code to)
    rows = _csv((EXPECTED / "kineto_tp2" / "measured.csv").read_text())
    head, body = rows[0], rows[1:]
    col = {c: head.index(c) for c in ("rank", "op", "transfer_ns", "wait_ns", "msg_bytes")}
    # THEN every collective is 120 us of transfer; rank 0 waited 40 us for rank 1, rank 1 not;
    # an all-reduce of 4096 bf16 is 8192 bytes, an all-gather to 4096 bf16 is 8192 bytes
    assert len(body) == 6
    for r in body:
        assert r[col["transfer_ns"]] == "120000"
        assert r[col["wait_ns"]] == ("40000" if r[col["rank"]] == "0" else "0")
        assert r[col["msg_bytes"]] == "8192"
    assert sorted(r[col["op"]] for r in body) == ["all_gather"] * 2 + ["all_reduce"] * 4


def test_diff_names_the_cell_that_changed() -> None:
    # GIVEN two CSVs that differ in one cell and one column WHEN diffed
    lines = csv_diff("rank,event_id,wait_ns\n0,1,40\n", "rank,event_id,wait_ns,x\n0,1,41,a\n")
    # THEN the added column and the cell with both values are named
    assert lines == ["columns added: x", "row 1 (rank=0 event_id=1) wait_ns: expected '40', "
                     "got '41'"]
