"""The first summary of `tracekit analyze` on a small two-rank run written by the test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.api import LoadOptions
from tracekit.cli import main
from tracekit.cli.analyze import render_rich, render_text
from tracekit.parsers import load_run
from tracekit.summary import summarize


def x(name: str, cat: str, ts: float, dur: float, pid: int = 0, tid: int = 7,
      **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


AR = {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 100,
      "Out msg nelems": 100, "Group size": 2, "Process Group Ranks": "[0, 1]"}


def make_run(directory: Path) -> Path:
    """Two ranks: each 2 AllReduce kernels (400 B each), 1 custom all-reduce kernel (no
    args), 1 GEMM, 1 memcpy, 1 memset."""
    for rank in (0, 1):
        events = [
            x("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "kernel", 10.0, 5.0, **AR),
            x("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "kernel", 20.0, 7.0, **AR),
            x("[bold]sm90_gemm[/bold]", "kernel", 30.0, 100.0),
            x("void sglang::cross_device_reduce_1stage<float, 2>(x)", "kernel", 50.0, 4.0),
            x("Memcpy HtoD", "gpu_memcpy", 140.0, 2.0),
            x("Memset", "gpu_memset", 150.0, 1.0),
            x("aten::mm", "cpu_op", 1.0 + rank, 3.0, pid=5, tid=5),
        ]
        doc = {"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}
        (directory / f"rank{rank}.json").write_text(json.dumps(doc))
    return directory


def test_summary_tables(tmp_path: Path) -> None:
    # GIVEN the run WHEN loaded and summarised
    summary = summarize(load_run(make_run(tmp_path), LoadOptions(jobs=1)))
    # THEN the spans run from the first start to the last end of each rank
    assert [(r[S.RANK], r[S.TS_NS], r[S.DUR_NS], r[S.COUNT])
            for r in summary.ranks.to_pylist()] == [(0, 1000, 150000, 7), (1, 2000, 149000, 7)]
    # AND kernel time is split into communication (the custom all-reduce too), compute and
    # memcpy (memset counts there)
    kt = {(r[S.RANK], r[S.KERNEL_CLASS]): (r[S.COUNT], r[S.DUR_NS])
          for r in summary.kernel_time.to_pylist()}
    assert kt[(0, "communication")] == (3, 16000)
    assert kt[(0, "compute")] == (1, 100000)
    assert kt[(1, "memcpy")] == (2, 3000)
    # AND communication by op counts the kernels of both ranks with their bytes and time
    assert summary.comm.to_pylist() == [
        {S.OP: "all_reduce", S.COUNT: 4, S.MSG_BYTES: 1600, S.DUR_NS: 24000}]


def test_text_and_terminal_renderings_keep_trace_strings_literal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = summarize(load_run(make_run(tmp_path), LoadOptions(jobs=1)))
    text = render_text(summary, tmp_path)
    assert "2 ranks" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("all_reduce"))
    # decimal byte units (kB = 1000 B), the one convention of every report
    assert row.split() == ["all_reduce", "4", "1.60", "kB", "24.00", "µs"]
    # a rich rendering must not interpret markup-like text coming from the trace or a path
    odd = tmp_path / "[red]odd[/red]"
    render_rich(summary, odd)
    # (the path line wraps at the console's width wherever the tmp path's length puts it:
    # under pytest-xdist the path is longer, so the check joins the lines)
    assert "[red]odd[/red]" in capsys.readouterr().out.replace("\n", "")


def test_cli_writes_json_for_a_directory(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run").mkdir()
    run_dir = make_run(tmp_path / "run")
    out = tmp_path / "out" / "summary.json"
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(run_dir), "--json", str(out), "--jobs", "1"])
    assert exc.value.code == 0
    doc = json.loads(out.read_text())
    tables = {name: [dict(zip(t["columns"], row, strict=True)) for row in t["rows"]]
              for name, t in doc["tables"].items()}
    assert [r[S.RANK] for r in tables["ranks"]] == [0, 1]
    assert tables["communication"][0][S.COUNT] == 4
    assert doc["run"]["skipped"] == []
    out = capsys.readouterr().out
    # one report: the first summary's kernel-level tables stay in the JSON only
    assert out.startswith("tracekit report") and "communication kernels by op" not in out


def _spans_by_hand(rows: list[tuple[int | None, int, int | None]]) -> list[tuple[Any, ...]]:
    """(rank, first start, last end - first start, rows with a start) per rank, in Python."""
    out = []
    for rank in sorted({r for r, _, _ in rows if r is not None}):
        mine = [(ts, ts + dur if dur is not None else None) for r, ts, dur in rows if r == rank]
        start = min(ts for ts, _ in mine)
        out.append((rank, start, max(e for _, e in mine if e is not None) - start, len(mine)))
    return out


@pytest.mark.parametrize("chunks", [
    # the parse's layout: a chunk per rank, a rank in two chunks, an empty chunk
    [[(1, 50, 5), (1, 10, 100)], [], [(0, 7, 3)], [(1, 5, 1)]],
    # ranks mixed within a chunk: rows grouped by rank
    [[(0, 7, 3), (1, 50, 5)], [(1, 10, 100), (0, 1, 1)]],
    # a duration missing: that row's end does not count, its start does
    [[(0, 7, 3), (0, 2, None)], [(1, 10, 100)]],
])
def test_rank_spans_on_any_chunk_layout(chunks: list[list[tuple[Any, ...]]]) -> None:
    from tracekit.summary import rank_spans

    schema = pa.schema([(S.RANK, pa.int32()), (S.TS_NS, pa.int64()), (S.DUR_NS, pa.int64())])
    table = pa.Table.from_batches([pa.record_batch(
        [pa.array([r[i] for r in rows], schema.field(i).type) for i in range(3)], schema=schema)
        for rows in chunks], schema=schema)
    got = rank_spans(table)
    assert got.schema.field(S.RANK).type == pa.int32()
    assert [tuple(r.values()) for r in got.to_pylist()] == \
        _spans_by_hand([row for rows in chunks for row in rows])
