"""Rule files: validated, versioned, extendable; a bad file is one clear ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.errors import ConfigError
from tracekit.rules.loader import load_rules, packaged_files, packaged_rules
from tracekit.schema import KernelClass


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return path


def test_packaged_rules_load_and_cover_every_section() -> None:
    # GIVEN the rule files shipped in tracekit/rules/data
    rules = packaged_rules()
    # THEN every section has rules, ids are unique, and fallback rules come last
    assert {"kernels.yaml", "groups.yaml", "callsites.yaml", "paths.yaml", "lints.yaml",
            "fallback.yaml"} <= set(packaged_files())
    for section in (rules.kernel_classes, rules.group_descs, rules.call_sites, rules.paths,
                    rules.lints, rules.layer_markers):
        assert section
        assert len({r.id for r in section}) == len(section)
    assert rules.kernel_classes[-1].id == "compute"
    assert {r.cls for r in rules.kernel_classes} >= {KernelClass.COMM, KernelClass.FUSED,
                                                     KernelClass.COMPUTE, KernelClass.MEMCPY}


@pytest.mark.parametrize("text,needle", [
    ("version: 2\n", "version 2 is not supported"),
    ("version: 1\nkernels: []\n", "unknown top-level key"),
    ("version: 1\nkernel_classes:\n  - {id: a, match: x, class: communication, colour: red}\n",
     "unknown key"),
    ("version: 1\nkernel_classes:\n  - {id: a, match: x, class: magic}\n", "class 'magic'"),
    ("version: 1\ncall_sites:\n  - {id: a, match: '(unclosed', group: TP}\n", "not a valid regex"),
    ("version: 1\ncall_sites:\n  - {id: a, match: x, group: TPX}\n", "group 'TPX'"),
    ("version: 1\npaths:\n  - {id: a, path: combine.z}\n", "path 'combine.z'"),
    ("version: 1\ncall_sites:\n  - {id: a, match: x}\n  - {id: a, match: y}\n", "duplicate id"),
    ("version: 1\ngroup_descs:\n  - {id: a}\n", "missing required key 'match'"),
    ("version: 1\nkernel_classes: [\n", "not valid YAML"),
])
def test_bad_rule_files_are_config_errors(tmp_path: Path, text: str, needle: str) -> None:
    # GIVEN a user rule file with one mistake WHEN it is loaded THEN the error names it and file
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=needle) as info:
        load_rules([path])  # a path label is checked against the merged rules
    assert str(path) in str(info.value)


def test_user_rules_come_first_and_replace_by_id(tmp_path: Path) -> None:
    # GIVEN a user file that redefines 'desc.tp' and adds a kernel class
    path = write(tmp_path, """version: 1
group_descs:
  - {id: desc.tp, match: '^tensor:', group: TP}
kernel_classes:
  - {id: my.kernel, match: '^my_allreduce', kinds: [kernel], class: communication, op: all_reduce}
""")
    # WHEN merged with the packaged rules
    rules = load_rules([path])
    # THEN the user's rules are tried first and the packaged desc.tp is gone
    assert rules.kernel_classes[0].id == "my.kernel"
    tp = [r for r in rules.group_descs if r.id == "desc.tp"]
    assert len(tp) == 1 and tp[0].match == "^tensor:"
    assert rules.sources[0] == str(path)
