"""`tracekit check RUN`: CI gate. Exit 0 when every check passes, 1 with the failures listed.

RUN is a trace file or run directory (analysed here) or a JSON report written before (then
only its figures are checked). Results can also go to JUnit XML and Markdown; the Markdown is
appended to ``$GITHUB_STEP_SUMMARY`` when that variable is set (GitHub Actions job summary).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracekit.cli.options import hardware_arg, run_options
from tracekit.errors import CheckFailed, ConfigError

if TYPE_CHECKING:
    from tracekit.model import Analysis


analysis_options = run_options  # the shared group (tracekit.cli.options), old name


def analyze_path(path: Path, hardware: str | None = None, rules_files: tuple[Path, ...] = (),
                 on_error: str = "stop", cache_dir: Path | None = None,
                 topo: dict[str, Any] | None = None, jobs: int | None = None) -> Analysis:
    """The whole pipeline on a trace file or run directory (BadInputError when unreadable).
    ``topo``: the click kwargs of ``topology_options`` (popped here)."""
    from tracekit.cli.topo import topology_from_kwargs
    from tracekit.model import AnalyzeOptions, LoadOptions
    from tracekit.pipeline.request import Request, analyze_request

    topo = dict(topo or {})
    layout = topo.get("layout")
    topology = topology_from_kwargs(topo)
    load = LoadOptions(cache_dir=cache_dir, on_error=on_error, jobs=jobs)
    options = AnalyzeOptions(rules_files=tuple(rules_files), hardware=hardware_arg(hardware),
                             topology=topology, layout=layout)
    # the derived cache (tracekit.pipeline.cache): another threshold re-reads the results
    return analyze_request(Request(path, load, options, variant="check")).analysis


def read_json_report(path: Path) -> dict[str, Any] | None:
    """The report in ``path`` when it is a tracekit JSON report, else None (a trace)."""
    from tracekit.reports import json as json_report

    return json_report.sniff(path)


def step_summary() -> Path | None:
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(target) if target else None


def append_step_summary(markdown: str) -> Path | None:
    target = step_summary()
    if target is None:
        return None
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(markdown)
    return Path(target)


@click.command("check")
@click.argument("run", type=click.Path(path_type=Path, exists=True))
@click.option("--max-exposed-comm", "max_exposed", type=click.FloatRange(0, 100), metavar="PCT",
              help="Fail when exposed communication exceeds PCT % of busy time.")
@click.option("--min-efficiency", type=click.FloatRange(0), metavar="X",
              help="Fail when bound / transfer time is below X (run and each phase).")
@click.option("--max-wait", "max_wait", type=click.FloatRange(0, 100), metavar="PCT",
              help="Fail when wait for peers exceeds PCT % of communication time (run and "
                   "each phase; a straggler shows here, not in the efficiency).")
@click.option("--no-findings", is_flag=True,
              help="Fail on any finding of severity warning or error (errors always fail).")
@click.option("--baseline", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              metavar="OLD.json", help="JSON report of an earlier run to compare against.")
@click.option("--max-regression", type=click.FloatRange(0), metavar="PCT",
              help="With --baseline: fail when communication time per rank grows over PCT %.")
@click.option("--junit", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JUnit XML (one testcase per check and phase) to FILE.")
@click.option("--markdown", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown report to FILE (also appended to $GITHUB_STEP_SUMMARY).")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the JSON report (usable later as --baseline) to FILE.")
@analysis_options
def command(run: Path, max_exposed: float | None, min_efficiency: float | None,
            max_wait: float | None, no_findings: bool, baseline: Path | None,
            max_regression: float | None,
            junit: Path | None, markdown: Path | None, json_out: Path | None,
            hardware: str | None, rules_files: tuple[Path, ...], on_error: str,
            cache_dir: Path | None, jobs: int | None, **topo: Any) -> None:
    """Check RUN against thresholds; exit 1 listing the failing checks."""
    from tracekit.cli.outputs import plan_outputs
    from tracekit.reports import checks
    from tracekit.reports import json as json_report
    from tracekit.reports import junit as junit_mod
    from tracekit.reports import markdown as md

    if (baseline is None) != (max_regression is None):
        raise ConfigError("--baseline and --max-regression go together")
    plan = plan_outputs(files={"json_out": json_out, "junit": junit, "markdown": markdown},
                        folders={"cache_dir": cache_dir})
    plan.refuse_input(step_summary())
    report = read_json_report(run)
    analysis = None
    if report is None:
        analysis = analyze_path(run, hardware, rules_files, on_error, cache_dir, topo, jobs)
        report = json_report.build(analysis)
    thresholds = checks.Thresholds(
        max_exposed_comm_pct=max_exposed, min_efficiency=min_efficiency, no_findings=no_findings,
        max_regression_pct=max_regression, max_wait_pct=max_wait,
        baseline=json_report.read(baseline) if baseline is not None else None)
    results = checks.evaluate(report, thresholds)
    text = (md.render(analysis, results=results) if analysis is not None
            else "\n".join(md.check_lines(results)) + "\n")
    with plan:
        if json_out is not None:
            plan.write(json_out, json_report.dumps(report))
        if junit is not None:
            plan.write(junit, junit_mod.from_results(results))
        if markdown is not None:
            plan.write(markdown, text)
    append_step_summary(text)
    for r in results:
        if r.skipped:
            click.echo(f"SKIP {r.check} [{r.scope}]: {r.message}")
    for r in checks.failed(results):
        click.echo(f"FAIL {r.check} [{r.scope}]: {r.message}")
    click.echo(checks.summary_line(results))
    bad = checks.failed(results)
    if bad:
        names = sorted({r.check for r in bad})
        raise CheckFailed(f"{len(bad)} of {len(results)} checks failed ({', '.join(names)})",
                          run)
