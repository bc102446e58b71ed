"""tracekit.io: the one writer every output goes through (unit level, in process)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracekit import io
from tracekit.io import INPUT_REFUSED, Inputs, OutputError, Outputs


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "deep" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (run / "rank0.trace.json").write_text('{"traceEvents": []}')
    (run / "deep" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text("a,b\n")
    return run


# ------------------------------------------------------------------ which files are inputs


def test_inputs_know_a_file_by_every_spelling(tmp_path: Path, trace: Path, monkeypatch):
    # GIVEN a run folder as the input
    inputs = Inputs([trace])
    rank = trace / "rank0.trace.json"
    link = tmp_path / "link.json"
    link.symlink_to(rank)
    hard = tmp_path / "hard.json"
    os.link(rank, hard)
    monkeypatch.chdir(trace)
    # THEN a rank file, a file deep inside, a symlink, a hard link and a relative path to
    # one are all inputs; a new name, a sibling file outside the run, the folder are not
    assert inputs.holds(rank)
    assert inputs.holds(trace / "deep" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert inputs.holds(link) and inputs.holds(hard)
    assert inputs.holds(Path("rank0.trace.json")) and inputs.holds(Path("../run/deep/../"
                                                                        "rank0.trace.json"))
    other = tmp_path / "other.json"
    other.write_text("{}")
    assert not inputs.holds(trace / "new.json")
    assert not inputs.holds(other)
    assert not inputs.holds(trace)


def test_inputs_do_not_follow_a_folder_link_cycle(tmp_path: Path):
    # GIVEN a run folder holding a symlink to itself WHEN its inputs are listed THEN the
    # walk ends and finds the one real file
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text("{}")
    (run / "loop").symlink_to(run, target_is_directory=True)
    assert len(Inputs([run])) == 1


# ------------------------------------------------------------------ refusals, before writing


def test_a_target_that_is_an_input_is_refused_and_untouched(trace: Path):
    rank = trace / "rank0.trace.json"
    before = rank.read_bytes()
    with pytest.raises(OutputError) as err:
        io.write_file(rank, "report", inputs=[trace])
    assert str(err.value) == f"{rank}: {INPUT_REFUSED}"
    assert rank.read_bytes() == before
    assert sorted(p.name for p in trace.iterdir()) == ["deep", "rank0.trace.json"]


def test_parent_that_is_a_file_is_one_line_naming_it(tmp_path: Path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputError, match=rf"^{afile}/out.json: {afile} is not a folder$"):
        Outputs().file(afile / "out.json")
    with pytest.raises(OutputError, match=rf"{afile} is a file, not a folder$"):
        Outputs().file(afile / "sub" / "out.json")
    with pytest.raises(OutputError, match=r"is a file, not a folder$"):
        Outputs().folder(afile)
    with pytest.raises(OutputError, match=r"is a folder; give a file name$"):
        Outputs().file(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_a_folder_that_is_not_writable_is_one_line(tmp_path: Path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(OutputError, match=rf"folder {locked} is not writable$"):
        Outputs().file(locked / "out.json")


def test_the_same_file_for_two_outputs_is_refused(tmp_path: Path):
    plan = Outputs()
    plan.file(tmp_path / "r.json")
    with pytest.raises(OutputError, match="is given for two outputs"):
        plan.file(tmp_path / "." / "r.json")


def test_a_name_too_long_is_refused_before_writing(tmp_path: Path):
    with pytest.raises(OutputError, match="too long"):
        Outputs().file(tmp_path / ("x" * 300 + ".json"))


# ------------------------------------------------------------------ all or nothing


def test_outputs_are_put_in_place_only_when_all_succeeded(tmp_path: Path):
    # GIVEN an existing out.json and a second output whose writer fails part-way
    first = tmp_path / "out.json"
    first.write_text("old")
    second = tmp_path / "new" / "x.html"

    def fail(_fh):
        raise OSError(28, "No space left on device")

    with (pytest.raises(OutputError, match=r"x.html: cannot write: No space left on device$"),
          Outputs() as plan):
        plan.file(first)
        plan.file(second)
        plan.write(first, "new report")
        plan.write_with(second, fail)
    # THEN out.json is untouched, the folder made for x.html is gone, no temporary is left
    assert first.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_clean_exit_replaces_every_target(tmp_path: Path):
    with Outputs() as plan:
        plan.write(tmp_path / "a.txt", "a")
        plan.write(tmp_path / "d" / "e" / "b.bin", b"\x00b")
        assert not (tmp_path / "a.txt").exists()  # nothing in place before the commit
    assert (tmp_path / "a.txt").read_text() == "a"
    assert (tmp_path / "d" / "e" / "b.bin").read_bytes() == b"\x00b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "d"]


# ------------------------------------------------------------------ modes and compression


@pytest.mark.parametrize(("mask", "file_mode", "dir_mode"),
                         [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700), (0o002, 0o664, 0o775)])
def test_files_get_the_umask_mode(tmp_path: Path, mask: int, file_mode: int, dir_mode: int):
    with umask(mask):
        io.write_file(tmp_path / "sub" / "r.json", "{}")
        with io.atomic_folder(tmp_path / "entry") as tmp:
            (tmp / "x").write_text("x")
    assert mode(tmp_path / "sub" / "r.json") == file_mode
    assert mode(tmp_path / "sub") == dir_mode
    assert mode(tmp_path / "entry") == dir_mode


def test_a_gz_name_is_written_compressed_and_deterministic(tmp_path: Path):
    doc = {"traceEvents": [{"ph": "X", "name": "k", "ts": 1.5}]}
    text = json.dumps(doc)
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    io.write_file(a, text)
    io.write_file(b, text)
    assert a.read_bytes()[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(a.read_bytes())) == doc
    assert a.read_bytes() == b.read_bytes()  # no name, no mtime in the header
    plain = tmp_path / "c.json.gz"
    io.write_file(plain, text, compress=False)  # the caller may say it is compressed already
    assert plain.read_text() == text


def test_atomic_folder_keeps_the_entry_a_concurrent_writer_made(tmp_path: Path):
    target = tmp_path / "cache" / "key"
    with io.atomic_folder(target) as tmp:
        (tmp / "part").write_text("ours")
        target.mkdir()
        (target / "part").write_text("theirs")
    assert (target / "part").read_text() == "theirs"
    assert sorted(p.name for p in target.parent.iterdir()) == ["key"]


def test_a_device_or_fifo_target_is_refused_and_left_in_place(tmp_path: Path):
    # GIVEN a link to a character device and a FIFO as output targets
    link = tmp_path / "out.json"
    link.symlink_to(os.devnull)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for target in (link, fifo):
        # WHEN a report is planned there THEN it is refused before any write (a rename would
        # replace the node itself: /dev/stdout once became a plain file this way)
        with pytest.raises(OutputError, match="not a regular file"):
            Outputs().file(target)
    assert link.is_symlink() and os.readlink(link) == os.devnull
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
