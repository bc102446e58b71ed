"""`tracekit analyze PATH`: load a trace file or run directory and print a first summary.

Three separate steps so that the full pipeline and the reporters can be plugged in later:
``load_from_cli`` (options -> Run), ``compute`` (Run -> Summary) and the writers
(``render_text``, ``write_json``, ``write_parquet``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracekit.cli.topo import topology_from_kwargs, topology_options

if TYPE_CHECKING:
    import pyarrow as pa

    from tracekit.api import Analysis, AnalyzeOptions, LoadOptions, Run
    from tracekit.cache_derived import Hit
    from tracekit.io import Outputs
    from tracekit.summary import Summary


def load_options(
    cache_dir: Path | None, on_error: str, rank: int | None, jobs: int | None, progress: bool
) -> LoadOptions:
    from tracekit.api import LoadOptions

    return LoadOptions(rank=rank, cache_dir=cache_dir, on_error=on_error, jobs=jobs,
                       progress=progress)


def load_from_cli(path: Path, options: LoadOptions) -> Run:
    from tracekit.api import load

    return load(path, options)


def compute(run: Run) -> Summary:
    from tracekit.summary import summarize

    return summarize(run)


# ------------------------------------------------------------------ writers


def atomic_write(target: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file in the target's directory, then rename it into place
    (``tracekit.io.atomic_path``)."""
    from tracekit import io

    with io.atomic_path(target) as tmp:
        write(tmp)


def summary_dict(summary: Summary, path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"path": str(path)}
    for name, table in summary.tables().items():
        out[name] = table.to_pylist()
    out["skipped"] = [{"file": f, "reason": r} for f, r in summary.skipped]
    return out


def write_json(summary: Summary, path: Path, target: Path,
               outputs: Outputs | None = None) -> None:
    from tracekit import io

    text = json.dumps(summary_dict(summary, path), indent=2, sort_keys=True) + "\n"
    if outputs is None:
        io.write_file(target, text)
    else:
        outputs.write(target, text)


def write_parquet(events: pa.Table, target: Path, outputs: Outputs | None = None) -> None:
    import pyarrow.parquet as pq

    from tracekit import io

    with contextlib.ExitStack() as stack:
        plan = outputs if outputs is not None else stack.enter_context(io.Outputs())
        plan.write_with(target, lambda fh: pq.write_table(events, fh, compression="zstd"))


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f} ms"


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1000
    return f"{n} B"  # pragma: no cover


