"""The Flight Recorder reader on real torch 2.13 gloo dumps (pickle and JSON of one run, and
the bundled sample scenarios), and its refusals: unsafe pickles, unknown versions, corrupt,
truncated and empty files."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.parsers.flight_recorder import load_dumps, read_dump
from tracekit.parsers.flight_recorder.table import fr_table, rank_of

DATA = Path(__file__).parent / "data"  # made by data/make_pair.py (torch 2.13, 2 gloo ranks)
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces" / "flight_recorder"


def _raw(path: Path) -> dict:
    return pickle.loads(path.read_bytes())  # test data written by torch, known to be plain


def test_pickle_entries_become_rows_with_torch_field_values() -> None:
    # GIVEN rank 0's pickle dump WHEN read
    path = DATA / "pair_rank0.fr_trace.pkl"
    raw = _raw(path)
    table = fr_table(rank_of(path), path, read_dump(path)).to_pylist()
    # THEN one row per torch entry, fields carried over as torch wrote them
    assert len(table) == len(raw["entries"]) == 4
    for row, e in zip(table, raw["entries"], strict=True):
        assert row[S.RANK] == 0
        assert (row[S.PG_NAME], row[S.PG_DESC]) == tuple(e["process_group"])
        assert row[S.SEQ] == e["collective_seq_id"]
        assert row[S.COLL_NAME] == e["profiling_name"]
        assert row[S.IN_SIZES] == e["input_sizes"] and row[S.OUT_SIZES] == e["output_sizes"]
        assert row[S.IN_DTYPES] == e["input_dtypes"]
        assert row[S.TS_NS] == e["time_created_ns"]
        assert row[S.TIMEOUT_NS] == e["timeout_ms"] * 1_000_000
        assert row[S.FR_VERSION] == raw["version"] == "2.10"
    # AND the op vocabulary is EVENTS'
    assert [r[S.OP] for r in table] == ["all_reduce", "all_gather", "broadcast", "barrier"]
    # AND element counts are the products of the shapes torch recorded
    assert [r[S.OUT_NELEMS] for r in table] == [12, 24, 5, 0]
    # AND the call site is the script's frame (make_pair.py, run as /tmp/frx/pair.py), as
    # EVENTS.call_site names frames; torch's own frames are left out
    lines = [f["line"] for e in raw["entries"] for f in e["frames"]
             if f["filename"] == "/tmp/frx/pair.py"]
    assert [r[S.CALL_SITE].split(" <- ")[0] for r in table] == [
        f"main (/tmp/frx/pair.py:{n})" for n in lines]
    assert len(lines) == 4


def test_json_dump_gives_the_same_rows_but_no_stacks() -> None:
    # GIVEN the JSON and the pickle dump that torch wrote one after the other in one rank
    pk, js = DATA / "pair_rank1.fr_trace.pkl", DATA / "pair_rank1.fr_trace.json"
    a = fr_table(1, pk, read_dump(pk)).drop_columns([S.SOURCE, S.CALL_SITE]).to_pylist()
    b = fr_table(1, js, read_dump(js)).drop_columns([S.SOURCE, S.CALL_SITE]).to_pylist()
    # THEN every field agrees (JSON writes 0 for an unknown discovery time, pickle None)
    assert a == b
    assert fr_table(1, js, read_dump(js)).column(S.CALL_SITE).null_count == 4


def test_gloo_members_come_from_the_capture_groups_file() -> None:
    # GIVEN a captured sample: gloo leaves pg_config empty, capture wrote the groups
    dumps = load_dumps(SAMPLES / "fr_hang_skip_all_reduce")
    rows = dumps.table.to_pylist()
    groups = json.loads((SAMPLES / "fr_hang_skip_all_reduce" / "rank0.fr_groups.json")
                        .read_text())["groups"]
    want = {(g["pg_name"], g["pg_desc"]): g["ranks"] for g in groups}
    # THEN every row carries its group's global ranks and says where they came from
    assert sorted(dumps.files) == [0, 1, 2, 3]
    for r in rows:
        assert r[S.PG_RANKS] == want[(r[S.PG_NAME], r[S.PG_DESC])]
        assert r[S.MEMBERS_SOURCE] == "groups_file"


@pytest.mark.parametrize("scenario", ["fr_hang_skip_all_reduce", "fr_shape_mismatch"])
def test_sequence_ids_match_the_workload_log(scenario: str) -> None:
    # GIVEN a sample's dumps and the workload's own log of every collective it issued
    folder = SAMPLES / scenario
    table = load_dumps(folder).table.to_pylist()
    for rank in range(4):
        log = json.loads((folder / f"rank{rank}.sidecar.json").read_text())["collectives"]
        counts: dict[str, int] = {}
        want = []
        for e in log:
            counts[e["group_desc"]] = counts.get(e["group_desc"], 0) + 1
            want.append((e["group_desc"], e["op"], counts[e["group_desc"]]))
        got = [(r[S.PG_DESC], r[S.OP], r[S.SEQ]) for r in table if r[S.RANK] == rank]
        # THEN the recorder saw exactly those, with per-group sequence ids counted from 1
        assert got == want


def test_older_format_without_thread_fields_is_read(tmp_path: Path) -> None:
    # GIVEN a 2.3-format dump: the 2.10 one without the fields added since (thread_id,
    # thread_name, comm_lib_version), as torch's NCCLUtils.hpp of that version wrote them
    raw = _raw(DATA / "pair_rank0.fr_trace.pkl")
    raw["version"] = "2.3"
    raw.pop("comm_lib_version", None)
    for e in raw["entries"]:
        e.pop("thread_id"), e.pop("thread_name")
    path = tmp_path / "rank0.fr_trace.pkl"
    path.write_bytes(pickle.dumps(raw))
    # WHEN read THEN the rows are there, with no thread name
    table = load_dumps(path).table
    assert table.num_rows == 4 and table.column(S.THREAD).null_count == 4
    assert set(table.column(S.FR_VERSION).to_pylist()) == {"2.3"}


class _Boom:
    def __reduce__(self):  # what an unsafe unpickler would run
        return (Path.touch, (Path(self.target),))

    target = ""


def test_a_pickle_with_code_is_refused_and_not_run(tmp_path: Path) -> None:
    # GIVEN a "dump" whose pickle would create a file when unpickled with pickle.load
    marker = tmp_path / "executed"
    _Boom.target = str(marker)
    path = tmp_path / "rank0.fr_trace.pkl"
    path.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Boom()]}))
    # WHEN read THEN it is refused and nothing ran
    with pytest.raises(BadInputError, match="refused global"):
        read_dump(path)
    assert not marker.exists()


@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty file"),
    (b"garbage that is no dump", "neither a pickle nor JSON"),
    (b'{"version": "2.10", "entries": [', "invalid JSON"),
    (b'{"entries": []}', "no 'version' key"),
    (b'{"version": "3.0", "entries": []}', "version '3.0' is not supported"),
    (b'{"version": "2.11", "entries": []}', "version '2.11' is not supported"),
    (b'{"version": 2.10, "entries": []}', "is not supported"),
    (b'{"version": "2.10", "entries": [{"state": "x"}]}', "entry 0 has no process_group"),
])
def test_bad_dumps_are_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "rank0.fr_trace.json"
    path.write_bytes(content)
    with pytest.raises(BadInputError, match=message) as err:
        read_dump(path)
    assert str(path) in err.value.one_line() and "\n" not in err.value.one_line()


def test_truncated_pickle_is_refused(tmp_path: Path) -> None:
    raw = (DATA / "pair_rank0.fr_trace.pkl").read_bytes()
    path = tmp_path / "rank0.fr_trace.pkl"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BadInputError, match="not a readable Flight Recorder pickle"):
        read_dump(path)


def test_rank_from_torch_and_capture_file_names() -> None:
    assert rank_of(Path("nccl_trace_rank_12")) == 12
    assert rank_of(Path("rank3.fr_trace.pkl")) == 3
    assert rank_of(Path("fr_dump_7")) == 7
    with pytest.raises(BadInputError, match="cannot tell the rank"):
        rank_of(Path("fr_trace.pkl"))
