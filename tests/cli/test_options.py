"""Every subcommand that reads a run takes the same option group (layout, config, rules,
hardware, jobs, cache), with the same flags and help."""

from __future__ import annotations

import click
import pytest

from tracekit.cli import cli
from tracekit.cli.options import RUN_OPTION_NAMES

READERS = ("analyze", "check", "diff", "export")


def _options(name: str) -> dict[str, click.Option]:
    command = cli.commands[name]
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


@pytest.mark.parametrize("name", READERS)
def test_subcommand_has_the_shared_group(name: str) -> None:
    options = _options(name)
    missing = [n for n in RUN_OPTION_NAMES if n not in options]
    assert not missing, f"tracekit {name} lacks {missing}"
    # the same flags and help text as `tracekit analyze`
    reference = _options("analyze")
    for n in RUN_OPTION_NAMES:
        assert options[n].opts == reference[n].opts, (name, n)
        assert options[n].help == reference[n].help, (name, n)


def test_the_group_names_the_flags_the_issue_asks_for() -> None:
    flags = {f for o in _options("check").values() for f in o.opts}
    assert {"--layout", "--config", "--rules", "--hardware", "--jobs", "--cache-dir",
            "--tp"} <= flags
