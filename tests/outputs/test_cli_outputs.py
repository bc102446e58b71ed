"""Every output flag of the CLI, end to end in a real `python -m tracekit` process.

Naming an input of the run (the trace, a rank file of the run folder, a file inside an Ascend
export, a symlink or hard link to one, a relative spelling of one) gives exit 2, one stderr
line naming the target, no traceback, and every input byte-identical; the refusal comes
before the analysis. Written files get the umask's mode; a .gz name is compressed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import fixtures.make_ascend as mk  # tests/ is on pytest's pythonpath (pyproject)
import pytest

from tracekit.io import INPUT_REFUSED

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "tp4_full_tp"  # 4 ranks, 220 KB: the smallest sample
TIMEOUT_S = 300


def tracekit(*args: str | Path, cwd: Path | None = None, mask: int | None = None
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "tracekit", *map(str, args)], cwd=cwd or REPO, env=env,
        capture_output=True, text=True, timeout=TIMEOUT_S,
        preexec_fn=None if mask is None else (lambda: os.umask(mask)), check=False)


def hashes(root: Path) -> dict[str, str]:
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def assert_one_line_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert proc.stderr == f"tracekit: error: {text}\n"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A copy of the smallest bundled sample run (the sample itself is never a target)."""
    if not (SAMPLE / "manifest.json").is_file():
        pytest.skip("sample_traces/tp4_full_tp is missing (make sample-traces)")
    dest = tmp_path / "run"
    shutil.copytree(SAMPLE, dest)
    return dest


# (subcommand, output flag): every flag that writes a file or folder
FLAGS = [
    ("analyze", "--json"), ("analyze", "--html"), ("analyze", "--markdown"),
    ("analyze", "--junit"), ("analyze", "--parquet"),
    ("check", "--json"), ("check", "--junit"), ("check", "--markdown"),
    ("export", "--perfetto"), ("export", "--html"), ("export", "--json"),
    ("export", "--markdown"), ("export", "--parquet"),
]


def _argv(cmd: str, run: Path, flag: str, target: Path | str) -> list[str | Path]:
    if cmd == "diff":
        return ["diff", run, run, flag, target]
    return [cmd, run, flag, target]


@pytest.mark.parametrize(("cmd", "flag"), [*FLAGS, ("diff", "--json"), ("diff", "--markdown")])
def test_every_output_flag_refuses_a_rank_file_of_the_run(run: Path, cmd: str, flag: str):
    # GIVEN a run folder and an output flag naming one of its rank files
    target = run / "rank2.trace.json.gz"
    before = hashes(run)
    # WHEN the command runs THEN exit 2, one line naming the file, the run unchanged
    proc = tracekit(*_argv(cmd, run, flag, target))
    if flag == "--parquet":  # a folder option: click refuses a file first
        assert_one_line_error(proc, f"Invalid value for '--parquet': Directory '{target}' is "
                                    f"a file. (see 'tracekit {cmd} --help')")
    else:
        assert_one_line_error(proc, f"{target}: {INPUT_REFUSED}")
    assert hashes(run) == before


def test_the_trace_file_itself_and_other_spellings_are_refused(run: Path, tmp_path: Path):
    # GIVEN a single trace file as the input, and ways of naming it again
    trace = run / "rank0.trace.json.gz"
    link = tmp_path / "link.json.gz"
    link.symlink_to(trace)
    hard = tmp_path / "hard.json.gz"
    os.link(trace, hard)
    before = hashes(run)
    cases: list[tuple[str | Path, Path]] = [
        (trace, REPO), (link, REPO), (hard, REPO),
        ("rank0.trace.json.gz", run),  # relative to the working folder
        ("../run/../run/rank0.trace.json.gz", run),
    ]
    for target, cwd in cases:
        proc = tracekit("analyze", trace, "--rank", "0", "--json", target, cwd=cwd)
        assert_one_line_error(proc, f"{target}: {INPUT_REFUSED}")
    # and a symlink to the run folder, with the target spelled through it
    alias = tmp_path / "alias"
    alias.symlink_to(run, target_is_directory=True)
    proc = tracekit("export", alias, "--markdown", run / "manifest.json")
    assert_one_line_error(proc, f"{run / 'manifest.json'}: {INPUT_REFUSED}")
    assert hashes(run) == before
    assert link.is_symlink() and hard.read_bytes() == trace.read_bytes()


