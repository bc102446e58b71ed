"""The terminal report: rich tables on a terminal, plain ASCII tables otherwise.

Trace strings reach rich only as ``rich.text.Text`` objects (never parsed as markup) or through
``rich.markup.escape``: a kernel named ``[bold red]x[/]`` or ``<script>`` prints as written.
The output depends only on the Analysis and the options (fixed width when not a terminal),
so the same input gives the same text byte for byte.
"""

from __future__ import annotations

import io
import sys
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tracekit.api import Analysis
from tracekit.reports import fmt, views

DEFAULT_WIDTH = 132  # columns when not on a terminal (a terminal's own width otherwise)
_RIGHT_SUFFIXES = ("_ns", "bytes", "count", "efficiency", "_gbps", "_pct", "rank", "kernels")


def _table(section: views.Section, color: bool) -> Table:
    table = Table(
        title=escape(section.title), caption=escape(section.note) if section.note else None,
        box=box.SIMPLE_HEAD if color else box.ASCII2, show_edge=not color,
        header_style="bold" if color else "", title_style="bold" if color else "",
        title_justify="left", caption_justify="left",
    )
    for col in section.columns:
        justify: Literal["left", "right"] = (
            "right" if col.endswith(_RIGHT_SUFFIXES) else "left")
        free = col in views.FREE_TEXT_COLUMNS
        table.add_column(Text(section.header(col)), justify=justify, no_wrap=not free,
                         overflow="fold" if free else "ellipsis")
    for row in section.frame[list(section.columns)].itertuples(index=False, name=None):
        table.add_row(*(Text(fmt.cell(c, v)) for c, v in zip(section.columns, row, strict=True)))
    return table


def render(
    analysis: Analysis, *, color: bool | None = None, width: int | None = None,
    extra_rows: int | None = views.EXTRA_ROWS, **_options: Any,
) -> str:
    """The report as text. ``color`` None: colour only when stdout is a terminal."""
    if color is None:
        color = sys.stdout.isatty()
    buf = io.StringIO()
    console = Console(
        file=buf, width=width or (None if color else DEFAULT_WIDTH), force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None, highlight=False, emoji=False,
        legacy_windows=False, soft_wrap=False,
    )
    head = Text("tracekit report", style="bold" if color else "")
    console.print(head)
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="cyan" if color else "")
    summary.add_column()
    for label, value in views.summary(analysis):
        summary.add_row(Text(label), Text(value))
    console.print(summary)
    for section in views.sections(analysis, extra_rows=extra_rows):
        console.print()
        console.print(_table(section, color))
    return buf.getvalue()
