"""`tracekit analyze --cache-dir D`: rendered reports are kept under ``D/reports``
(tracekit.reports.memo) and a warm analysis writes them from there, without rendering.

The stored file is what a warm run writes (shown by planting a marker in it); a changed
reporter option or another hardware profile (another derived key) renders afresh; an
unreadable store still writes the freshly rendered report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli.invoke import analyze

import tracekit
from tracekit import reports
from tracekit.reports import memo


def stored(cache: Path, suffix: str) -> list[Path]:
    folder = cache / memo.SUBDIR
    return sorted(folder.glob(f"*.{suffix}")) if folder.is_dir() else []


def test_warm_run_writes_the_stored_reports(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a run analysed once with --cache-dir (reports rendered and stored)
    cache = tmp_path / "cache"
    cold = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
                   "--json", tmp_path / "cold.json", "--markdown", tmp_path / "cold.md")
    (json_file,), (md_file,), (text_file,) = (stored(cache, s) for s in
                                              ("json", "markdown", "text"))
    assert json_file.read_text() == (tmp_path / "cold.json").read_text()
    assert text_file.read_text() == cold
    assert md_file.read_text() == (tmp_path / "cold.md").read_text()
    # WHEN it is analysed again, rendering counted, with a marker planted in the stored JSON
    rendered: list[str] = []
    real = reports.render
    monkeypatch.setattr(reports, "render",
                        lambda name, *a, **k: rendered.append(name) or real(name, *a, **k))
    json_file.write_text('{"planted": true}\n')
    warm = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
                   "--json", tmp_path / "warm.json", "--markdown", tmp_path / "warm.md")
    # THEN the reports come from the store: nothing rendered, the marker written out
    assert rendered == []
    assert (tmp_path / "warm.json").read_text() == '{"planted": true}\n'
    assert (tmp_path / "warm.md").read_text() == (tmp_path / "cold.md").read_text()
    assert warm == cold


def test_other_options_or_hardware_render_afresh(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a run analysed once with --cache-dir
    cache = tmp_path / "cache"
    analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
            "--json", tmp_path / "a.json")
    # WHEN the terminal report asks for --verbose, then another hardware profile
    analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache, "-v")
    assert len(stored(cache, "text")) == 2
    analyze(capsys, copied_run, "--hardware", "a100", "--cache-dir", cache,
            "--json", tmp_path / "b.json")
    # THEN each is a store of its own (another key), and the JSON reports differ
    assert len(stored(cache, "json")) == 2
    assert (tmp_path / "a.json").read_text() != (tmp_path / "b.json").read_text()


def test_unwritable_store_still_writes_the_report(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a cache whose reports folder is a file (nothing can be stored there)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / memo.SUBDIR).write_text("not a folder")
    # WHEN the run is analysed with --json
    analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
            "--json", tmp_path / "a.json")
    # THEN the report is written all the same, rendered afresh
    assert (tmp_path / "a.json").read_text().startswith("{")


def test_warm_run_with_every_report_stored_loads_no_table_library(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a run analysed once with --cache-dir, --json and --html
    cache = tmp_path / "cache"
    args = [str(a) for a in (copied_run, "--hardware", "h200", "--cache-dir", cache)]
    cold = analyze(capsys, *args, "--json", tmp_path / "cold.json", "--html",
                   tmp_path / "cold.html")
    # WHEN the same analysis runs again in a fresh process
    probe = ("import sys\nfrom tracekit.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
             "heavy = [m for m in ('pyarrow', 'pandas', 'numpy', 'rich', 'bokeh', 'yaml',\n"
             "                     'tracekit.schema', 'tracekit.parsers') if m in sys.modules]\n"
             "sys.stderr.write('LOADED:' + ','.join(heavy))\n")
    root = Path(tracekit.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("COLUMNS", None)
    done = subprocess.run(
        [sys.executable, "-c", probe, "analyze", *args, "--json", str(tmp_path / "warm.json"),
         "--html", str(tmp_path / "warm.html")],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    # THEN it wrote the same reports and text, and never loaded pyarrow, pandas, rich, bokeh
    assert done.returncode == 0, done.stderr
    assert done.stderr.rsplit("LOADED:", 1)[1] == ""
    assert done.stdout == cold
    for name in ("json", "html"):
        assert (tmp_path / f"warm.{name}").read_bytes() == \
            (tmp_path / f"cold.{name}").read_bytes()
