"""`tracekit analyze --cache-dir`: the derived results are cached (tracekit.pipeline.cache).

A second analysis of the same run with the same rules, hardware and options reads the result
tables from the cache and runs neither the parser nor the attribution and measure stages
(counted here by wrapping them); anything the results depend on misses; a corrupt or foreign
entry is recomputed; the reports are byte-identical hit or miss, and to a run without a cache.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli.invoke import analyze

from tracekit.cli import main
from tracekit.pipeline import cache as cache_derived
from tracekit.pipeline.in_memory import InMemory
from tracekit.reports import memo


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the parse and the attribute stages ran (wrapped, still doing their work)."""
    counts = {"parse": 0, "analyze": 0}

    def counted(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return func(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(InMemory, "parse", counted("parse", InMemory.parse))
    monkeypatch.setattr(InMemory, "attribute", counted("analyze", InMemory.attribute))
    return counts


def entries(cache: Path) -> list[Path]:
    folder = cache / cache_derived.SUBDIR
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_second_run_hits_and_reports_are_identical(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    calls: dict[str, int], caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN a run analysed once without a cache (the reference reports)
    cache = tmp_path / "cache"
    plain = analyze(capsys, copied_run, "--hardware", "h200", "--json", tmp_path / "plain.json",
                    "--markdown", tmp_path / "plain.md")
    assert calls == {"parse": 1, "analyze": 1}
    listing = sorted(p.name for p in copied_run.rglob("*"))
    # WHEN it is analysed twice with --cache-dir
    first = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
                    "--json", tmp_path / "a.json", "--markdown", tmp_path / "a.md")
    assert calls == {"parse": 2, "analyze": 2}
    with caplog.at_level(logging.INFO, logger="tracekit.parsers.cache"):
        second = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
                         "--json", tmp_path / "b.json", "--markdown", tmp_path / "b.md")
    # THEN the second run neither parsed nor analysed: it read the one cached entry
    assert calls == {"parse": 2, "analyze": 2}
    assert any("derived cache hit" in r.getMessage() for r in caplog.records)
    assert len(entries(cache)) == 1
    # AND every report and the terminal text are the same, hit, miss or no cache at all
    for name in ("json", "md"):
        ref = (tmp_path / f"plain.{name}").read_bytes()
        assert (tmp_path / f"a.{name}").read_bytes() == ref
        assert (tmp_path / f"b.{name}").read_bytes() == ref
    assert first == second == plain
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["run"]["events"] > 0  # the event count comes back without EVENTS
    # AND nothing was written into the input folder
    assert sorted(p.name for p in copied_run.rglob("*")) == listing


def test_another_report_of_the_same_run_is_a_hit(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], calls: dict[str, int],
) -> None:
    cache = tmp_path / "cache"
    analyze(capsys, copied_run, "--cache-dir", cache, "--json", tmp_path / "a.json")
    analyze(capsys, copied_run, "--cache-dir", cache, "--junit", tmp_path / "a.xml")
    assert calls["analyze"] == 1
    assert (tmp_path / "a.xml").read_text().startswith("<?xml")


@pytest.mark.parametrize("other", ["format", "verbose", "threshold"])
def test_an_option_that_changes_a_report_reuses_the_derived_tables(
    other: str, copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    calls: dict[str, int],
) -> None:
    # GIVEN a run analysed once with --cache-dir (its entry and its rendered reports stored)
    cache = tmp_path / "cache"
    analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache,
            "--json", tmp_path / "a.json")
    assert calls == {"parse": 1, "analyze": 1}
    hits = cache_derived.STATS.hits
    # WHEN a report that was not rendered yet is asked for: another format, the terminal
    # report with --verbose, `check` with another threshold (check keys its own entry: it is
    # cached once, then read for the second threshold)
    if other == "format":
        args: list[str | Path] = ["--markdown", tmp_path / "b.md"]
        ref: list[str | Path] = ["--markdown", tmp_path / "ref.md"]
        out = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache, *args)
        plain = analyze(capsys, copied_run, "--hardware", "h200", *ref)
        assert (tmp_path / "b.md").read_bytes() == (tmp_path / "ref.md").read_bytes()
    elif other == "verbose":
        out = analyze(capsys, copied_run, "--hardware", "h200", "--cache-dir", cache, "-v")
        plain = analyze(capsys, copied_run, "--hardware", "h200", "-v")
    else:
        def check(*more: str | Path) -> str:
            with pytest.raises(SystemExit):
                main(["check", str(copied_run), "--hardware", "h200", *(str(m) for m in more)])
            return capsys.readouterr().out

        check("--cache-dir", cache, "--max-exposed-comm", "90")
        assert calls["analyze"] == 2  # check's own entry, stored once
        hits = cache_derived.STATS.hits
        out = check("--cache-dir", cache, "--max-exposed-comm", "1")
        plain = check("--max-exposed-comm", "1")
    # THEN the derived entry was read (no parse, no attribution) and the report is the one
    # an uncached analysis renders
    assert cache_derived.STATS.hits == hits + 1
    assert calls["analyze"] == (3 if other == "threshold" else 2)  # +1: the uncached one
    assert out == plain


