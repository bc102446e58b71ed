"""Path labels are rule data: declared in paths.yaml, extended by user files, never in Python.

This is the YAML loader's test module: the only place under tests/ or tracekit/ where path
label strings may be spelled in Python besides the rule files themselves.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from tracekit import schema as S
from tracekit.errors import ConfigError
from tracekit.rules.labels import PathLabel
from tracekit.rules.loader import load_rules, packaged_rules, rules_fingerprint, rules_version

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tracekit" / "rules" / "data"


def _declared() -> dict[str, dict]:
    doc = yaml.safe_load((DATA / "paths.yaml").read_text())
    return {lab["id"]: lab for lab in doc["path_labels"]}


def test_packaged_labels_and_phases_come_from_paths_yaml() -> None:
    # GIVEN the raw paths.yaml WHEN the rules are loaded THEN every label, phase, family is theirs
    raw = _declared()
    rules = packaged_rules()
    assert [lab.id for lab in rules.path_labels] == list(raw)
    phases = {k: v["phase"] for k, v in raw.items()}
    assert {lab.id: lab.phase for lab in rules.path_labels} == phases
    assert PathLabel.PHASE_OF["deepep.normal.dispatch"] == "dispatch"
    assert PathLabel.ATTN_FULL_TP == "attn_reduce.full_tp"
    assert rules.family_paths("dp_gather") == (
        "dp_gather.gatherv", "dp_gather.allreduce", "dp_gather.allgather", "dp_gather.rs_ag")
    assert rules.phase_order == ("attention_reduce", "dp_gather", "dispatch", "experts", "combine")


def test_a_user_file_declares_a_new_label_and_uses_it(tmp_path: Path) -> None:
    # GIVEN a user file with a new label in a new family, used by a kernel rule
    mine = tmp_path / "mine.yaml"
    mine.write_text("""version: 1
path_families:
  - {id: mylib}
path_labels:
  - {id: mylib.dispatch, phase: dispatch, family: mylib}
kernel_classes:
  - {id: mylib.k, match: 'mylib_dispatch', class: communication, op: dispatch,
     path: mylib.dispatch}
""")
    # WHEN loaded THEN the label has its phase, next to the packaged ones
    rules = load_rules([mine])
    assert rules.phase_of("mylib.dispatch") == "dispatch"
    assert rules.phase_of("deepep.ll.combine") == "combine"
    assert rules.family_paths("mylib") == ("mylib.dispatch",)


@pytest.mark.parametrize("text,needle", [
    ("version: 1\ncall_sites:\n  - {id: a, match: x, path: nolib.x}\n", "path 'nolib.x'"),
    ("version: 1\npath_labels:\n  - {id: a.b, phase: warmup}\n", "phase 'warmup'"),
    ("version: 1\npath_labels:\n  - {id: a.b, phase: dispatch, family: nofam}\n",
     "family 'nofam'"),
    ("version: 1\nlints:\n  - {id: l, check: same_layer, params: {paths: [nolib.y]}}\n",
     "path 'nolib.y'"),
])
def test_undeclared_labels_are_config_errors(tmp_path: Path, text: str, needle: str) -> None:
    # GIVEN a user file naming an undeclared label, phase or family WHEN loaded THEN refused
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle) as info:
        load_rules([path])
    assert str(path) in str(info.value)


def test_fingerprint_follows_user_file_content_not_name(tmp_path: Path) -> None:
    # GIVEN two files with the same content and one with other content
    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text("version: 1\n")
    b.write_text("version: 1\n")
    c.write_text("version: 1\nname: other\n")
    # THEN the fingerprint depends on the content and order, and on the packaged version
    assert rules_fingerprint([a]) == rules_fingerprint([b])
    assert rules_fingerprint([a]) != rules_fingerprint([c])
    assert rules_fingerprint([]) != rules_fingerprint([a])
    assert rules_fingerprint([a, c]) != rules_fingerprint([c, a])
    assert rules_version().startswith("1.")


def test_no_path_label_is_spelled_in_python_under_tracekit() -> None:
    # GIVEN every declared packaged label (read from the YAML, not from tracekit)
    labels = set(_declared())
    # a bare word that is also a phase name or an `a2a` config value (lints.yaml) is allowed
    # where it is a whole string: it is that other thing there
    lints = yaml.safe_load((DATA / "lints.yaml").read_text())
    config_values = {v for lint in lints["lints"] for fam in (lint.get("params") or {})
                     .get("expect", {}).values() for v in fam}
    bare_ok = {lab for lab in labels if "." not in lab} & (set(S.Phase.ALL) | config_values)
    words = sorted(labels - bare_ok, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, words)) + r")(?![\w])")
    hits = []
    # WHEN every string constant of every .py under tracekit/ is searched
    for py in sorted((ROOT / "tracekit").rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hits += [f"{py.relative_to(ROOT)}:{node.lineno}: {m.group(0)}"
                         for m in pattern.finditer(node.value)]
    # THEN no label is spelled there
    assert not hits, hits
    assert "dp_gather.gatherv" in words and "fuseep" in bare_ok  # the test can see labels


def test_the_lint_checks_the_loader_accepts_are_the_engine_checks() -> None:
    from tracekit.rules.lints import CHECKS
    from tracekit.rules.model import LINT_CHECKS

    assert set(LINT_CHECKS) == set(CHECKS)


@pytest.mark.parametrize("text,needle", [
    ("version: 1\nlints:\n  - {id: l, check: double_reduction}\n", "check 'double_reduction'"),
    ("version: 1\nlints:\n  - {id: l, check: config_paths, params: {families: [nofam]}}\n",
     "'nofam' is not a declared path family"),
    ("version: 1\nlints:\n  - {id: l, check: config_paths, params: {expect: {nofam: {}}}}\n",
     "'nofam' is not a declared path family"),
])
def test_lints_name_generic_checks_and_declared_families(tmp_path: Path, text: str,
                                                         needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_rules([path])