def test_rule_and_baseline_files_are_inputs_too(run: Path, tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")
    before = rules.read_bytes()
    proc = tracekit("analyze", run, "--rules", rules, "--markdown", rules)
    assert_one_line_error(proc, f"{rules}: {INPUT_REFUSED}")
    assert rules.read_bytes() == before


def test_a_file_inside_an_ascend_export_is_refused(tmp_path: Path):
    # GIVEN an Ascend export (two ranks, text files) and a target deep inside it
    root = tmp_path / "ascend"
    root.mkdir()
    mk.write_export(root, world=2, export="text")
    inside = sorted(p for p in root.rglob("*.csv"))[0]
    before = hashes(root)
    proc = tracekit("export", root, "--json", inside)
    assert_one_line_error(proc, f"{inside}: {INPUT_REFUSED}")
    assert hashes(root) == before


def test_a_failing_output_leaves_the_others_untouched(run: Path, tmp_path: Path):
    # GIVEN an existing out.json and an --html whose folder is a file
    out = tmp_path / "out.json"
    out.write_text("keep me")
    bad = tmp_path / "bad"
    bad.write_text("a file")
    # WHEN analysed THEN one line naming the html target, out.json as it was, nothing new
    proc = tracekit("analyze", run, "--json", out, "--html", bad / "x.html")
    assert_one_line_error(proc, f"{bad / 'x.html'}: {bad} is not a folder")
    assert out.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "out.json", "run"]
    # the same for a folder output below a file
    proc = tracekit("export", run, "--json", out, "--parquet", bad / "pq" / "tables")
    assert_one_line_error(proc, f"{bad / 'pq' / 'tables'}: {bad} is a file, not a folder")
    assert out.read_text() == "keep me"


def test_files_are_written_with_the_umask_mode_and_gz_compressed(run: Path, tmp_path: Path):
    # GIVEN two exports of the same run: .gz names under umask 022, plain under umask 077
    a, b = tmp_path / "a", tmp_path / "b"
    pa = tracekit("export", run, "--perfetto", a / "t.json.gz", "--json", a / "r.json",
                  "--parquet", a / "pq", mask=0o022)
    pb = tracekit("export", run, "--perfetto", b / "t.json", "--json", b / "r.json",
                  mask=0o077)
    assert pa.returncode == 0 and pb.returncode == 0, pa.stderr + pb.stderr

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    # THEN 0644 files and 0755 folders under 022, 0600 / 0700 under 077
    assert {mode(p) for p in [a / "t.json.gz", a / "r.json", *(a / "pq").iterdir()]} == {0o644}
    assert mode(a) == mode(a / "pq") == 0o755
    assert {mode(b / "t.json"), mode(b / "r.json")} == {0o600} and mode(b) == 0o700
    # and the .gz file is gzip whose content is the same trace as the plain export
    raw = (a / "t.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(raw)) == json.loads((b / "t.json").read_text())
    assert not [p for p in a.rglob(".*")]  # no temporary left behind


@pytest.mark.parametrize(("argv", "says"), [
    (["analyze"], "Missing argument 'PATH'."),
    (["analyze", "x.json", "--no-such-option"], "No such option '--no-such-option'"),
    (["analyze", "x.json", "--jobs", "0"], "Invalid value for '--jobs'"),
    (["export", "x.json", "--html"], "Option '--html' requires an argument."),
    (["no-such-command"], "No such command 'no-such-command'."),
])
def test_click_usage_errors_are_one_line(argv: list[str], says: str):
    proc = tracekit(*argv)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"tracekit: error: {says}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Usage:" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_write_failing_after_the_analysis_replaces_nothing(run: Path, tmp_path: Path,
                                                             monkeypatch, capsys):
    # GIVEN an existing out.json, and a disk that fills up when the Markdown is written
    from tracekit import io
    from tracekit.cli import main

    out, md = tmp_path / "out.json", tmp_path / "r.md"
    out.write_text("keep me")
    real = io.temp_file

    def full(target: Path) -> Path:
        if target.name == "r.md":
            raise OSError(28, "No space left on device")
        return real(target)

    monkeypatch.setattr(io, "temp_file", full)
    # WHEN analysed (in process, the real pipeline) THEN exit 2 with one line naming r.md
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(run), "--json", str(out), "--markdown", str(md)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == f"tracekit: error: {md}: cannot write: No space left on device\n"
    # and out.json is as it was, with no temporary beside it
    assert out.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "run"]


def test_html_without_its_extra_is_one_line_before_any_work(run: Path, tmp_path: Path,
                                                            monkeypatch, capsys):
    # GIVEN bokeh not installed (find_spec says so) and a loader that must not be reached
    import importlib.util

    from tracekit.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bokeh" else real(name, *a))

    def no_load(*_a, **_k):
        raise AssertionError("the run was read before the outputs were checked")

    monkeypatch.setattr("tracekit.pipeline.in_memory.InMemory.parse", no_load)
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(run), "--html", str(tmp_path / "r.html")])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "tracekit: error: --html needs the 'html' extra (bokeh not installed): "
        "pip install 'tracekit[html]'\n")
