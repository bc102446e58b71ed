"""`tracekit analyze PATH`: analyse a trace file or run directory and print the report.

The options become one tracekit.pipeline.request.Request; the pipeline runs the stages (whole
run in memory, or ``--partitioned`` rank by rank) and the derived cache. What is here writes
the results: the reports (``write_reports``; ``--parquet`` is the Parquet reporter of
``export``), and with ``--summary-only`` the first summary (``render_text``, ``write_json``).
With ``--cache-dir``, a request whose every report (the terminal one included) is stored
(tracekit.reports.memo) is answered from those files alone (``stored_reports``): no stage,
no derived entry, no table library is loaded.
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

from tracekit.cli.options import hardware_arg, run_options
from tracekit.cli.topo import topology_from_kwargs
from tracekit.errors import ConfigError

if TYPE_CHECKING:
    from tracekit.io import Outputs
    from tracekit.model import Analysis
    from tracekit.pipeline.request import Request
    from tracekit.reports.memo import ReportMemo
    from tracekit.summary import Summary


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


def _time(ns: int | None) -> str:
    from tracekit.reports import fmt

    return fmt.duration(ns)


def _bytes(n: int | None) -> str:
    from tracekit.reports import fmt

    return fmt.nbytes(n)


def sections(summary: Summary) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, as display strings."""
    from tracekit import schema as S

    ranks = [[str(r[S.RANK]), str(r[S.COUNT]), _time(r[S.DUR_NS])]
             for r in summary.ranks.to_pylist()]
    kernels = [[str(r[S.RANK]), str(r[S.KERNEL_CLASS]), str(r[S.COUNT]), _time(r[S.DUR_NS])]
               for r in summary.kernel_time.to_pylist()]
    comm = [[str(r[S.OP]), str(r[S.COUNT]), _bytes(r[S.MSG_BYTES]), _time(r[S.DUR_NS])]
            for r in summary.comm.to_pylist()]
    out = [
        ("ranks", ["rank", "events", "span"], ranks),
        ("kernel time by class", ["rank", "class", "kernels", "time"], kernels),
        ("communication kernels by op (before attribution)", ["op", "kernels", "bytes", "time"],
         comm),
    ]
    return [section for section in out if section[2]]  # an empty table is not printed


def render_text(summary: Summary, path: Path) -> str:
    lines = [f"tracekit analyze {path}"]
    n = summary.ranks.num_rows
    lines.append(f"{n} rank{'s' if n != 1 else ''}")
    for title, header, rows in sections(summary):
        lines.append("")
        lines.append(title)
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


def without_summary(analysis: Analysis) -> Analysis:
    """``analysis`` less the first summary's tables: their per-kernel op counts are the
    trace's own (gloo runs reduce_scatter as an all_reduce), while the report counts
    collectives by the op that was called, from MEASURED; ``--json`` keeps them."""
    kept = {k: v for k, v in analysis.extra_tables.items() if k not in SUMMARY_TABLES}
    return dataclasses.replace(analysis, extra_tables=kept)


def text_options(color: bool, verbose: bool) -> dict[str, Any]:
    """The terminal report's options, as rendered and as its stored file is named."""
    from tracekit.reports.terminal import terminal_width

    return {"color": color, "verbose": verbose, "width": terminal_width()}


def report_text(analysis: Analysis, color: bool, verbose: bool = False,
                memo: ReportMemo | None = None) -> str:
    """The terminal report (tracekit.reports.text) without the first summary's tables."""
    from tracekit import reports

    if memo is None:
        text = reports.render("text", without_summary(analysis), color=color, verbose=verbose)
    else:
        text = memo.render("text", without_summary(analysis), **text_options(color, verbose))
    return text if isinstance(text, str) else text.decode()


def write_reports(analysis: Analysis, targets: dict[str, Path | None],
                  outputs: Outputs | None = None, *, events: bool = False,
                  memo: ReportMemo | None = None) -> None:
    """Every report of ``targets``; with ``outputs`` staged there, else written together.
    ``events``: the Parquet folder gets the EVENTS table too. ``memo``: the rendered
    reports kept in the cache (tracekit.reports.memo)."""
    from tracekit import io, reports
    from tracekit.reports import frames

    with contextlib.ExitStack() as stack:
        plan = outputs if outputs is not None else stack.enter_context(io.Outputs())
        stack.enter_context(frames.shared())  # the sums every report reads, once for all
        for name, target in targets.items():
            if target is None:
                continue
            if memo is not None and name != "parquet":
                plan.write(target, memo.render(name, analysis))
            else:
                extra = {"events": events} if name == "parquet" else {}
                reports.stage(name, analysis, target, plan, **extra)


def report_memo(request: Request, key: str | None) -> ReportMemo | None:
    """The rendered reports of ``request``'s derived cache entry ``key``, or None when the
    analysis is not cached (no ``--cache-dir``, ``--parquet``, ``--partitioned``, no key)."""
    from tracekit.reports.memo import ReportMemo

    cache_dir = request.load.cache_dir
    if key is None or cache_dir is None or not request.read_cache:
        return None
    return ReportMemo(Path(cache_dir), key)


def stored_reports(memo: ReportMemo, targets: dict[str, Path | None],
                   text: dict[str, Any]) -> tuple[dict[Path, bytes], bytes] | None:
    """Every report of ``targets`` and the terminal report (``text``: its options) as
    ``memo`` stored them, or None when one is not stored (then the analysis runs)."""
    out: dict[Path, bytes] = {}
    for name, target in targets.items():
        if target is None:
            continue
        data = memo.lookup(name, {})
        if data is None:
            return None
        out[target] = data
    terminal = memo.lookup("text", text)
    return None if terminal is None else (out, terminal)


