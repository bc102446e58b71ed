"""The `tracekit` command: one module per subcommand, registered in SUBCOMMANDS.

Each module defines ``command`` (a click.Command). Heavy imports (torch, bokeh, dask) stay
inside the command functions so that `tracekit --help` is fast.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click

from tracekit.errors import TracekitError
from tracekit.version import __version__

# subcommand -> module under tracekit.cli that defines it as ``command``; a module is imported
# only when its subcommand runs (or ``--help`` lists them all), so `tracekit analyze` does not
# load synth, capture or hang. A module that does not exist yet is skipped.
SUBCOMMANDS: dict[str, str] = {
    "analyze": "analyze",
    "topo": "topo",
    "capture": "capture",
    "calibrate": "calibrate",
    "check": "check",
    "diff": "diff",
    "export": "export",
    "synth": "synth",
    "hang": "hang",
    "schema": "schema_cmd",
    "rules": "rules_cmd",
}


def _load(name: str) -> click.Command | None:
    module_name = f"tracekit.cli.{SUBCOMMANDS[name]}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise
    command: click.Command = module.command
    return command


class _Commands(dict[str, click.Command]):
    """The group's commands, each imported on first lookup; iterating loads them all."""

    def __missing__(self, name: str) -> click.Command:
        command = _load(name) if name in SUBCOMMANDS else None
        if command is None:
            raise KeyError(name)
        self[name] = command
        return command

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def _all(self) -> None:
        for name in SUBCOMMANDS:
            self.get(name)

    def __iter__(self) -> Iterator[str]:
        self._all()
        return iter(list(dict.keys(self)))

    def keys(self) -> Any:
        self._all()
        return dict.keys(self)

    def values(self) -> Any:
        self._all()
        return dict.values(self)

    def items(self) -> Any:
        self._all()
        return dict.items(self)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def cli() -> None:
    """Attribute collectives in distributed LLM traces to groups and paths, and bound them."""


cli.commands = _Commands()


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


GC_THRESHOLDS = (20_000, 20, 20)  # gc.set_threshold of the command (CPython 3.11: 700, 10, 10)


def _exit_code(code: object) -> int:
    """The process exit status ``sys.exit(code)`` gives (a text is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run() -> None:
    """The ``tracekit`` command (console script and ``python -m tracekit``): :func:`main`,
    then the process ends without tearing the interpreter down.

    Freeing every module, table and frame one by one at exit took 0.2 to 0.25 s after an
    8-rank analysis (benchmarks/e2e.py), for nothing: the process ends anyway. The exit
    handlers still run (multiprocessing's, logging's, temporary folders') and stdout and
    stderr are flushed; with a thread other than the main one still alive the normal exit
    waits for it as usual. In-process callers (tests, ``main(argv)``) are not affected.
    The garbage collector runs less often (:data:`GC_THRESHOLDS`).
    """
    # the cyclic collector less often: the analysis and its reports make many short-lived
    # objects (frames, bokeh models) and few cycles; 337 young, 31 middle and 2 full
    # collections took 0.126 s CPU of an 8-rank analysis, 12 young ones 0.048 s with these
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        main()
    except SystemExit as exc:
        if threading.active_count() > 1:
            raise
        status = _exit_code(exc.code)
    else:  # pragma: no cover - main always exits
        status = 0
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (`tracekit ... | head`): nothing more to say
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
