"""The rules as a catalogue: every rule with its kind and file (``tracekit rules``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tracekit.rules import loader
from tracekit.rules.model import FrozenMap, RuleSet, When

# section -> the kind named in `tracekit rules list`
KINDS = {
    "kernel_classes": "kernel", "group_descs": "group_desc", "call_sites": "call_site",
    "paths": "path_rule", "path_labels": "path_label", "path_families": "path_family",
    "layer_markers": "layer_marker", "lints": "lint",
}


@dataclass(frozen=True)
class Entry:
    id: str
    kind: str
    file: str
    rule: Any

    def summary(self) -> str:
        """One line: what the rule decides."""
        r = self.rule
        bits: list[str] = []
        for key in ("cls", "op", "group", "path", "phase", "family", "check", "severity"):
            value = getattr(r, key, None)
            if value:
                bits.append(f"{'class' if key == 'cls' else key} {value}")
        return ", ".join(bits)


def _files(user_files: Iterable[Path]) -> list[tuple[str, RuleSet]]:
    out = [(f"rules/{name}", loader.parse_text(text, f"rules/{name}"))
           for name, text in loader.packaged_texts()]
    out.sort(key=lambda fr: fr[1].priority)  # the packaged load order
    users = [(str(p), loader.load_file(Path(p))) for p in user_files]
    return list(reversed(users)) + out  # later user files first, as they win


def entries(user_files: Iterable[Path] = ()) -> list[Entry]:
    """Every rule in force in load order, a replaced packaged rule left out."""
    user_files = tuple(user_files)
    loader.load_rules(user_files)  # validate the whole set first (ConfigError)
    seen: set[tuple[str, str]] = set()
    out: list[Entry] = []
    for file, rules in _files(user_files):
        for section, kind in KINDS.items():
            for rule in getattr(rules, section):
                if (kind, rule.id) in seen:
                    continue
                seen.add((kind, rule.id))
                out.append(Entry(rule.id, kind, file, rule))
    return out


def markdown_table(items: list[Entry]) -> str:
    """The table of `tracekit rules list` (docs/rules.md holds the packaged one)."""
    lines = ["| id | kind | file | decides |", "|---|---|---|---|"]
    for e in items:
        lines.append(f"| `{e.id}` | {e.kind} | {e.file} | {e.summary()} |")
    return "\n".join(lines) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, FrozenMap):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, When):
        return {k: _plain(v) for k, v in _fields(value).items()}
    if isinstance(value, tuple) and value and all(
            isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in _fields(value).items()}
    return value


def _fields(rule: Any) -> dict[str, Any]:
    out = {}
    for f in fields(rule):
        value = getattr(rule, f.name)
        if value in (None, (), False) and f.name != "id":
            continue
        out["class" if f.name == "cls" else f.name] = value
    return out


def describe(entry: Entry) -> dict[str, Any]:
    """The rule as a mapping in its YAML spelling, with its kind and file."""
    body = {k: _plain(v) for k, v in _fields(entry.rule).items()}
    return {"kind": entry.kind, "file": entry.file, **body}



BEGIN = "<!-- tracekit rules list: begin -->"
END = "<!-- tracekit rules list: end -->"


def docs_block(text: str) -> str | None:
    """The table between the markers of docs/rules.md (None: no markers)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def update_docs(path: Path) -> None:
    """Rewrite the packaged table of docs/rules.md (``python -m tracekit.rules.catalog``)."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{BEGIN}\n{markdown_table(entries())}{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    import sys

    update_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules.md"))
