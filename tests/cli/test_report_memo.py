"""`tracekit analyze --cache-dir D`: rendered reports are kept under ``D/reports``
(tracekit.reports.memo) and a warm analysis writes them from there, without rendering.

The stored file is what a warm run writes (shown by planting a marker in it); a changed
reporter option or another hardware profile (another derived key) renders afresh; an
unreadable store still writes the freshly rendered report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit import reports
from tracekit.cli import main
from tracekit.reports import memo


def analyze(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return out


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
