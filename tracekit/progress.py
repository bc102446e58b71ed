"""Stage progress on a terminal: one line per long stage on stderr, nothing when not a TTY.

The CLI turns it on (:func:`enable`) only when stderr is a terminal; the API never does, so
library callers and pipes see nothing extra. Stages anywhere in tracekit wrap their work in
``with progress.stage("measure"):``; with progress off that costs a function call.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

_enabled = False
_depth = 0  # stages open now
_open = False  # a stage's start line waits for its time


def enable(on: bool) -> None:
    """Show stage lines from now on (``on``), or stop showing them."""
    global _enabled
    _enabled = bool(on)


def enabled() -> bool:
    return _enabled


def wanted() -> bool:
    """Whether stage progress belongs on stderr: only a terminal gets it."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def note(text: str) -> None:
    """A one-line remark among the stage lines (e.g. a cache hit)."""
    global _open
    if _enabled:
        sys.stderr.write(("\n" if _open else "") + f"  {text}\n")
        _open = False
        sys.stderr.flush()


@contextlib.contextmanager
def stage(name: str, bar: bool = False) -> Iterator[None]:
    """``name ...`` while the stage runs, then ``name  1.2 s`` (on the same line unless an inner
    stage or the stage's own progress bar, ``bar``, wrote in between)."""
    global _depth, _open
    if not _enabled:
        yield
        return
    indent = "  " * (_depth + 1)
    if _open:
        sys.stderr.write("\n")
    sys.stderr.write(f"{indent}{name} ...\n" if bar else f"{indent}{name} ...")
    sys.stderr.flush()
    _open = not bar
    _depth += 1
    start = time.perf_counter()
    try:
        yield
    finally:
        _depth -= 1
        took = f"{indent}{name:<12} {time.perf_counter() - start:6.1f} s\n"
        sys.stderr.write(("\r" if _open else "") + took)
        sys.stderr.flush()
        _open = False
