"""Typed errors. The CLI maps each to one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path


class TracekitError(Exception):
    """Base class. ``exit_code`` is what the CLI returns."""

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = " ".join(self.message.split())
        return f"{self.path}: {text}" if self.path else text


class BadInputError(TracekitError):
    """The input file or directory cannot be read as a trace (exit 2)."""


class SchemaError(TracekitError):
    """A table lacks a column or has a mistyped one."""


class ConfigError(TracekitError):
    """A parallel config, rule file or hardware profile is invalid (exit 2)."""


class CheckFailed(TracekitError):
    """`tracekit check` found failing checks (exit 1)."""

    exit_code = 1


class CaptureError(TracekitError):
    """A captured program or server failed (exit 1 unless the program's own code is known)."""

    exit_code = 1