def sections(summary: Summary) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, as display strings."""
    from tracekit import schema as S

    ranks = [[str(r[S.RANK]), str(r[S.COUNT]), _ms(r[S.DUR_NS])]
             for r in summary.ranks.to_pylist()]
    kernels = [[str(r[S.RANK]), str(r[S.KERNEL_CLASS]), str(r[S.COUNT]), _ms(r[S.DUR_NS])]
               for r in summary.kernel_time.to_pylist()]
    comm = [[str(r[S.OP]), str(r[S.COUNT]),
             "-" if r[S.MSG_BYTES] is None else str(r[S.MSG_BYTES]),
             _human_bytes(r[S.MSG_BYTES]), _ms(r[S.DUR_NS])]
            for r in summary.comm.to_pylist()]
    return [
        ("ranks", ["rank", "events", "span"], ranks),
        ("kernel time by class", ["rank", "class", "kernels", "time"], kernels),
        ("communication by op", ["op", "count", "bytes", "size", "time"], comm),
    ]


def render_text(summary: Summary, path: Path) -> str:
    lines = [f"tracekit analyze {path}"]
    n = summary.ranks.num_rows
    lines.append(f"{n} rank{'s' if n != 1 else ''}")
    for title, header, rows in sections(summary):
        lines.append("")
        lines.append(title)
        if not rows:
            lines.append("  (none)")
            continue
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        fmt = "  " + "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}"
                               for i, w in enumerate(widths))
        lines.append(fmt.format(*header).rstrip())
        lines.extend(fmt.format(*r).rstrip() for r in rows)
    for f, reason in summary.skipped:
        lines.append(f"skipped {f}: {reason}")
    return "\n".join(lines) + "\n"


def render_rich(summary: Summary, path: Path) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    console.print(Text(f"tracekit analyze {path}", style="bold"))
    for title, header, rows in sections(summary):
        table = Table(title=title, title_justify="left")
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*(Text(c) for c in r))  # Text: trace strings are never markup
        console.print(table)
    for f, reason in summary.skipped:
        console.print(Text(f"skipped {f}: {reason}", style="yellow"))


# ------------------------------------------------------------------ pipeline


SUMMARY_TABLES = ("ranks", "kernel_time", "communication")


def full_analysis(run: Run, summary: Summary, options: AnalyzeOptions) -> Analysis:
    """Attribute and measure the run; the first summary's tables travel with the results, and
    the report digest (tracekit.reports.digest) is attached."""
    from tracekit.api import analyze_run
    from tracekit.reports import digest

    analysis = analyze_run(run, options)
    analysis.tables.update(summary.tables())
    digest.attach(analysis)
    return analysis


def cached_analysis(path: Path, load: LoadOptions, options: AnalyzeOptions,
                    fr_dir: Path | None, summary_only: bool) -> tuple[Hit | None, str | None]:
    """(the derived cache's hit or None, the key to store a fresh analysis under or None)."""
    if load.cache_dir is None or summary_only:
        return None, None
    from tracekit import cache_derived, progress

    key = cache_derived.derived_key(path, load, options, () if fr_dir is None else (fr_dir,))
    if key is None:
        return None, None
    hit = cache_derived.read(load.cache_dir, key)
    if hit is not None and hit.summary is None:
        hit = None  # not an entry of this command's
    if hit is not None:
        progress.note(f"derived results from the cache ({key})")
    return hit, key


def store_analysis(cache_dir: Path | None, key: str | None, analysis: Analysis,
                   summary: Summary) -> None:
    if cache_dir is None or key is None:
        return
    from tracekit import cache_derived

    cache_derived.write(cache_dir, key, analysis, summary)


def report_text(analysis: Analysis, color: bool) -> str:
    """The full report without the summary tables, which the first section already shows."""
    from tracekit import reports

    shown = dataclasses.replace(
        analysis, tables={k: v for k, v in analysis.tables.items() if k not in SUMMARY_TABLES})
    text = reports.render("text", shown, color=color)
    return text if isinstance(text, str) else text.decode()


def partitioned_analysis(path: Path, out: Path, load: LoadOptions,
                         options: AnalyzeOptions) -> Analysis:
    """The per-rank pipeline into a Parquet dataset partitioned by rank (tracekit.scale), then
    the cross-rank steps on the communication subset; memory stays about one rank per worker.
    The Analysis holds the cross-rank results, not the events."""
    from tracekit import schema as S
    from tracekit.api import Analysis, Run
    from tracekit.scale import analyze_partitioned, read_part

    res = analyze_partitioned(path, out, load=load, options=options)
    run = Run(events=S.empty(S.EVENTS),
              process_groups=S.conform(read_part(out, "groups", res.ranks), S.PROCESS_GROUPS),
              rank_info=S.conform(read_part(out, "info", res.ranks), S.RANK_INFO),
              skipped=res.skipped)
    analysis = Analysis(run=run, measured=res.measured, findings=res.findings,
                        tables={"stragglers": res.stragglers, "time_classes": res.classes})
    analysis.info["partitioned"] = str(out)
    return analysis


def flight_recorder_evidence(run: Run, path: Path, fr_dir: Path | None
                             ) -> tuple[Run, pa.Table | None]:
    """FR dumps (``fr_dir``, else those beside the traces) fill the communicator of trace
    collectives that name none; disagreements come back as FINDINGS."""
    from tracekit.parsers.flight_recorder import find_dumps, load_dumps
    from tracekit.parsers.flight_recorder.evidence import apply_flight_recorder

    if fr_dir is None and not (path.is_dir() and find_dumps(path)):
        return run, None
    return apply_flight_recorder(run, load_dumps(fr_dir or path).table)


def pa_concat(*tables: pa.Table | None) -> pa.Table:
    from tracekit.api import _concat_findings

    return _concat_findings(*tables)


def write_reports(analysis: Analysis, targets: dict[str, Path | None],
                  outputs: Outputs | None = None) -> None:
    """Every report of ``targets``; with ``outputs`` staged there, else written together."""
    from tracekit import io, reports

    with contextlib.ExitStack() as stack:
        plan = outputs if outputs is not None else stack.enter_context(io.Outputs())
        for name, target in targets.items():
            if target is not None:
                reports.stage(name, analysis, target, plan)


# ------------------------------------------------------------------ command


@click.command("analyze")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the results as JSON (documented keys, docs/json-report.md).")
@click.option("--parquet", "parquet_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the EVENTS table as Parquet to FILE.")
@click.option("--html", "html_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a self-contained HTML report (opens offline).")
@click.option("--markdown", "markdown_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown report.")
@click.option("--junit", "junit_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JUnit XML (one testcase per check and phase).")
@click.option("--hardware", default=None, metavar="NAME|FILE",
              help="Hardware profile for the alpha-beta bounds (h200, a100, ascend-910b, "
                   "cpu-gloo, ... or a YAML file).")
@click.option("--rules", "rules_files", multiple=True,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Extra rule YAML file (repeatable), added to the packaged rules.")
@topology_options
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Cache of parsed rank files and of the derived results (docs/cache.md): "
                   "another report of the same run skips parse, attribution and measure.")
@click.option("--on-error", type=click.Choice(["stop", "skip"]), default="stop",
              show_default=True, help="Stop at the first bad rank file, or skip it.")
@click.option("--rank", type=click.IntRange(min=0), default=None,
              help="Rank of a single trace file that does not say it.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Processes for parsing rank files (default: the cores).")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local",
              show_default=True, help="Run per-rank parsing in local processes or on Dask.")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="An existing Dask scheduler (with --engine dask).")
