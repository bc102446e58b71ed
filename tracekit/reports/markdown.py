"""The Markdown report (GitHub step summaries, pull-request comments).

Every trace string goes through ``escape``: HTML-significant characters become entities and
Markdown punctuation is backslash-escaped, so a kernel named ``<img src=x onerror=...>`` or
``**x** | y`` shows as written and cannot break out of its table cell.
"""

from __future__ import annotations

import re
from typing import Any

from tracekit.model import Analysis
from tracekit.reports import checks as checks_mod
from tracekit.reports import fmt, views
from tracekit.reports import json as json_report

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def escape(text: str) -> str:
    """Text safe inside a Markdown paragraph or table cell."""
    flat = " ".join(str(text).split())
    html = "".join(_HTML.get(ch, ch) for ch in flat)
    return _MD_SPECIAL.sub(r"\\\1", html)


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub table; every cell already escaped by the caller."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def check_lines(results: list[checks_mod.CheckResult]) -> list[str]:
    mark = {True: "pass", False: "**FAIL**"}
    verdict = checks_mod.summary_line(results)
    rows = [[mark[r.passed], escape(r.check), escape(r.scope), escape(r.message)]
            for r in results]
    return [f"### Checks: {escape(verdict)}", "", *table(["", "check", "scope", "detail"], rows)]


def render(
    analysis: Analysis, *, results: list[checks_mod.CheckResult] | None = None,
    thresholds: checks_mod.Thresholds | None = None, title: str = "tracekit report",
    **_options: Any,
) -> str:
    """Summary, check results (given, or evaluated with ``thresholds``), then the tables."""
    if results is None and thresholds is not None:
        results = checks_mod.evaluate(json_report.build(analysis), thresholds)
    lines = [f"## {escape(title)}", ""]
    lines += table(["", ""], [[escape(k), escape(v)] for k, v in views.summary(analysis)])
    if results is not None:
        lines += ["", *check_lines(results)]
    for section in views.sections(analysis):
        lines += ["", f"### {escape(section.title)}", ""]
        if section.note:
            lines += [f"_{escape(section.note)}_", ""]
        headers = [escape(section.header(c)) for c in section.columns]
        rows = [[escape(fmt.cell(c, v)) for c, v in zip(section.columns, row, strict=True)]
                for row in section.frame[list(section.columns)].itertuples(index=False, name=None)]
        lines += table(headers, rows)
    return "\n".join(lines) + "\n"
