"""JUnit XML and Markdown: structure CI tools read, and escaping of every trace string."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from tracekit import reports
from tracekit.reports import checks, markdown

IMG = '"><img src=x onerror=alert(1)>'


def test_junit_has_one_testcase_per_check_and_phase(analysis):
    # GIVEN two checks over a run with 5 phases
    t = checks.Thresholds(max_exposed_comm_pct=20, min_efficiency=0.5)
    xml = reports.render("junit", analysis, thresholds=t)
    root = ET.fromstring(xml.split("?>", 1)[1])
    # WHEN parsed THEN 3 checks (error-findings always on) x (total + 5 phases) testcases
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 3 * 6
    assert root.get("tests") == "18"
    failures = root.findall("./testsuite/testcase/failure")
    assert root.get("failures") == str(len(failures)) and failures
    names = {(c.get("classname"), c.get("name")) for c in cases}
    assert ("tracekit.check.efficiency", "dispatch") in names


def test_junit_is_deterministic_and_escapes_messages(make_analysis):
    # GIVEN a finding message with a script and markup WHEN rendered twice
    a = make_analysis(evil="<script>alert(1)</script>\x07")
    t = checks.Thresholds(no_findings=True)
    first = reports.render("junit", a, thresholds=t)
    # THEN identical bytes, valid XML (control character dropped), no raw tag
    assert first == reports.render("junit", make_analysis(evil="<script>alert(1)</script>\x07"),
                                   thresholds=t)
    ET.fromstring(first.split("?>", 1)[1])
    assert "<script>" not in first


def test_markdown_escapes_html_and_table_syntax(make_analysis):
    # GIVEN a kernel/finding named with an HTML attack and a table pipe
    a = make_analysis(evil=IMG + " | **x**")
    out = reports.render("markdown", a, thresholds=checks.Thresholds(no_findings=True))
    # WHEN rendered THEN no raw tag survives and the pipe cannot split the table row
    assert "<img" not in out and "&lt;img src=x onerror=alert\\(1\\)&gt;" in out
    rows = [line for line in out.splitlines() if "onerror" in line and "unattributed" in line]
    assert rows
    for line in rows:
        assert len(re.findall(r"(?<!\\)\|", line)) == 8  # 7 finding columns, none split
        assert "\\*\\*x\\*\\*" in line


def test_markdown_contains_checks_and_sections(analysis):
    # GIVEN checks WHEN the Markdown is rendered THEN verdict, checks table and sections appear
    out = reports.render("markdown", analysis, thresholds=checks.Thresholds(min_efficiency=0.9))
    assert "### Checks:" in out and "**FAIL**" in out
    assert "### Time per phase" in out and "### Findings" in out


def test_escape_function_neutralises_markdown_and_html():
    # GIVEN hostile text WHEN escaped THEN entities and backslashes, on a single line
    assert markdown.escape("<b>x</b>\n|y|") == "&lt;b&gt;x&lt;/b&gt; \\|y\\|"
    assert markdown.escape("[a](javascript:alert(1))") == "\\[a\\]\\(javascript:alert\\(1\\)\\)"