@pytest.mark.parametrize("change", ["rules", "hardware", "hardware_file", "option", "input",
                                    "replaced", "added"])
def test_what_the_results_depend_on_misses(
    change: str, copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    calls: dict[str, int], h200_yaml: str,
) -> None:
    # GIVEN a user rule file, a hardware file and an analysis cached with them
    cache = tmp_path / "cache"
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nname: mine\npaths: []\n")
    hw = tmp_path / "hw.yaml"
    hw.write_text(h200_yaml)
    base = [copied_run, "--cache-dir", cache, "--rules", rules, "--json", tmp_path / "a.json"]
    analyze(capsys, *base, "--hardware", hw)
    analyze(capsys, *base, "--hardware", hw)
    assert calls["analyze"] == 1
    # WHEN one thing the results depend on changes
    extra: list[str | Path] = ["--hardware", hw]
    if change == "rules":
        rules.write_text("version: 1\nname: mine-too\npaths: []\n")
    elif change == "hardware":
        extra = ["--hardware", "a100"]
    elif change == "hardware_file":
        hw.write_text(h200_yaml + "# edited: the content, not the name, is keyed\n")
    elif change == "option":
        extra += ["--on-error", "skip"]
    elif change == "input":
        trace = sorted(copied_run.glob("*.trace.json.gz"))[0]
        trace.write_bytes(trace.read_bytes())  # same bytes, a new modification time
    elif change == "replaced":
        # another file in its place, same size and modification time: a new inode
        trace = sorted(copied_run.glob("*.trace.json.gz"))[0]
        st = trace.stat()
        twin = copied_run / "twin.tmp"
        twin.write_bytes(trace.read_bytes())
        os.utime(twin, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(twin, trace)
        assert (trace.stat().st_size, trace.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    else:
        (copied_run / "notes.txt").write_text("a file more in the run folder\n")
    analyze(capsys, *base, *extra)
    # THEN the analysis runs again, into a second entry
    assert calls["analyze"] == 2
    assert len(entries(cache)) == 2


@pytest.fixture()
def h200_yaml() -> str:
    from importlib import resources

    return (resources.files("tracekit.measure") / "data" / "h200.yaml").read_text()


@pytest.mark.parametrize("damage", ["garbage", "truncated_meta", "foreign", "missing_table"])
def test_a_corrupt_or_foreign_entry_is_recomputed(
    damage: str, copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    calls: dict[str, int],
) -> None:
    cache = tmp_path / "cache"
    args = [copied_run, "--cache-dir", cache, "--json", tmp_path / "a.json"]
    analyze(capsys, *args)
    ref = (tmp_path / "a.json").read_bytes()
    (entry,) = entries(cache)
    meta = entry / cache_derived.META
    if damage == "garbage":
        (entry / f"measured{cache_derived.SUFFIX}").write_bytes(b"not parquet at all")
    elif damage == "truncated_meta":
        meta.write_text(meta.read_text()[:20])
    elif damage == "foreign":
        data = json.loads(meta.read_text())
        data["key"] = "0" * 32
        meta.write_text(json.dumps(data))
    else:
        (entry / f"phases{cache_derived.SUFFIX}").unlink()
    # WHEN the damaged entry is read (the stored reports removed, which would answer alone):
    # a miss, recomputed with no traceback, the same report
    shutil.rmtree(cache / memo.SUBDIR)
    analyze(capsys, *args)
    assert calls["analyze"] == 2
    assert (tmp_path / "a.json").read_bytes() == ref
    # AND the entry was replaced: the next run reads it
    shutil.rmtree(cache / memo.SUBDIR)
    hits = cache_derived.STATS.hits
    analyze(capsys, *args)
    assert calls["analyze"] == 2
    assert cache_derived.STATS.hits == hits + 1
    assert (tmp_path / "a.json").read_bytes() == ref


def test_summary_only_and_parquet_still_read_events(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], calls: dict[str, int],
) -> None:
    cache = tmp_path / "cache"
    analyze(capsys, copied_run, "--cache-dir", cache, "--json", tmp_path / "a.json")
    # --parquet writes the whole ATTRIBUTED (a cache entry holds its instance rows only): the
    # parse (from the parse cache) and the analysis both run, and --parquet-events adds EVENTS
    analyze(capsys, copied_run, "--cache-dir", cache, "--parquet", tmp_path / "p",
            "--parquet-events")
    assert calls == {"parse": 2, "analyze": 2}
    import pyarrow.parquet as pq

    assert pq.read_metadata(tmp_path / "p" / "attributed.parquet").num_rows > 0
    assert pq.read_metadata(tmp_path / "p" / "events.parquet").num_rows > 0
    analyze(capsys, copied_run, "--cache-dir", cache, "--summary-only")
    assert calls == {"parse": 3, "analyze": 2}


def test_check_with_another_threshold_reads_the_cache(
    copied_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN `tracekit check` of a run with a cache folder, counting the analyses
    ran = []
    real = InMemory.attribute
    monkeypatch.setattr(InMemory, "attribute", lambda *a, **k: ran.append(1) or real(*a, **k))
    cache = tmp_path / "cache"

    def check(*more: str) -> bytes:
        out = tmp_path / "check.json"
        with pytest.raises(SystemExit):
            main(["check", str(copied_run), "--cache-dir", str(cache), "--json", str(out), *more])
        capsys.readouterr()
        return out.read_bytes()

    first = check("--max-exposed-comm", "90")
    # WHEN it is checked again with other thresholds THEN the analysis is not run again
    again = check("--max-exposed-comm", "90")
    check("--min-efficiency", "0.5")
    assert len(ran) == 1
    assert again == first
    # AND an `analyze` of the same run keeps its own entry (its Analysis holds the summary)
    analyze(capsys, copied_run, "--cache-dir", cache, "--json", tmp_path / "a.json")
    assert len(entries(cache)) == 2


def test_no_derived_entry_inside_the_input_folder(
    copied_run: Path, capsys: pytest.CaptureFixture[str], calls: dict[str, int],
) -> None:
    # GIVEN a cache folder inside the run folder (allowed for the parse cache)
    cache = copied_run / "cache"
    analyze(capsys, copied_run, "--cache-dir", cache)
    analyze(capsys, copied_run, "--cache-dir", cache)
    # THEN no derived entry was written there and each analysis ran
    assert entries(cache) == []
    assert calls["analyze"] == 2


def test_the_code_fingerprint_covers_the_whole_package(tmp_path: Path) -> None:
    # GIVEN the derived cache's code root WHEN looked at THEN it is the tracekit package
    from tracekit.pipeline import cache as derived

    assert (derived.CODE_ROOT / "schema.py").is_file()
    assert (derived.CODE_ROOT / "rules" / "data" / "kernels.yaml").is_file()
    # AND a change in any module below it changes the fingerprint
    pkg = tmp_path / "pkg"
    (pkg / "deep").mkdir(parents=True)
    (pkg / "deep" / "m.py").write_text("x = 1\n")
    before = derived.code_fingerprint(pkg)
    (pkg / "deep" / "m.py").write_text("x = 2\n")
    assert derived.code_fingerprint(pkg) != before
    # AND so does a change in a data file (the packaged rules, the hardware profiles), while
    # compiled bytecode is not part of it
    (pkg / "deep" / "kernels.yaml").write_text("version: 1\n")
    with_rules = derived.code_fingerprint(pkg)
    (pkg / "deep" / "kernels.yaml").write_text("version: 2\n")
    assert derived.code_fingerprint(pkg) != with_rules
    (pkg / "deep" / "__pycache__").mkdir()
    (pkg / "deep" / "__pycache__" / "m.cpython-311.py").write_text("stale\n")
    edited = derived.code_fingerprint(pkg)
    (pkg / "deep" / "__pycache__" / "m.cpython-311.py").write_text("staler\n")
    assert derived.code_fingerprint(pkg) == edited