@click.option("--partitioned", "partitioned", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Large runs: analyse rank by rank into a Parquet dataset "
              "partitioned by rank in DIR (resumable); cross-rank steps read only the "
              "communication subset.")
@click.option("--flight-recorder", "fr_dir", type=click.Path(path_type=Path, exists=True),
              default=None, help="Flight Recorder dumps (default: those beside the traces) "
              "as evidence of the communicator of collectives that name none.")
@click.option("--summary-only", is_flag=True,
              help="Only parse and print the first summary (no attribution or bounds).")
def command(path: Path, json_out: Path | None, parquet_out: Path | None,
            html_out: Path | None, markdown_out: Path | None, junit_out: Path | None,
            hardware: str | None, rules_files: tuple[Path, ...],
            cache_dir: Path | None, on_error: str, rank: int | None, jobs: int | None,
            engine: str, scheduler: str | None, partitioned: Path | None, summary_only: bool,
            fr_dir: Path | None, **topo: Any) -> None:
    """Read a trace file or run directory: groups, paths, phases, bounds and findings."""
    from tracekit import progress
    from tracekit.api import AnalyzeOptions, LoadOptions
    from tracekit.cli.outputs import plan_outputs

    plan = plan_outputs(
        files={"json_out": json_out, "parquet_out": parquet_out, "html_out": html_out,
               "markdown_out": markdown_out, "junit_out": junit_out},
        folders={"partitioned": partitioned, "cache_dir": cache_dir},
        formats=[] if html_out is None else ["html"])
    layout = topo.get("layout")
    topology = topology_from_kwargs(topo)
    tty = sys.stdout.isatty()
    progress.enable(progress.wanted())
    options = LoadOptions(rank=rank, cache_dir=cache_dir, on_error=on_error, jobs=jobs,
                          progress=progress.enabled(), engine=engine, scheduler=scheduler)
    analyze_options = AnalyzeOptions(topology=topology, rules_files=tuple(rules_files),
                                     hardware=hardware, layout=layout)
    if partitioned is not None:
        analysis = partitioned_analysis(path, partitioned, options, analyze_options)
        with plan:
            write_reports(analysis, {"json": json_out, "html": html_out,
                                     "markdown": markdown_out, "junit": junit_out}, plan)
        click.echo(f"tracekit analyze {path}: {len(analysis.run.ranks)} ranks, "
                   f"partitioned into {partitioned}")
        click.echo(report_text(analysis, color=tty), nl=False)
        return
    hit, key = cached_analysis(path, options, analyze_options, fr_dir, summary_only)
    run = None
    if hit is None or parquet_out is not None:  # --parquet writes EVENTS: parse (cached) then
        with progress.stage("parse", bar=True):
            run = load_from_cli(path, options)
    with plan:
        if hit is not None and hit.summary is not None:
            summary, analysis = hit.summary, hit.analysis
        else:
            assert run is not None
            run, fr_findings = flight_recorder_evidence(run, path, fr_dir)
            summary = compute(run)
            if not summary_only:
                analysis = full_analysis(run, summary, analyze_options)
                if fr_findings is not None and fr_findings.num_rows:
                    analysis.findings = pa_concat(analysis.findings, fr_findings)
                store_analysis(cache_dir, key, analysis, summary)
        if summary_only:
            if json_out is not None:
                write_json(summary, path, json_out, plan)
        else:
            with progress.stage("reports"):
                write_reports(analysis, {"json": json_out, "html": html_out,
                                         "markdown": markdown_out, "junit": junit_out}, plan)
        if parquet_out is not None and run is not None:
            write_parquet(run.events, parquet_out, plan)
    if tty:
        render_rich(summary, path)
    else:
        click.echo(render_text(summary, path), nl=False)
    if not summary_only:
        click.echo("")
        click.echo(report_text(analysis, color=tty), nl=False)
