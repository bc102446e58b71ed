"""`tracekit rules list|show ID|validate FILE`: the rules in force, one rule, a user file.

``list`` prints the table of every rule (id, kind, file, what it decides) in load order, the
packaged ones and those of ``--rules FILE``; docs/rules.md holds the packaged table. ``show``
prints one rule in its YAML spelling with its kind and file (every kind that has the id).
``validate`` loads a user file on top of the packaged rules and says what it adds or
replaces; a bad file is the one-line error of any command (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.errors import ConfigError

_RULES = click.option("--rules", "rules_files", multiple=True,
                      type=click.Path(path_type=Path, dir_okay=False),
                      help="User rule file (YAML) on top of the packaged rules; repeatable.")


@click.group("rules")
def command() -> None:
    """The classification rules: list them, show one, validate a user file."""


@command.command("list")
@_RULES
def list_rules(rules_files: tuple[Path, ...]) -> None:
    """Every rule in force, in load order, as a Markdown table."""
    from tracekit.rules.catalog import entries, markdown_table
    from tracekit.rules.loader import rules_fingerprint, rules_version

    click.echo(markdown_table(entries(rules_files)), nl=False)
    if rules_files:
        click.echo(f"\nrules version {rules_version()}, fingerprint "
                   f"{rules_fingerprint(rules_files)}")


@command.command("show")
@click.argument("rule_id")
@_RULES
def show(rule_id: str, rules_files: tuple[Path, ...]) -> None:
    """One rule (every kind with this id) in its YAML spelling."""
    import yaml

    from tracekit.rules.catalog import describe, entries

    hits = [describe(e) for e in entries(rules_files) if e.id == rule_id]
    if not hits:
        raise ConfigError(f"no rule with id {rule_id!r} (see 'tracekit rules list')")
    click.echo(yaml.safe_dump_all(hits, sort_keys=False, width=100), nl=False)


@command.command("validate")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def validate(file: Path) -> None:
    """Load FILE on top of the packaged rules; print what it adds and replaces."""
    from tracekit.rules.catalog import KINDS, entries
    from tracekit.rules.loader import load_file, rules_fingerprint

    mine = load_file(file)
    entries([file])  # the whole set, with FILE's paths checked against it
    packaged = {(e.kind, e.id) for e in entries()}
    counts: list[str] = []
    replaced: list[str] = []
    for section, kind in KINDS.items():
        rules = getattr(mine, section)
        if rules:
            counts.append(f"{len(rules)} {kind}")
        replaced += [f"{kind} {r.id}" for r in rules if (kind, r.id) in packaged]
    click.echo(f"{file}: ok, {', '.join(counts) or 'no rules'}"
               + (f"; replaces {', '.join(replaced)}" if replaced else "")
               + f"; fingerprint {rules_fingerprint([file])}")
