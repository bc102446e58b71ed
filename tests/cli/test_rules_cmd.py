"""`tracekit rules list|show|validate`, and the table of built-in rules in docs/rules.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tracekit.cli import cli, main
from tracekit.rules.catalog import docs_block

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tracekit" / "rules" / "data"
EXAMPLE = ROOT / "docs" / "examples" / "rules" / "uccl-ep.yaml"


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["rules", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _yaml_ids() -> set[str]:
    """Every rule id of every packaged file, read from the YAML itself."""
    ids: set[str] = set()
    for path in DATA.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        for value in doc.values():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                ids |= {item["id"] for item in value}
    return ids


def test_list_names_every_packaged_rule_once_per_kind() -> None:
    # GIVEN the packaged rule files WHEN listed THEN every id of every file is in the table
    table = _run("list")
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    listed = {row[0].strip("| `") for row in rows}
    assert listed == _yaml_ids()
    assert len({(r[0], r[1]) for r in rows}) == len(rows)


def test_docs_table_is_the_generated_one() -> None:
    # GIVEN docs/rules.md WHEN its table is compared with `tracekit rules list` THEN equal
    block = docs_block((ROOT / "docs" / "rules.md").read_text(encoding="utf-8"))
    assert block == _run("list"), (
        "docs/rules.md is stale: run `python -m tracekit.rules.catalog docs/rules.md`")


def test_show_prints_the_rule_as_written() -> None:
    # GIVEN a lint and an id that is a kernel rule and a path label at once
    lint = yaml.safe_load(_run("show", "double-reduction"))
    raw = next(r for r in yaml.safe_load((DATA / "lints.yaml").read_text())["lints"]
               if r["id"] == "double-reduction")
    # THEN the lint is shown with its file and exactly its YAML params
    assert lint["file"] == "rules/lints.yaml" and lint["check"] == raw["check"]
    assert lint["params"] == raw["params"]
    both = list(yaml.safe_load_all(_run("show", "deepep.layout")))
    assert {d["kind"] for d in both} == {"kernel", "path_label"}


def test_show_and_list_see_user_files() -> None:
    shown = list(yaml.safe_load_all(_run("show", "uccl_ep.dispatch", "--rules", str(EXAMPLE))))
    assert {d["kind"] for d in shown} == {"kernel", "path_label"}
    assert all(d["file"] == str(EXAMPLE) for d in shown)
    assert "fingerprint" in _run("list", "--rules", str(EXAMPLE))


def test_validate_reports_what_a_file_adds_and_replaces(tmp_path: Path) -> None:
    out = _run("validate", str(EXAMPLE))
    assert out.startswith(f"{EXAMPLE}: ok, 2 kernel, 2 call_site, 2 path_label;")
    mine = tmp_path / "mine.yaml"
    mine.write_text("version: 1\nkernel_classes:\n"
                    "  - {id: deepep.layout, match: '(?!)', class: compute}\n")
    assert "replaces kernel deepep.layout" in _run("validate", str(mine))


@pytest.mark.parametrize("text,needle", [
    ("version: 1\ncall_sites: [{id: x, match: a, path: zz.top}]\n", "path 'zz.top'"),
    ("version: 1\nlints: [{id: x, check: same_layer, colour: red}]\n", "unknown key"),
])
def test_validate_a_bad_file_is_one_line_exit_2(tmp_path: Path, text: str, needle: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        main(["rules", "validate", str(bad)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and str(bad) in err and needle in err
    assert "Traceback" not in err


def test_rules_is_a_registered_subcommand() -> None:
    out = subprocess.run([sys.executable, "-m", "tracekit", "--help"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert "rules" in out.split("Commands:")[1]
