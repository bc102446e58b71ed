"""Read rule files: the packaged ``data/*.yaml`` (importlib.resources) plus user files."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from tracekit.errors import ConfigError
from tracekit.rules.model import FORMAT_VERSION, RuleSet, ruleset_from_mapping

PACKAGE = "tracekit.rules"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster


def parse_text(text: str, source: str) -> RuleSet:
    """One rule file's text, validated (ConfigError naming ``source``)."""
    try:
        data = yaml.load(text, Loader=_LOADER)  # a safe loader (C or Python)
    except RecursionError:
        raise ConfigError("not valid YAML: nested too deeply", source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", exc)
        raise ConfigError(f"not valid YAML{where}: {problem}", source) from None
    return ruleset_from_mapping(data, source)


def packaged_files() -> list[str]:
    """Names of the rule files shipped with tracekit, in load order."""
    root = resources.files(PACKAGE) / "data"
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".yaml"))


def packaged_texts() -> list[tuple[str, str]]:
    """(file name, text) of every packaged rule file, in file-name order."""
    root = resources.files(PACKAGE) / "data"
    return [(n, (root / n).read_text(encoding="utf-8")) for n in packaged_files()]


@lru_cache(maxsize=1)
def packaged_rules() -> RuleSet:
    """Every packaged rule file, in (priority, file name) order: earlier files win."""
    files = [parse_text(text, f"rules/{n}") for n, text in packaged_texts()]
    files.sort(key=lambda r: r.priority)  # stable: file-name order within one priority
    merged = RuleSet()
    for rules in reversed(files):
        merged = merged.merged(rules)
    for rules in files:
        merged.check_paths(rules, rules.sources[0])
    return merged


@lru_cache(maxsize=1)
def rules_version() -> str:
    """The version of the packaged rules: the format version and a digest of the packaged
    files' content (any edit of a packaged file is a new version)."""
    digest = hashlib.sha256()
    for name, text in packaged_texts():
        digest.update(f"{name}\0{text}\0".encode())
    return f"{FORMAT_VERSION}.{digest.hexdigest()[:12]}"


def rules_fingerprint(user_files: Iterable[Path] = ()) -> str:
    """A cache-key part for tables derived with these rules: the packaged rules' version and
    the content of each user rule file, in order (a renamed file with the same content has the
    same fingerprint; an unreadable one is keyed by its path, and loading it reports it)."""
    digest = hashlib.sha256(rules_version().encode())
    for path in user_files:
        try:
            data = Path(path).read_bytes()
        except OSError:
            data = f"unreadable:{Path(path)}".encode()
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()[:32]


def load_file(path: Path) -> RuleSet:
    from tracekit.limits import read_options_file

    text = read_options_file(Path(path), "rules file", yaml=True, error=ConfigError)
    return parse_text(text, str(path))


def load_rules(user_files: Iterable[Path] = ()) -> RuleSet:
    """Packaged rules with the user's files on top (later user files win over earlier ones)."""
    rules = packaged_rules()
    for path in user_files:
        mine = load_file(Path(path))
        rules = rules.merged(mine)
        rules.check_paths(mine, str(path))
    return rules
