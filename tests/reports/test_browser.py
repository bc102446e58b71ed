"""The HTML report in a real browser (headless Debian chromium through chromedriver).

No console errors, every panel rendered, a hover shows its tooltip, and hostile kernel names
execute nothing. Skips with the reason where chromium/chromedriver are not installed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tracekit import reports
from tracekit import schema as s
from tracekit.reports import plotframes

pytestmark = pytest.mark.slow

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
PLOTS = ("timeline", "waterfall", "phases", "efficiency", "a2a")
PANELS = ("summary", "legend", *PLOTS, "findings", "paths")

RECORD_ALERTS = """
window.__tracekit_calls = [];
for (const name of ["alert", "confirm", "prompt"]) {
  window[name] = function (msg) { window.__tracekit_calls.push(name + ":" + String(msg)); };
}
"""
# every element of the page, shadow roots included (bokeh renders plots in shadow DOM)
ALL_ELEMENTS = """
const out = [];
const walk = (node) => {
  if (node.shadowRoot) walk(node.shadowRoot);
  for (const child of (node.children || [])) { out.push(child); walk(child); }
};
walk(document.documentElement);
"""


@pytest.fixture(scope="module")
def browser(chrome_driver: Any) -> Any:
    chrome_driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                  {"source": RECORD_ALERTS})
    return chrome_driver


@pytest.fixture(scope="module")
def report_page(analysis: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of the full analysis, written once for the tests that open it."""
    return reports.write("html", analysis, tmp_path_factory.mktemp("page") / "report.html")


def _open(driver: Any, path: Path, roots: tuple[str, ...]) -> None:
    """Load the page and wait until bokeh has a view for every named root."""
    driver.get(path.as_uri())
    deadline = time.monotonic() + 60
    script = """
      if (!window.Bokeh || !Bokeh.documents.length) return false;
      const doc = Bokeh.documents[0];
      try {
        return arguments[0].every((n) => {
          const m = doc.get_model_by_name('tracekit_' + n);
          return m != null && Bokeh.index.get_one(m) != null;
        });
      } catch (e) { return false; }"""
    while not driver.execute_script(script, list(roots)):
        assert time.monotonic() < deadline, "bokeh did not render the plots"
        time.sleep(0.2)


