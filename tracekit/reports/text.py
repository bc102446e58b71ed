"""The terminal report: rich tables on a terminal, plain text otherwise.

Reading order: a headline (coverage, exposed communication, wait, efficiency, findings), the
slowest phases and paths against their bounds and the first findings -- the first screen --
then the detail: coverage per communicator, the full tables the first screen cut short, and
the extra tables (per-rank ones only with ``verbose`` or on runs of up to
``views.SMALL_RUN_RANKS`` ranks).

Every table fits the width (a terminal's own, else ``$COLUMNS``, else 80): label columns
(path, group, op, messages) wrap; figures never do, and a table too wide for the width
continues below with its label columns repeated, so no figure (``eff`` included) is cut.

Trace strings reach rich only as ``rich.text.Text`` objects (never parsed as markup): a
kernel named ``[bold red]x[/]`` or ``<script>`` prints as written.
The output depends only on the Analysis and the options (width 80 when not a terminal and
``$COLUMNS`` is unset), so the same input gives the same text byte for byte.
"""

from __future__ import annotations

import io
import sys
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import fmt, views
from tracekit.reports.terminal import DEFAULT_WIDTH, terminal_width

GAP = 2  # spaces between two columns
LABEL_MIN = 10  # a wrapping column is never squeezed below this many characters
KEYS = 2  # leading label columns repeated when a table continues below
KEY_MAX = 28  # a repeated label column's width before it wraps
# columns that wrap (labels and sentences); every other column holds a figure and never wraps
WRAP_COLUMNS = (s.PATH, s.GROUP, s.OP, s.PHASE, s.RULE_ID, s.PG_NAME, s.SIZE_SOURCE,
                s.MISSING_RANKS, s.RANKS, s.NAME, s.PG_DESC, s.LINK_CLASS, s.METHOD,
                *views.FREE_TEXT_COLUMNS)
_RIGHT_SUFFIXES = ("_ns", "bytes", "count", "efficiency", "_gbps", "_pct", "rank", "kernels",
                   "n_eff", "share")
# header underline, spaces between columns: plain ASCII without a terminal
PLAIN = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)


def _cells(section: views.Section) -> dict[str, list[str]]:
    frame = section.frame
    return {c: [fmt.short_cell(c, v) for v in frame[c].tolist()] if c in frame.columns else []
            for c in section.columns}


def _natural(section: views.Section, col: str, cells: list[str]) -> int:
    return max([len(section.header(col)), *(len(x) for x in cells)])


def _need(section: views.Section, cells: dict[str, list[str]], cols: list[str],
          squeeze: bool = True) -> int:
    """Columns' width: figures at their natural width, labels at LABEL_MIN (``squeeze``)."""
    widths = [min(_natural(section, c, cells[c]), LABEL_MIN if squeeze else KEY_MAX)
              if c in WRAP_COLUMNS else _natural(section, c, cells[c]) for c in cols]
    return sum(widths) + GAP * (len(cols) - 1)


def _columns(section: views.Section, cells: dict[str, list[str]], width: int
             ) -> list[tuple[str, ...]]:
    """Column sets that each fit ``width``. The section's optional columns go first while
    labels would wrap; then one set when the table fits, else the leading label columns
    repeated with as many figure columns as fit (in order)."""
    cols = list(section.columns)
    for optional in section.optional:
        if _need(section, cells, cols, squeeze=False) <= width:
            break
        cols.remove(optional)
    if _need(section, cells, cols) <= width:
        return [tuple(cols)]
    keys: list[str] = []
    for c in cols[:KEYS]:
        if c not in WRAP_COLUMNS and c != s.RANK:
            break
        keys.append(c)
    rest = [c for c in cols if c not in keys]
    base = _need(section, cells, keys, squeeze=False) if keys else -GAP
    out: list[tuple[str, ...]] = []
    current: list[str] = []
    used = base
    for c in rest:
        w = _need(section, cells, [c], squeeze=False) + GAP
        if current and used + w > width:
            out.append((*keys, *current))
            current, used = [], base
        current.append(c)
        used += w
    if current:
        out.append((*keys, *current))
    return out


def _numeric(cells: list[str]) -> bool:
    """Every cell a plain number or the dash (counts that arrive as text)."""
    shown = [c.replace(",", "").replace(".", "", 1) for c in cells if c != fmt.DASH]
    return bool(shown) and all(c.isdigit() for c in shown)


