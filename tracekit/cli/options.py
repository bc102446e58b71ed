"""The option group every subcommand that reads a run shares (analyze, check, diff, export):
how to lay the ranks out (``--layout``, ``--config`` and the parallel sizes of `tracekit topo`),
which rules and hardware profile to use, how many processes parse rank files, and the cache.

``run_options`` adds the options; ``RUN_OPTION_NAMES`` are their parameter names (tests check
every subcommand carries all of them, with the same flags and help).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tracekit.cli.topo import topology_options

# parameter names of the group (the topology options are those of `tracekit topo`)
RUN_OPTION_NAMES = ("hardware", "rules_files", "on_error", "cache_dir", "jobs", "config",
                    "layout", "tp", "dp", "ep")


def run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options to a click command."""
    fn = topology_options(fn)
    for deco in reversed([
        click.option("--hardware", default=None, metavar="NAME|FILE",
                     help="Hardware profile for the alpha-beta bounds (h200, a100, "
                          "ascend-910b, cpu-gloo, ... or a YAML file)."),
        click.option("--rules", "rules_files", multiple=True,
                     type=click.Path(path_type=Path, dir_okay=False, exists=True),
                     help="Extra rule YAML file (repeatable), added to the packaged rules."),
        click.option("--on-error", type=click.Choice(["stop", "skip"]), default="stop",
                     show_default=True, help="Stop at the first bad rank file, or skip it."),
        click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False),
                     help="Cache of parsed rank files and of the derived results (docs/cache.md): "
                          "another report or threshold on the same run skips the analysis."),
        click.option("--jobs", type=click.IntRange(min=1), default=None,
                     help="Processes for parsing rank files (default: the cores)."),
    ]):
        fn = deco(fn)
    return fn


def hardware_arg(hardware: str | None) -> str | Path | None:
    """A profile name, or the YAML file it names."""
    if hardware is not None and Path(hardware).is_file():
        return Path(hardware)
    return hardware


__all__ = ["RUN_OPTION_NAMES", "hardware_arg", "run_options"]
