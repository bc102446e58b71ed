"""The terminal's width, as the terminal report (tracekit.reports.text) lays itself out.

Standard library only: a warm `tracekit analyze --cache-dir` names its stored terminal report
by this width (tracekit.reports.memo) before, and without, loading rich or pandas.
"""

from __future__ import annotations

import os
import shutil
import sys

DEFAULT_WIDTH = 80  # columns when not on a terminal and $COLUMNS is unset


def terminal_width() -> int:
    """The terminal's width; not on a terminal: ``$COLUMNS`` when set, else 80."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    env = os.environ.get("COLUMNS", "")
    return int(env) if env.isdigit() and int(env) > 0 else DEFAULT_WIDTH


__all__ = ["DEFAULT_WIDTH", "terminal_width"]
