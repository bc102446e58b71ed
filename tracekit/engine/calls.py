"""What every engine shares: a picklable call whose TracekitErrors come back as data, the
default job count, and the progress bar of a map."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tracekit.errors import TracekitError


@dataclass(frozen=True)
class Failure:
    """A TracekitError captured in a worker, carried back as plain data (always picklable)."""

    module: str
    qualname: str
    message: str
    path: str | None

    def rebuild(self) -> TracekitError:
        cls: type[TracekitError] = TracekitError
        with contextlib.suppress(Exception):
            found = getattr(importlib.import_module(self.module), self.qualname)
            if isinstance(found, type) and issubclass(found, TracekitError):
                cls = found
        try:
            return cls(self.message, self.path)
        except TypeError:  # a subclass with another constructor
            return TracekitError(self.message, self.path)


@dataclass(frozen=True)
class Call:
    """A picklable callable wrapping ``func``: TracekitErrors come back as :class:`Failure`."""

    func: Callable[[Any], Any]

    def __call__(self, item: Any) -> Any:
        try:
            return self.func(item)
        except TracekitError as exc:
            return Failure(type(exc).__module__, type(exc).__qualname__, exc.message, exc.path)


def unwrap(result: Any) -> Any:
    """Raise the TracekitError a worker captured, or return its result unchanged."""
    if isinstance(result, Failure):
        raise result.rebuild()
    return result


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)



@contextlib.contextmanager
def progress_bar(total: int, label: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr when ``enabled`` and stderr is a terminal; the callable
    it yields advances the bar by its argument."""
    if not enabled or total <= 1 or not sys.stderr.isatty():
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(_escape(label), total=total)
        yield lambda n: bar.advance(task, n)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