# ------------------------------------------------------------------ command


@click.command("analyze")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the results as JSON (documented keys, docs/json-report.md).")
@click.option("--parquet", "parquet_out", type=click.Path(path_type=Path, file_okay=False),
              help="Write the result tables as Parquet files in folder DIR (as export "
                   "--parquet; docs/outputs.md).")
@click.option("--parquet-events", is_flag=True,
              help="With --parquet: also write the raw EVENTS table (events.parquet).")
@click.option("--html", "html_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a self-contained HTML report (opens offline).")
@click.option("--markdown", "markdown_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown report.")
@click.option("--junit", "junit_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JUnit XML (one testcase per check and phase).")
@run_options
@click.option("--rank", type=click.IntRange(min=0), default=None,
              help="Rank of a single trace file that does not say it.")
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
@click.option("-v", "--verbose", is_flag=True,
              help="Per-rank tables too (shown anyway on runs of up to 8 ranks).")
def command(path: Path, json_out: Path | None, parquet_out: Path | None,
            html_out: Path | None, markdown_out: Path | None, junit_out: Path | None,
            hardware: str | None, rules_files: tuple[Path, ...],
            cache_dir: Path | None, on_error: str, rank: int | None, jobs: int | None,
            engine: str, scheduler: str | None, partitioned: Path | None, summary_only: bool,
            fr_dir: Path | None, parquet_events: bool, verbose: bool = False,
            **topo: Any) -> None:
    """Read a trace file or run directory: groups, paths, phases, bounds and findings."""
    from tracekit import progress
    from tracekit.cli.outputs import plan_outputs
    from tracekit.model import AnalyzeOptions, LoadOptions
    from tracekit.pipeline import cache
    from tracekit.pipeline.request import Request, analyze_request, derived_key

    if parquet_events and parquet_out is None:
        raise ConfigError("--parquet-events needs --parquet DIR")
    if parquet_events and partitioned is not None:
        raise ConfigError(f"--parquet-events: with --partitioned the events are in the "
                          f"dataset {partitioned}")
    plan = plan_outputs(
        files={"json_out": json_out, "html_out": html_out,
               "markdown_out": markdown_out, "junit_out": junit_out},
        folders={"partitioned": partitioned, "cache_dir": cache_dir, "parquet_out": parquet_out},
        formats=[] if html_out is None else ["html"])
    layout = topo.get("layout")
    topology = topology_from_kwargs(topo)
    tty = sys.stdout.isatty()
    progress.enable(progress.wanted())
    request = Request(
        path, LoadOptions(rank=rank, cache_dir=cache_dir, on_error=on_error, jobs=jobs,
                          progress=progress.enabled(), engine=engine, scheduler=scheduler),
        AnalyzeOptions(topology=topology, rules_files=tuple(rules_files),
                       hardware=hardware_arg(hardware), layout=layout),
        variant="analyze", partitioned=partitioned, flight_recorder=fr_dir or True,
        summary_only=summary_only,
        read_cache=parquet_out is None)  # the whole ATTRIBUTED goes to --parquet: no hit
    # keyed once, before the inputs are read: the derived entry and its stored reports
    key = derived_key(request)
    memo = report_memo(request, key)
    reports_of = {"json": json_out, "html": html_out, "markdown": markdown_out,
                  "junit": junit_out}
    stored = stored_reports(memo, reports_of, text_options(tty, verbose)) \
        if memo is not None and parquet_out is None else None
    if stored is not None:
        # every report was rendered from this very analysis before: written as stored,
        # without reading the derived entry (no pyarrow, pandas, rich or bokeh)
        assert key is not None
        cache.stored_reports_hit(key)
        progress.note(f"reports from the cache ({key})")
        with plan:
            for target, data in stored[0].items():
                plan.write(target, data)
        click.echo(stored[1].decode(), nl=False)
        return
    with plan, contextlib.ExitStack() as stack:
        # the reports run under the stages' allocation policy (InMemory): one heap for all
        outcome = analyze_request(request, key, scope=stack)
        analysis, summary = outcome.analysis, outcome.summary
        if partitioned is not None or not summary_only:
            # the reports and the terminal one read the same sums (pandas is loaded by now)
            from tracekit.reports import frames

            stack.enter_context(frames.shared())
        if partitioned is not None:
            write_reports(analysis, {**reports_of, "parquet": parquet_out}, plan)
        elif summary_only:
            assert summary is not None
            if json_out is not None:
                write_json(summary, path, json_out, plan)
            # the summary's tables are the only results
            write_reports(analysis, {"parquet": parquet_out}, plan, events=parquet_events)
        else:
            with progress.stage("reports"):
                # the first summary's per-kernel tables go to --json only: every other
                # report counts collectives once, by the op that was called
                write_reports(analysis, {"json": json_out}, plan, memo=memo)
                write_reports(without_summary(analysis), {
                    "html": html_out, "markdown": markdown_out, "junit": junit_out}, plan,
                    memo=memo)
                # the same result tables as `export --parquet`
                write_reports(without_summary(analysis), {"parquet": parquet_out}, plan,
                              events=parquet_events)
        text = report_text(analysis, color=tty, verbose=verbose, memo=memo) \
            if partitioned is not None or not summary_only else None
    if partitioned is not None:
        click.echo(f"tracekit analyze {path}: {len(analysis.run.ranks)} ranks, "
                   f"partitioned into {partitioned}")
    if text is not None:  # the first summary's tables: --json only
        click.echo(text, nl=False)
    elif tty:
        assert summary is not None
        render_rich(summary, path)
    else:
        assert summary is not None
        click.echo(render_text(summary, path), nl=False)
