"""The `tracekit` command: one module per subcommand, registered in SUBCOMMANDS.

Each module defines ``command`` (a click.Command). Heavy imports (torch, bokeh, dask) stay
inside the command functions so that `tracekit --help` is fast.
"""

from __future__ import annotations

import importlib
import sys

import click

from tracekit.errors import TracekitError
from tracekit.version import __version__

# module name under tracekit.cli -> subcommand; a module that does not exist yet is skipped.
SUBCOMMANDS = (
    "analyze",
    "topo",
    "capture",
    "calibrate",
    "check",
    "diff",
    "export",
    "synth",
    "hang",
    "schema_cmd",
    "rules_cmd",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def cli() -> None:
    """Attribute collectives in distributed LLM traces to groups and paths, and bound them."""


def _register() -> None:
    for mod in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"tracekit.cli.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tracekit.cli.{mod}":
                continue
            raise
        cli.add_command(module.command)


_register()


def click_one_line(exc: click.ClickException) -> str:
    """click's error as one line: the message, then where to read the usage."""
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text += f" (see '{ctx.command_path} --help')"
    return text


def main(argv: list[str] | None = None) -> None:
    """Entry point: typed errors become one line on stderr and their exit code."""
    try:
        rv = cli.main(args=argv, prog_name="tracekit", standalone_mode=False)
    except TracekitError as exc:
        click.echo(f"tracekit: error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("tracekit: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("tracekit: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()  # `tracekit` or a group alone: its help, as click prints it
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"tracekit: error: {click_one_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)
