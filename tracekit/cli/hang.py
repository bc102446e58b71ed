"""`tracekit hang DIR`: why did the job hang? (Flight Recorder dumps of every rank)

Exit status: 1 when a desync or a mismatch is found, 0 when none, 2 on bad input.
JSON shape: docs/hang.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracekit.cli.topo import topology_from_kwargs, topology_options

if TYPE_CHECKING:
    from tracekit.hang import HangReport


def _safe(value: Any) -> str:
    """A dump's strings are data: control characters are escaped before printing."""
    text = "-" if value is None else str(value)
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _ranks(ranks: list[int]) -> str:
    return "[" + ", ".join(str(r) for r in ranks) + "]"


def _where(d: dict[str, Any]) -> str:
    return (f"{_safe(d['pg_desc'])} (pg {_safe(d['pg_name'])}), group {_safe(d['group'])}, "
            f"path {_safe(d['path'])}")


def render(report: HangReport, path: Path) -> str:
    lines = [f"tracekit hang {_safe(path)}: {len(report.ranks)} rank dump(s) "
             f"{_ranks(report.ranks)}, {report.communicators} communicator(s), "
             f"format {', '.join(report.versions) or '-'}"]
    for i, d in enumerate(report.desyncs):
        mark = " (likely cause)" if i == 0 and report.cause else ""
        lines.append(f"DESYNC{mark}: {_safe(d['op'])} seq {d['seq']} on {_where(d)}")
        lines.append(f"  entered by {_ranks(d['entered_ranks'])}; not entered by "
                     f"{_ranks(d['missing_ranks'])}")
    for b in report.blocked:
        lines.append(f"BLOCKED rank {b['rank']}: last entry {_safe(b['op'])} seq {b['seq']} on "
                     f"{_where(b)}")
        site = report.frames.get(b["rank"])
        if site:
            lines.append(f"  at {_safe(site)}")
    for m in report.mismatches:
        lines.append(f"MISMATCH seq {m['seq']} on {_safe(m['pg_desc'])} (pg "
                     f"{_safe(m['pg_name'])}), group {_safe(m['group'])}:")
        for f in m["fields"]:
            vals = "; ".join(f"{_ranks(v['ranks'])}: {_safe(v['value'])}" for v in f["values"])
            lines.append(f"  {f['field']}: {vals}")
    for name, ranks in report.no_dump.items():
        lines.append(f"note: no dump from member(s) {_ranks(ranks)} of {_safe(name)}")
    for f, why in report.skipped:
        lines.append(f"skipped {_safe(f)}: {_safe(why)}")
    if not report.found:
        lines.append("no desync and no mismatch: every member of every communicator reached "
                     "the same sequence id with matching ops")
    return "\n".join(lines) + "\n"


@click.command("hang")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              help="Write desyncs, blocked ranks and mismatches as JSON (docs/hang.md).")
@click.option("--rules", "rules_files", multiple=True,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Extra rule YAML file (repeatable), added to the packaged rules.")
@topology_options
def command(path: Path, json_out: Path | None, rules_files: tuple[Path, ...],
            **topo: Any) -> int:
    """Find the collective each communicator desynchronised at, from Flight Recorder dumps.

    PATH is a folder of per-rank dumps (rank{r}.fr_trace.pkl from `tracekit capture
    --flight-recorder`, torch's nccl_trace_rank_N, pickle or JSON) or one dump.
    """
    from tracekit.cli.analyze import atomic_write
    from tracekit.hang import hang

    report = hang(path, topology_from_kwargs(topo), tuple(rules_files))
    if json_out is not None:
        text = json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n"
        atomic_write(json_out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    click.echo(render(report, path), nl=False)
    return 1 if report.found else 0
