"""`tracekit analyze` on the real HTA NCCL trace: the summary, --json, --parquet, the cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tracekit.parsers.kineto as kineto
from tracekit import schema as S
from tracekit.cli import main

REL = Path("nccl_parser_config") / "nccl_data.json.gz"


@pytest.fixture()
def nccl_trace(kineto_hta: Path) -> Path:
    path = kineto_hta / REL
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", *args])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return out


def test_console_script_reports_15_allreduce_and_6_broadcast_kernels(nccl_trace: Path) -> None:
    # GIVEN the installed console script WHEN it analyses the 2-rank DDP trace (rank 0)
    exe = Path(sys.executable).with_name("tracekit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tracekit"]
    res = subprocess.run([*cmd, "analyze", str(nccl_trace), "--summary-only"],
                         capture_output=True, text=True, timeout=300, check=False)
    # THEN the first summary lists the NCCL kernels per op with their bytes (decimal units)
    assert res.returncode == 0, res.stderr
    table = {m.group(1): (int(m.group(2)), m.group(3))
             for m in re.finditer(r"^\s+(all_reduce|broadcast)\s+(\d+)\s+(\S+ [kMG]?B)\s",
                                  res.stdout, re.MULTILINE)}
    # bytes: sum over the kernels of In msg nelems x 4 (Float), from the trace's args:
    # 306,684,384 B and 638,712 B
    assert table == {"all_reduce": (15, "306.68 MB"), "broadcast": (6, "638.71 kB")}
    assert "1 rank" in res.stdout
    assert "communication" in res.stdout and "compute" in res.stdout


def table_rows(doc: dict, name: str) -> list[dict]:
    """Rows of one of the JSON report's result tables, as dicts (docs/json-report.md)."""
    table = doc["tables"][name]
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def test_json_and_parquet_outputs_are_deterministic(nccl_trace: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two analyses of the same trace writing --json and --parquet
    for i in (1, 2):
        run_cli(capsys, str(nccl_trace), "--json", str(tmp_path / f"s{i}.json"),
                "--parquet", str(tmp_path / f"p{i}"), "--parquet-events")
    # THEN the JSON files are byte-identical and hold the same communication figures
    assert (tmp_path / "s1.json").read_bytes() == (tmp_path / "s2.json").read_bytes()
    doc = json.loads((tmp_path / "s1.json").read_text())
    comm = {r[S.OP]: (r[S.COUNT], r[S.MSG_BYTES]) for r in table_rows(doc, "communication")}
    assert comm == {"all_reduce": (15, 306684384), "broadcast": (6, 638712)}
    ranks = table_rows(doc, "ranks")
    assert [r[S.RANK] for r in ranks] == [0]
    # AND the Parquet folders' events files are EVENTS tables with the same rows
    e1 = pq.read_table(tmp_path / "p1" / "events.parquet")
    e2 = pq.read_table(tmp_path / "p2" / "events.parquet")
    S.validate(e1, S.EVENTS)
    assert e1.num_rows == ranks[0][S.COUNT] and e1.equals(e2)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_second_analysis_reads_the_cache_and_a_changed_file_is_reread(
        nccl_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a copy of the trace analysed once with --cache-dir
    trace = tmp_path / "rank0.json.gz"
    shutil.copy(nccl_trace, trace)
    cache = tmp_path / "cache"
    first = run_cli(capsys, str(trace), "--cache-dir", str(cache))
    # one parse-cache entry beside the derived results and rendered reports (docs/cache.md)
    assert len([p for p in cache.iterdir()
                if not p.name.startswith(".") and p.name not in ("derived", "reports")]) == 1
    # WHEN analysed again with the parser disabled THEN the cached tables give the same output
    calls: list[Path] = []
    real = kineto.load_kineto_file

    def spy(path: Path, rank: int | None = None, jobs: int = 1) -> kineto.RankTables:
        calls.append(path)
        return real(path, rank, jobs)

    monkeypatch.setattr(kineto, "load_kineto_file", spy)
    assert run_cli(capsys, str(trace), "--cache-dir", str(cache)) == first
    assert calls == []
    # WHEN the file changes (new mtime) THEN it is parsed again
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert run_cli(capsys, str(trace), "--cache-dir", str(cache)) == first
    assert calls == [trace]


def test_the_parse_cache_key_follows_the_packaged_kernel_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a trace file and its parse-cache key under the packaged kernel rules
    from tracekit.parsers import cache
    from tracekit.parsers.kineto import comm as kineto_comm

    trace = tmp_path / "rank0.json"
    trace.write_text("{}")
    before = cache.cache_key(trace)
    # WHEN kernels.yaml says something else (the op of an NCCL kernel comes from it)
    monkeypatch.setattr(kineto_comm, "_kernel_rules_text", lambda: "kernel_classes: []\n")
    # THEN the key changes: an entry parsed under the old rules is not read back
    assert cache.cache_key(trace) != before
