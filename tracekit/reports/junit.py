"""JUnit XML of the CI checks: one testsuite, one testcase per check and scope (total, phase).

CI systems (GitHub Actions test reporters, GitLab, Jenkins) read this format. Messages are XML
-escaped by ElementTree; characters XML 1.0 forbids (control characters from a trace) are
dropped first. The output has no timestamps, so the same input gives the same bytes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from tracekit.model import Analysis
from tracekit.reports import checks as checks_mod
from tracekit.reports import json as json_report

_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def clean(text: str) -> str:
    return _XML_FORBIDDEN.sub("", str(text))


def from_results(results: list[checks_mod.CheckResult], suite: str = "tracekit.check") -> str:
    failures = checks_mod.failed(results)
    root = ET.Element("testsuites", name="tracekit", tests=str(len(results)),
                      failures=str(len(failures)), errors="0")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)),
                       failures=str(len(failures)), errors="0",
                       skipped=str(sum(r.skipped for r in results)))
    for r in results:
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.{clean(r.check)}",
                             name=clean(r.scope))
        if r.skipped:
            ET.SubElement(case, "skipped", message=clean(r.message))
        elif r.passed:
            ET.SubElement(case, "system-out").text = clean(r.message)
        else:
            fail = ET.SubElement(case, "failure", message=clean(r.message), type=r.check)
            fail.text = clean(f"{r.check} [{r.scope}]: {r.message}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def render(
    analysis: Analysis, *, results: list[checks_mod.CheckResult] | None = None,
    thresholds: checks_mod.Thresholds | None = None, **_options: Any,
) -> str:
    """The check results given, else those of ``thresholds`` (default: error findings only)."""
    if results is None:
        results = checks_mod.evaluate(json_report.build(analysis), thresholds)
    return from_results(results)
