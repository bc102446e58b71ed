"""`tracekit diff A B`: two runs side by side per phase and path, and their findings.

A and B are trace files, run directories or JSON reports (``tracekit check --json``,
``tracekit export --json``). Times are per rank, so runs of different sizes compare.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tracekit.cli.check import analysis_options, analyze_path, read_json_report


def load_report(path: Path, **analysis_kw: Any) -> dict[str, Any]:
    """A JSON report as data: read as is, or built by analysing the run at ``path``."""
    report = read_json_report(path)
    if report is not None:
        return report
    from tracekit.reports import json as json_report

    return json_report.build(analyze_path(path, **analysis_kw))


@click.command("diff")
@click.argument("a", type=click.Path(path_type=Path, exists=True))
@click.argument("b", type=click.Path(path_type=Path, exists=True))
@click.option("--label-a", help="Name of run A in the output (default: its file name).")
@click.option("--label-b", help="Name of run B in the output (default: its file name).")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the differences as JSON to FILE.")
@click.option("--markdown", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the differences as Markdown to FILE.")
@analysis_options
def command(a: Path, b: Path, label_a: str | None, label_b: str | None, json_out: Path | None,
            markdown: Path | None, hardware: str | None, rules_files: tuple[Path, ...],
            on_error: str, cache_dir: Path | None, jobs: int | None, **topo: Any) -> None:
    """Compare run A (before) with run B (after): per phase, per path, findings."""
    from tracekit.cli.outputs import plan_outputs
    from tracekit.reports import diff as diff_mod
    from tracekit.reports import json as json_report

    plan = plan_outputs(files={"json_out": json_out, "markdown": markdown},
                        folders={"cache_dir": cache_dir})
    kw = {"hardware": hardware, "rules_files": rules_files, "on_error": on_error,
          "cache_dir": cache_dir, "topo": topo, "jobs": jobs}
    d = diff_mod.compare(load_report(a, **kw), load_report(b, **kw),
                         (label_a or a.name, label_b or b.name))
    with plan:
        if json_out is not None:
            plan.write(json_out, json_report.dumps(diff_mod.to_data(d)))
        if markdown is not None:
            plan.write(markdown, diff_mod.render_markdown(d))
    click.echo(diff_mod.render_text(d, color=sys.stdout.isatty()), nl=False)
