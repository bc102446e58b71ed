"""`tracekit export RUN`: write the analysis of RUN in other formats.

``--perfetto FILE`` writes Chrome trace-event JSON (Perfetto UI, chrome://tracing) with
tracekit's group, path, bound and efficiency in each event's args, plus phase and finding
tracks. ``--html``, ``--json``, ``--markdown`` and ``--parquet DIR`` write the other reports.
Every file is written to a temporary name first; all are renamed into place once every one
succeeded (``tracekit.io.Outputs``), and none may be an input of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.check import analysis_options, analyze_path
from tracekit.errors import ConfigError

_FILE = click.Path(path_type=Path, dir_okay=False)


@click.command("export")
@click.argument("run", type=click.Path(path_type=Path, exists=True))
@click.option("--perfetto", type=_FILE, help="Chrome/Perfetto trace JSON to FILE.")
@click.option("--html", type=_FILE, help="Self-contained HTML report to FILE.")
@click.option("--json", "json_out", type=_FILE, help="JSON report to FILE.")
@click.option("--markdown", type=_FILE, help="Markdown report to FILE.")
@click.option("--parquet", type=click.Path(path_type=Path, file_okay=False),
              help="Result tables as Parquet files in folder DIR (as analyze --parquet).")
@click.option("--parquet-events", is_flag=True,
              help="With --parquet: also write the raw EVENTS table (events.parquet).")
@analysis_options
def command(run: Path, perfetto: Path | None, html: Path | None, json_out: Path | None,
            markdown: Path | None, parquet: Path | None, parquet_events: bool,
            hardware: str | None,
            rules_files: tuple[Path, ...], on_error: str, cache_dir: Path | None,
            jobs: int | None, **topo: Any) -> None:
    """Analyse RUN and write it as Perfetto trace, HTML, JSON, Markdown or Parquet."""
    from tracekit import reports
    from tracekit.cli.outputs import plan_outputs

    targets = {"perfetto": perfetto, "html": html, "json": json_out, "markdown": markdown,
               "parquet": parquet}
    chosen = {name: path for name, path in targets.items() if path is not None}
    if not chosen:
        raise ConfigError("nothing to export: give --perfetto, --html, --json, --markdown "
                          "or --parquet")
    if parquet_events and parquet is None:
        raise ConfigError("--parquet-events needs --parquet DIR")
    plan = plan_outputs(
        files={"perfetto": perfetto, "html": html, "json_out": json_out, "markdown": markdown},
        folders={"parquet": parquet, "cache_dir": cache_dir}, formats=chosen)
    analysis = analyze_path(run, hardware, rules_files, on_error, cache_dir, topo, jobs)
    with plan:
        written = [reports.stage(name, analysis, path, plan,
                                 **({"events": parquet_events} if name == "parquet" else {}))
                   for name, path in chosen.items()]
    for path in written:
        click.echo(f"wrote {path}")
