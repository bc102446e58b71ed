"""The one per-rank driver (tracekit.parsers): both formats go through the same parse cache
and the same on_error policy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fixtures.make_ascend as mk  # tests/ is on pytest's pythonpath (pyproject)
import pytest

from tracekit import api
from tracekit.errors import BadInputError
from tracekit.model import Run
from tracekit.parsers import ascend, load_run
from tracekit.parsers.ascend import rank as ascend_rank

OUT = "ASCEND_PROFILER_OUTPUT"


def _same(a: Run, b: Run) -> None:
    for name in a.events.column_names:
        assert a.events.column(name).equals(b.events.column(name)), name
    assert a.events.equals(b.events)
    assert a.process_groups.equals(b.process_groups)
    assert a.rank_info.equals(b.rank_info)
    assert a.skipped == b.skipped
    assert sorted(a.extra) == sorted(b.extra)
    for key in a.extra:
        assert a.extra[key].equals(b.extra[key]), key


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The rank directories the Ascend reader reads from now on."""
    calls: list[str] = []
    real = ascend.read_rank

    def spy(rank_dir: Path) -> Any:
        calls.append(rank_dir.name)
        return real(rank_dir)

    monkeypatch.setattr(ascend, "read_rank", spy)
    return calls


def _touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.mark.parametrize("export", ["text", "db"])
def test_ascend_ranks_are_cached_and_read_again_when_a_file_they_read_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export: str) -> None:
    # GIVEN a 2-rank Ascend export, its Run read without a cache, and a cache folder
    truth = mk.write_export(tmp_path / "run", world=2, export=export)
    path = tmp_path / "run"
    plain = load_run(path, api.LoadOptions(jobs=1))
    opts = api.LoadOptions(jobs=1, cache_dir=tmp_path / "cache")
    calls = _spy(monkeypatch)
    # WHEN it is read through the cache THEN both ranks are parsed and give the same Run
    _same(load_run(path, opts), plain)
    assert sorted(calls) == sorted(d.name for d in truth.rank_dirs)
    assert len(list((tmp_path / "cache").iterdir())) == 2  # one entry per rank
    # WHEN read again THEN no rank is parsed, and the Run from the entries is the same
    calls.clear()
    _same(load_run(path, opts), plain)
    assert calls == []
    # WHEN a file that rank 1 reads changes THEN only rank 1 is parsed again
    rank1 = truth.rank_dirs[1]
    _touch(ascend_rank.rank_files(rank1)[-1])
    _same(load_run(path, opts), plain)
    assert calls == [rank1.name]
    # AND the rank's metadata file counts too
    calls.clear()
    _touch(next(rank1.glob("profiler_info*.json")))
    load_run(path, opts)
    assert calls == [rank1.name]


def test_every_file_a_rank_reads_is_in_its_cache_key(tmp_path: Path) -> None:
    # GIVEN a text+db export's rank directory
    truth = mk.write_export(tmp_path, world=1, export="text+db")
    rdir = truth.rank_dirs[0]
    item = ascend.rank_inputs(tmp_path, api.LoadOptions())[0]
    before = ascend.cache_key(item)
    names = {p.name for p in ascend_rank.rank_files(rdir)}
    # THEN the files read_rank may open are listed
    assert {"trace_view.json", "communication.json"} <= names
    assert any(n.endswith(".db") for n in names) and any(
        n.startswith("profiler_info") for n in names)
    # WHEN one of them is removed THEN the key changes
    (rdir / OUT / "communication.json").unlink()
    assert ascend.cache_key(item) != before


def test_reference_exports_come_back_from_the_cache_unchanged(
        tmp_path: Path, ascend_msinsight: Path) -> None:
    # GIVEN the real text and db exports (every era of field the reader keeps)
    for which in ("text_level1", "db_level1"):
        path = ascend_msinsight / which
        plain = load_run(path, api.LoadOptions(jobs=1))
        opts = api.LoadOptions(jobs=1, cache_dir=tmp_path / which)
        # WHEN written to the cache and read back THEN the Run is the same
        load_run(path, opts)
        _same(load_run(path, opts), plain)


def test_a_bad_rank_is_skipped_the_same_way_in_both_formats(tmp_path: Path) -> None:
    # GIVEN a 2-rank Ascend export whose rank 1 has a cut trace_view.json, and a Kineto run
    # folder with a good and a cut rank file
    truth = mk.write_export(tmp_path / "npu", world=2, export="text")
    cut = truth.rank_dirs[1] / OUT / "trace_view.json"
    cut.write_bytes(cut.read_bytes()[:200])
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    (gpu / "rank0.json").write_text(
        '{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "name": "a", "cat":'
        ' "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}]}')
    (gpu / "rank1.json").write_text('{"distributedInfo": {"rank": 1}, "traceEvents": [')
    for path, bad in ((tmp_path / "npu", cut), (gpu, gpu / "rank1.json")):
        # WHEN read with on_error="skip" THEN the good rank is there and the bad one is
        # listed as (file, one-line reason naming the file)
        run = load_run(path, api.LoadOptions(jobs=1, on_error="skip"))
        assert run.ranks == [0]
        assert [f for f, _ in run.skipped] == [str(bad)]
        assert run.skipped[0][1].startswith(f"{bad}: ")
        # WHEN read with the default policy THEN that one-line error stops the load
        with pytest.raises(BadInputError) as info:
            load_run(path, api.LoadOptions(jobs=1))
        assert info.value.path == str(bad)
        assert str(info.value) == run.skipped[0][1]