def _table(section: views.Section, cells: dict[str, list[str]], columns: tuple[str, ...],
           color: bool) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD if color else PLAIN, show_edge=False, padding=(0, 1),
        pad_edge=False, collapse_padding=True,
        header_style="bold" if color else "",
    )
    for col in columns:
        justify: Literal["left", "right"] = (
            "right" if col.endswith(_RIGHT_SUFFIXES) or _numeric(cells[col]) else "left")
        wrap = col in WRAP_COLUMNS
        natural = _natural(section, col, cells[col])
        table.add_column(Text(section.header(col)), justify=justify, no_wrap=not wrap,
                         overflow="fold", min_width=None if wrap else natural)
    for i in range(len(section.frame)):
        table.add_row(*(Text(cells[c][i]) for c in columns))
    return table


# a label breaks after one of these before it is cut anywhere: first where its parts meet
# (``combine.`` / ``b_reduce_scatterv``), then between words
_BREAKS = ("./:", "_-, ")


def _break(label: str, width: int) -> str:
    """``label`` on lines of at most ``width`` characters, broken after a separator where one
    falls in the line (``combine.`` / ``b_reduce_scatterv``), else at ``width``."""
    lines: list[str] = []
    rest = label
    while len(rest) > width:
        cut = 0
        for seps in _BREAKS:  # a break that keeps at least a third of the line
            cut = max(rest.rfind(sep, 1, width) for sep in seps)
            if cut + 1 >= width / 3:
                break
        cut = cut + 1 if cut + 1 >= width / 3 else width
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return "\n".join([*lines, rest])


def _wrapped(section: views.Section, cells: dict[str, list[str]], columns: tuple[str, ...],
             width: int) -> dict[str, list[str]]:
    """``cells`` with the label columns broken at separators so that ``columns`` fit
    ``width``: the widest labels give up characters first, none below LABEL_MIN."""
    natural = {c: _natural(section, c, cells[c]) for c in columns}
    excess = sum(natural.values()) + GAP * (len(columns) - 1) - width
    widths = dict(natural)
    while excess > 0:
        wrap = [c for c in columns if c in WRAP_COLUMNS and widths[c] > LABEL_MIN]
        if not wrap:
            break
        widest = max(wrap, key=lambda c: widths[c])
        widths[widest] -= 1
        excess -= 1
    # identifiers only: text with spaces (a finding's message) is word-wrapped by rich
    return {c: ([x if " " in x else _break(x, widths[c]) for x in v]
                if c in columns and widths[c] < natural[c] else v) for c, v in cells.items()}


def _print_section(console: Console, section: views.Section, color: bool, width: int) -> None:
    cells = _cells(section)  # formatted once: _wrapped returns new lists, never edits these
    chunks = _columns(section, cells, width)
    for i, columns in enumerate(chunks):
        wrapped = _wrapped(section, cells, columns, width)
        title = section.title if i == 0 else f"{section.title} (continued)"
        console.print()
        console.print(Text(title, style="bold" if color else ""))
        console.print(_table(section, wrapped, columns, color))
    if section.note:
        console.print(Text(section.note, style="dim" if color else ""))


def render(
    analysis: Analysis, *, color: bool | None = None, width: int | None = None,
    extra_rows: int | None = views.EXTRA_ROWS, verbose: bool = False, **_options: Any,
) -> str:
    """The report as text. ``color`` None: colour only when stdout is a terminal;
    ``width`` None: ``terminal_width()``."""
    if color is None:
        color = sys.stdout.isatty()
    width = width or terminal_width()
    buf = io.StringIO()
    console = Console(
        file=buf, width=width, force_terminal=color, no_color=not color,
        color_system="standard" if color else None, highlight=False, emoji=False,
        legacy_windows=False, soft_wrap=False,
    )
    console.print(Text("tracekit report", style="bold" if color else ""))
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="cyan" if color else "", no_wrap=True)
    summary.add_column(overflow="fold")
    for label, value in views.headline(analysis):
        summary.add_row(Text(label), Text(value))
    console.print(summary)
    for section in views.first_screen(analysis):
        _print_section(console, section, color, width)
    rest, left_out = views.detail(analysis, verbose=verbose, extra_rows=extra_rows)
    if rest:
        console.print()
        console.rule(Text("detail"), characters="-" if not color else "─")
    for section in rest:
        _print_section(console, section, color, width)
    if left_out:
        console.print()
        console.print(Text(f"per-rank tables not shown for {len(views.frames.ranks(analysis))} "
                           f"ranks (--verbose shows them): {', '.join(left_out)}"))
    text = buf.getvalue()
    if not color:  # rich pads titles and captions to the width
        text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    return text


__all__ = ["DEFAULT_WIDTH", "render", "terminal_width"]