def _severe(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _hover(driver: Any, x: float, rank: int) -> str:
    """Move the pointer over the timeline at data (x ms, rank); return the tooltip text."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    driver.execute_script("document.getElementById('panel-timeline').scrollIntoView()")
    px, py = driver.execute_script("""
      const m = Bokeh.documents[0].get_model_by_name('tracekit_timeline');
      const v = Bokeh.index.get_one(m);
      const r = v.el.getBoundingClientRect();
      return [r.left + v.frame.x_scale.compute(arguments[0]),
              r.top + v.frame.y_scale.compute(arguments[1])];""", x, rank)
    action = ActionBuilder(driver)
    action.pointer_action.move_to_location(int(px), int(py))
    action.perform()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = driver.execute_script(ALL_ELEMENTS + """
          const tips = out.filter((e) => e.classList && e.classList.contains('bk-tooltip-content'));
          return tips.map((e) => e.textContent).join('\\n');""")
        if text:
            return str(text)
        time.sleep(0.2)
    return ""


def _widest(analysis: Any, name_part: str = "") -> tuple[float, int, str]:
    frame = plotframes.timeline(analysis).frame
    if name_part:
        frame = frame[frame[s.NAME].str.contains(name_part, regex=False)]
    x0, x1 = frame[plotframes.X0], frame[plotframes.X1]
    row = frame.assign(w=x1 - x0).sort_values("w").iloc[-1]
    return (row[plotframes.X0] + row[plotframes.X1]) / 2, int(row[s.RANK]), str(row[s.NAME])


def test_report_renders_without_console_errors(browser, report_page, tmp_path: Path):
    # GIVEN the HTML report of a full analysis
    page = report_page
    # WHEN chromium opens it offline
    _open(browser, page, PLOTS)
    # THEN the console has no error, every panel is there, every plot has a drawn canvas
    assert _severe(browser) == []
    ids = browser.execute_script(
        "return Array.from(document.querySelectorAll('section')).map((s) => s.id)")
    assert {f"panel-{p}" for p in PANELS} <= set(ids)
    sizes = browser.execute_script("""
      return arguments[0].map((n) => {
        const v = Bokeh.index.get_one(Bokeh.documents[0].get_model_by_name('tracekit_' + n));
        const r = v.el.getBoundingClientRect();
        return [r.width, r.height];
      });""", list(PLOTS))
    assert all(w > 300 and h >= 200 for w, h in sizes), sizes
    shot = tmp_path / "report.png"
    browser.set_window_size(1400, 2400)
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_hover_shows_the_collective_tooltip(browser, analysis, report_page):
    # GIVEN the report open in chromium
    _open(browser, report_page, PLOTS)
    x, rank, name = _widest(analysis)
    # WHEN the pointer rests on the widest kernel of the timeline
    text = _hover(browser, x, rank)
    # THEN its tooltip shows the kernel and tracekit's verdict on it
    assert name in text
    for label in ("op:", "bytes:", "group:", "path:", "efficiency:", "wait:"):
        assert label in text, text
    assert _severe(browser) == []


@pytest.mark.parametrize("payload", [SCRIPT, IMG])
def test_hostile_kernel_names_execute_nothing(browser, make_analysis, tmp_path: Path, payload):
    # GIVEN a run whose dispatch kernel, a thread and a finding are named with an XSS payload
    a = make_analysis(evil=payload)
    page = reports.write("html", a, tmp_path / "xss.html")
    # WHEN the page is opened and the hostile kernel is hovered (the tooltip renders its name)
    _open(browser, page, PLOTS)
    x, rank, _ = _widest(a, payload)
    text = _hover(browser, x, rank)
    # THEN nothing ran, no element was injected, and the name shows as plain text
    assert browser.execute_script("return window.__tracekit_calls") == []
    injected = browser.execute_script(ALL_ELEMENTS + """
      const runnable = (e) => e.tagName === 'SCRIPT' && (!e.type || e.type.includes('javascript'));
      return out.filter((e) => e.tagName === 'IMG' ||
        (runnable(e) && e.textContent.includes('alert(1)'))).length;""")
    assert injected == 0
    assert payload in text
    findings = browser.execute_script(ALL_ELEMENTS.replace("document.documentElement",
        "document.getElementById('panel-findings')") + """
      return out.map((e) => e.textContent).join(' ');""")
    assert payload in findings
    assert _severe(browser) == []


def test_sample_trace_report_in_the_browser(browser, sample_traces: Path, tmp_path: Path):
    # GIVEN the HTML report of a real sample run (4 gloo ranks, DP attention, gatherv + RSV)
    from tracekit import api
    from tracekit.reports import html as html_report

    a = api.analyze(sample_traces / "tp4_dp4_gatherv_rsv")
    panels = html_report.panels(a)
    plots = tuple(p.key for p in panels if p.plot is not None)
    assert "timeline" in plots
    page = reports.write("html", a, tmp_path / "sample.html")
    # WHEN chromium opens it and hovers the widest collective
    _open(browser, page, plots)
    x, rank, name = _widest(a)
    text = _hover(browser, x, rank)
    # THEN no console error, every panel is on the page, the tooltip describes the kernel
    assert _severe(browser) == []
    ids = browser.execute_script(
        "return Array.from(document.querySelectorAll('section')).map((s) => s.id)")
    assert ids == [f"panel-{p.key}" for p in panels]
    assert name in text and "path:" in text and "group:" in text and "wait:" in text


# per root: the glyph renderers whose data source has at least one row
GLYPHS = """
const doc = Bokeh.documents[0];
return arguments[0].map((n) => {
  const root = doc.get_model_by_name('tracekit_' + n);
  const seen = [];
  for (const m of doc._all_models.values()) {
    if (m.type === 'GlyphRenderer' || (m.constructor && m.constructor.name === 'GlyphRenderer')) {
      seen.push(m);
    }
  }
  const mine = seen.filter((r) => {
    let ok = false;
    root.references().forEach((x) => { if (x === r) ok = true; });
    return ok;
  });
  return mine.filter((r) => r.data_source.get_length() > 0).length;
});"""


def test_every_plot_draws_glyphs_and_tables_sort(browser, report_page):
    # GIVEN the report of a full analysis open in chromium
    _open(browser, report_page, PLOTS)
    # THEN each plot has glyph renderers with data, and nothing went to the console
    counts = browser.execute_script(GLYPHS, list(PLOTS))
    assert all(c > 0 for c in counts), dict(zip(PLOTS, counts, strict=True))
    assert _severe(browser) == []
    # WHEN the "n" heading of the paths table is clicked twice, THEN its rows are in
    # ascending then descending count order
    script = """
      const grid = document.getElementById('tracekit_paths_grid');
      const heads = Array.from(grid.tHead.rows[0].cells);
      const col = heads.findIndex((c) => c.textContent === 'n');
      const read = () => Array.from(grid.tBodies[0].rows).map(
        (r) => Number(r.cells[col].getAttribute('data-v')));
      heads[col].click();
      const up = read();
      heads[col].click();
      return [up, read(), read().length];"""
    up, down, n = browser.execute_script(script)
    assert n > 1 and up == sorted(up) and down == sorted(down, reverse=True) and up != down
    # WHEN text is typed in the findings filter THEN only matching rows stay
    from selenium.webdriver.common.by import By

    browser.execute_script("document.getElementById('panel-findings').scrollIntoView()")
    browser.find_element(By.ID, "tracekit_findings_filter").send_keys("straggler")
    deadline = time.monotonic() + 10
    rows = -1
    while time.monotonic() < deadline and rows != 1:
        rows = browser.execute_script("""
          const g = document.getElementById('tracekit_findings_grid');
          return Array.from(g.tBodies[0].rows).filter((r) => !r.hidden).length;""")
        time.sleep(0.2)
    assert rows == 1
    shown = browser.execute_script("""
      const g = document.getElementById('tracekit_findings_grid');
      return Array.from(g.tBodies[0].rows).filter((r) => r.offsetHeight > 0).length;""")
    assert shown == 1  # hidden rows take no space on the page
    assert _severe(browser) == []


def test_binned_timeline_hover_names_class_share_and_bin(browser, analysis, tmp_path: Path):
    # GIVEN a report whose timeline is binned (more kernels than the budget of 10)
    from tracekit.reports import plotframes_agg as agg

    page = reports.write("html", analysis, tmp_path / "binned.html", timeline_max=10)
    assert "Device busy time per rank and kernel class" in page.read_text()
    occ = agg.occupancy(analysis).frame
    row = occ.assign(w=occ[plotframes.X1] - occ[plotframes.X0],
                     h=occ[plotframes.Y1] - occ[plotframes.Y0]).sort_values("h").iloc[-1]
    # WHEN chromium opens it and the pointer rests on the tallest bar of a bin
    _open(browser, page, ("timeline",))
    x = (row[plotframes.X0] + row[plotframes.X1]) / 2
    y = (row[plotframes.Y0] + row[plotframes.Y1]) / 2
    text = _hover(browser, x, y)
    # THEN its tooltip says the class, the busy share in percent and the bin's bounds in
    # time units, as the bar's own figures
    assert f"class:{row[s.KERNEL_CLASS]}" in text.replace(" ", ""), text
    assert f"busy:{100 * row[agg.SHARE]:.0f}%" in text.replace(" ", ""), text
    assert "from:" in text and "to:" in text and ("ms" in text or "µs" in text), text
    assert _severe(browser) == []
