"""`tracekit capture --flight-recorder` on real gloo ranks of the reference workload (2 ranks,
1 layer), then `tracekit hang` on what it wrote: a clean run and a planted hang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.parsers.flight_recorder import load_dumps
from tracekit.parsers.flight_recorder.evidence import apply_flight_recorder
from tracekit.workloads.fr_samples import expected

pytestmark = pytest.mark.slow


def tracekit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, timeout=240)


def capture(out: Path, *workload: str) -> subprocess.CompletedProcess[str]:
    # --no-stack: torch's Python tracer now and then writes a garbled function name with bare
    # quotes (seen: `tracekit/io.py(0): "ranks"`), an invalid trace; these tests are about
    # the Flight Recorder dumps, not the stacks
    return tracekit("capture", "--flight-recorder", "--no-analyze", "--activities", "CPU",
                    "--no-stack", "--out", str(out), "--", sys.executable, "-m",
                    "tracekit.workloads",
                    "--tp", "2", "--layers", "1", "--sidecar-dir", str(out), *workload)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fr") / "clean"
    res = capture(out)
    assert res.returncode == 0, res.stderr[-2000:]
    return out


def test_clean_run_has_dumps_beside_traces_and_no_desync(clean: Path, tmp_path: Path) -> None:
    out = clean
    for r in (0, 1):  # every rank's dump next to its trace, with its groups
        assert (out / f"rank{r}.trace.json.gz").is_file()
        assert (out / f"rank{r}.fr_trace.pkl").stat().st_size > 0
        groups = json.loads((out / f"rank{r}.fr_groups.json").read_text())["groups"]
        assert {"pg_desc": "tp:device", "ranks": [0, 1]}.items() <= next(
            g for g in groups if g["pg_desc"] == "tp:device").items()
    res = tracekit("hang", str(out), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "h.json").read_text())["desyncs"] == []


def test_planted_hang_dumps_on_timeout_and_is_diagnosed(tmp_path: Path) -> None:
    out = tmp_path / "hang"
    res = capture(out, "--steps", "2", "--bug", "skip-all-reduce", "--timeout", "2")
    # the run fails (gloo timeout) and the error points at the dumps
    assert res.returncode != 0 and "tracekit hang" in res.stderr
    by_rank = {r: json.loads((out / f"rank{r}.sidecar.json").read_text())["collectives"]
               for r in (0, 1)}
    truth = expected("fr_hang_skip_all_reduce", by_rank)
    assert truth["desync"]["missing_ranks"] == [1]  # the workload's log says rank 1 skipped
    res = tracekit("hang", str(out), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads((tmp_path / "h.json").read_text())
    # with two ranks, which desync caused the other cannot be told (1 of 2 missed each)
    first = next(d for d in report["desyncs"] if d["pg_desc"] == truth["desync"]["pg_desc"])
    assert "likely cause" not in res.stdout
    for key in ("pg_desc", "op", "seq", "entered_ranks", "missing_ranks"):
        assert first[key] == truth["desync"][key], key
    blocked = {b["rank"]: b for b in report["blocked"]}
    assert (blocked[1]["pg_desc"], blocked[1]["op"], blocked[1]["seq"]) == (
        truth["blocked"]["1"]["pg_desc"], truth["blocked"]["1"]["op"],
        truth["blocked"]["1"]["seq"])


def _c10d_rows(run: api.Run) -> list[dict]:
    rows = run.events.select([S.RANK, S.KIND, S.NAME, S.TS_NS, S.PG_DESC, S.SEQ,
                              S.META_SOURCE]).to_pylist()
    return sorted((r for r in rows if r[S.KIND] == "cpu_op" and r[S.NAME].startswith("c10d::")),
                  key=lambda r: (r[S.RANK], r[S.TS_NS]))


def test_analyze_takes_communicators_from_the_dumps(clean: Path) -> None:
    # GIVEN the clean capture: gloo's c10d ops in the trace name no process group
    run = api.load(clean, api.LoadOptions(jobs=1))
    assert all(r[S.PG_DESC] is None for r in _c10d_rows(run))
    # WHEN the dumps beside the traces are applied
    filled, findings = apply_flight_recorder(run, load_dumps(clean).table)
    # THEN every c10d op has the group the workload's log says it issued on, with its seq
    assert findings.num_rows == 0
    for rank in (0, 1):
        log = json.loads((clean / f"rank{rank}.sidecar.json").read_text())["collectives"]
        mine = [r for r in _c10d_rows(filled) if r[S.RANK] == rank]
        assert [r[S.PG_DESC] for r in mine] == [e["group_desc"] for e in log]
        assert {r[S.META_SOURCE] for r in mine} == {"flight_recorder"}
    # AND a dump that disagrees with the trace is a finding, not an override
    fr = load_dumps(clean).table
    ops = fr.column(S.OP).to_pylist()
    ops[-1] = "broadcast" if ops[-1] != "broadcast" else "all_reduce"
    bad = fr.set_column(fr.schema.get_field_index(S.OP), S.OP, pa.array(ops).dictionary_encode())
    kept, findings = apply_flight_recorder(run, bad)
    assert findings.column(S.RULE_ID).to_pylist() == ["flight_recorder.disagrees"]
    last_rank = fr.column(S.RANK).to_pylist()[-1]
    assert all(r[S.PG_DESC] is None for r in _c10d_rows(kept) if r[S.RANK] == last_rank)


def test_analyze_cli_accepts_the_dumps(clean: Path) -> None:
    res = tracekit("analyze", str(clean), "--flight-recorder", str(clean), "--summary-only")
    assert res.returncode == 0, res.stderr[-2000:]
