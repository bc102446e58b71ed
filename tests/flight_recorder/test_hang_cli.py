"""`tracekit hang` on the bundled Flight Recorder samples (real torch 2.13 gloo dumps of the
reference workload): the planted hang and the planted mismatch are reported as the workload's
own log says (manifest.json), a clean run reports nothing, bad dumps are one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces" / "flight_recorder"


def hang(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", "hang", *args],
                          capture_output=True, text=True, timeout=120)


def _truth(scenario: str) -> dict:
    return json.loads((SAMPLES / scenario / "manifest.json").read_text())["flight_recorder"]


def test_planted_hang_is_reported_with_communicator_op_seq_and_ranks(tmp_path: Path) -> None:
    # GIVEN rank 3 skipped its post-experts AllReduce in the last layer (ground truth from
    # the workload's log, not from any FR reader)
    truth = _truth("fr_hang_skip_all_reduce")
    # WHEN tracekit hang reads the four dumps
    res = hang(str(SAMPLES / "fr_hang_skip_all_reduce"), "--json", str(tmp_path / "h.json"))
    # THEN it exits 1 and the first desync is that AllReduce
    assert res.returncode == 1, res.stderr
    out = json.loads((tmp_path / "h.json").read_text())
    first = out["desyncs"][0]
    want = truth["desync"]
    for key in ("pg_desc", "op", "seq", "entered_ranks", "missing_ranks", "group", "path"):
        assert first[key] == want[key], key
    assert first["pg_name"]  # torch's group name, as the dump writes it
    # AND every rank's blocked entry is what the log says it was doing
    blocked = {str(b["rank"]): b for b in out["blocked"]}
    assert sorted(blocked) == sorted(truth["blocked"])
    for rank, want_b in truth["blocked"].items():
        for key in ("pg_desc", "op", "seq", "group", "path"):
            assert blocked[rank][key] == want_b[key], (rank, key)
    # AND the text report names it first
    assert res.stdout.splitlines()[1].startswith(
        f"DESYNC (likely cause): all_reduce seq {want['seq']} on tp:device")
    assert out["mismatches"] == []


def test_planted_shape_mismatch_is_found(tmp_path: Path) -> None:
    truth = _truth("fr_shape_mismatch")["mismatch"]
    res = hang(str(SAMPLES / "fr_shape_mismatch"), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 1, res.stderr
    out = json.loads((tmp_path / "h.json").read_text())
    assert out["desyncs"] == []
    (m,) = out["mismatches"]
    assert (m["pg_desc"], m["seq"], m["ranks"]) == (truth["pg_desc"], truth["seq"],
                                                    truth["ranks"])
    sizes = {f["field"]: f["values"] for f in m["fields"]}[truth["field"]]
    flat = [v for v in sizes if v["ranks"] == truth["flattened_ranks"]]
    rest = [v for v in sizes if v["ranks"] != truth["flattened_ranks"]]
    # the flattened rank passed one 1-D tensor with the others' element count
    assert len(flat) == 1 and len(flat[0]["value"][0]) == 1
    assert flat[0]["value"][0][0] == rest[0]["value"][0][0] * rest[0]["value"][0][1]


def test_clean_dumps_report_nothing(tmp_path: Path) -> None:
    # GIVEN both ranks' dumps of a run that finished
    for r in (0, 1):
        shutil.copy(DATA / f"pair_rank{r}.fr_trace.pkl", tmp_path)
    res = hang(str(tmp_path), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "h.json").read_text()) == {
        "desyncs": [], "blocked": [], "mismatches": []}
    assert "no desync and no mismatch" in res.stdout


@pytest.mark.parametrize(("name", "content", "says"), [
    ("rank0.fr_trace.pkl", b"\x80\x04corrupt", "not a readable Flight Recorder pickle"),
    ("rank0.fr_trace.pkl", "truncated", "not a readable Flight Recorder pickle"),
    ("rank0.fr_trace.json", b'{"version": "9.1", "entries": []}', "is not supported"),
    ("rank0.fr_trace.json", b"", "empty file"),
])
def test_bad_dump_folders_give_one_line_and_rc_2(tmp_path: Path, name: str,
                                                 content: bytes | str, says: str) -> None:
    shutil.copy(DATA / "pair_rank1.fr_trace.pkl", tmp_path)
    if content == "truncated":
        raw = (DATA / "pair_rank0.fr_trace.pkl").read_bytes()
        content = raw[: len(raw) - 40]
    (tmp_path / name).write_bytes(content)  # type: ignore[arg-type]
    target = tmp_path / "out.json"
    res = hang(str(tmp_path), "--json", str(target))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"tracekit: error: {tmp_path / name}: ") and says in res.stderr
    assert not target.exists()


def test_a_folder_without_dumps_is_an_error(tmp_path: Path) -> None:
    res = hang(str(tmp_path))
    assert res.returncode == 2 and "no Flight Recorder dumps here" in res.stderr
