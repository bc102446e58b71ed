"""Read rule files: the packaged ``data/*.yaml`` (importlib.resources) plus user files."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from tracekit.errors import ConfigError
from tracekit.rules.model import RuleSet, ruleset_from_mapping

PACKAGE = "tracekit.rules"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster


def _parse(text: str, source: str) -> RuleSet:
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


@lru_cache(maxsize=1)
def packaged_rules() -> RuleSet:
    """Every packaged rule file, in (priority, file name) order: earlier files win."""
    root = resources.files(PACKAGE) / "data"
    files = [_parse((root / n).read_text(encoding="utf-8"), f"rules/{n}") for n in packaged_files()]
    files.sort(key=lambda r: r.priority)  # stable: file-name order within one priority
    merged = RuleSet()
    for rules in reversed(files):
        merged = merged.merged(rules)
    return merged


def load_file(path: Path) -> RuleSet:
    from tracekit.limits import read_options_file

    text = read_options_file(Path(path), "rules file", yaml=True, error=ConfigError)
    return _parse(text, str(path))


def load_rules(user_files: Iterable[Path] = ()) -> RuleSet:
    """Packaged rules with the user's files on top (later user files win over earlier ones)."""
    rules = packaged_rules()
    for path in user_files:
        rules = rules.merged(load_file(Path(path)))
    return rules
