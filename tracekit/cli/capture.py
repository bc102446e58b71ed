"""`tracekit capture`: profile a torch program (or a live server), then analyse the traces.

    tracekit capture [--out DIR] -- torchrun --nproc-per-node 4 train.py
    tracekit capture [--out DIR] -- python -m tracekit.workloads --tp 4
    tracekit capture --server http://127.0.0.1:30000 [--num-steps 5 | --duration 10]
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from tracekit.errors import ConfigError


def default_out() -> Path:
    return Path(f"tracekit-capture-{time.strftime('%Y%m%d-%H%M%S')}")


def analyze_folder(out: Path, hardware: str | None = None) -> None:
    """Run `tracekit analyze OUT` on the captured folder and print its summary."""
    from tracekit.cli import cli

    extra = ["--hardware", hardware] if hardware else []
    click.echo(f"\n$ tracekit analyze {out} {' '.join(extra)}".rstrip())
    cli.main(args=["analyze", str(out), *extra], prog_name="tracekit", standalone_mode=False)


def _describe(files: list[Path]) -> str:
    return ", ".join(f"{p.name} ({p.stat().st_size / 1e3:.0f} KB)" for p in files)


@click.command("capture", context_settings={"allow_interspersed_args": False})
@click.option("--out", "-o", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="folder for the per-rank traces (default: ./tracekit-capture-<time>); "
                   "must not hold traces already")
@click.option("--server", metavar="URL",
              help="profile a live SGLang/vLLM server through /start_profile instead of a "
                   "command; --out must be a folder the server can write")
@click.option("--num-steps", type=click.IntRange(min=1), default=None,
              help="server: forward steps to profile (default 5)")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None,
              help="server: profile this many seconds, then /stop_profile")
@click.option("--activities", default="CPU,GPU", show_default=True,
              help="profiler activities (GPU is used only where CUDA is present)")
@click.option("--with-stack/--no-stack", default=True, show_default=True)
@click.option("--record-shapes/--no-record-shapes", default=True, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="command: stop it after this many seconds; server: wait this long for "
                   "trace files (default 300)")
@click.option("--failed-grace", type=click.FloatRange(min=0), default=20.0, show_default=True,
              help="command: once a rank has failed, seconds before the remaining ranks are "
                   "stopped if the launcher has not stopped them")
@click.option("--settle", type=click.FloatRange(min=0), default=3.0, show_default=True,
              help="server: seconds the trace files must stop growing")
@click.option("--expect-files", type=click.IntRange(min=1), default=1, show_default=True,
              help="server: wait for at least this many trace files (one per rank)")
@click.option("--flight-recorder", is_flag=True,
              help="command: also record torch's Flight Recorder and write every rank's "
                   "dump (rank{r}.fr_trace.pkl) at exit, on an exception or a collective "
                   "timeout; read them with `tracekit hang OUT`")
@click.option("--analyze/--no-analyze", default=True, show_default=True,
              help="run `tracekit analyze` on the captured folder")
@click.option("--hardware", default=None, metavar="NAME|FILE",
              help="hardware profile passed to `tracekit analyze` (e.g. cpu-gloo, h200)")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(out: Path | None, server: str | None, num_steps: int | None,
            duration: float | None, activities: str, with_stack: bool, record_shapes: bool,
            timeout: float | None, failed_grace: float, settle: float, expect_files: int,
            flight_recorder: bool, analyze: bool, hardware: str | None,
            command: tuple[str, ...]) -> None:
    """Profile every rank of COMMAND (after --) or a live server, then analyse.

    COMMAND runs unchanged: an injected sitecustomize starts torch.profiler in each rank when
    torch.distributed initialises (CPU, record_shapes and with_stack on; GPU when CUDA is
    present) and writes rank{r}.trace.json.gz into --out when the rank ends. When a rank
    fails the others are stopped, the traces already written are kept, and the error names
    the rank and why.
    """
    acts = tuple(a.strip().upper() for a in activities.split(",") if a.strip())
    out = out or default_out()
    if server and command:
        raise ConfigError("give either --server URL or a command after --, not both")
    if server and flight_recorder:
        raise ConfigError("--flight-recorder applies to a command, not to --server")
    if server:
        from tracekit.capture.server import ServerCapture, capture_server

        if num_steps is not None and duration is not None:
            raise ConfigError("give --num-steps or --duration, not both")
        files = capture_server(ServerCapture(
            url=server, out_dir=out, num_steps=num_steps or 5, duration=duration,
            activities=acts, with_stack=with_stack, record_shapes=record_shapes,
            timeout=timeout or 300.0, settle=settle, expect_files=expect_files))
        click.echo(f"tracekit capture: {len(files)} trace file(s) from {server} in {out}: "
                   f"{_describe(files)}")
    else:
        from tracekit.capture.torch import CaptureOptions, run_command

        if not command:
            raise click.UsageError("give a command after -- (or --server URL)")
        result = run_command(list(command), out, CaptureOptions(
            with_stack=with_stack, record_shapes=record_shapes, activities=acts,
            timeout=timeout, failed_grace=failed_grace, flight_recorder=flight_recorder))
        click.echo(f"tracekit capture: {len(result.traces)} rank trace(s) in {out}: "
                   f"{_describe(result.traces)}")
    if analyze:
        analyze_folder(out, hardware)
