"""`tracekit calibrate`: measure gloo's alpha and beta here and write a cpu-gloo profile."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("calibrate")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Profile file to write (default: $XDG_CONFIG_HOME/tracekit/hardware/"
                   "cpu-gloo.yaml, which `--hardware cpu-gloo` then uses).")
@click.option("--iters", type=click.IntRange(3, 1000), default=15, show_default=True,
              help="Timed repetitions per message size.")
@click.option("--max-bytes", type=click.IntRange(1024, 1 << 30), default=4 << 20,
              show_default=True, help="Largest message of the sweep.")
@click.option("--name", default="cpu-gloo", show_default=True, help="Profile name.")
def command(out: Path | None, iters: int, max_bytes: int, name: str) -> None:
    """Run a short 2-process gloo ping-pong and all-reduce sweep on 127.0.0.1, fit alpha and
    beta, write the profile and print it."""
    from tracekit import io
    from tracekit.cli.outputs import require_modules

    # torch runs the sweep: without it, one line at once (not a timed-out sweep)
    require_modules("calibrate", "capture", ("torch",))
    from tracekit.measure import calibrate

    # the target is checked before the sweep (a missing folder is created when written)
    io.check_file(out or calibrate.user_config_dir() / f"{name}.yaml", make_parents=True)
    sizes = tuple(s for s in calibrate.DEFAULT_SIZES if s <= max_bytes) or (max_bytes,)
    result = calibrate.sweep(sizes, iters)
    document = calibrate.profile_from_sweep(result, name=name)
    path = calibrate.write_profile(document, out)
    click.echo(f"# written to {path}")
    click.echo(calibrate.dump(document), nl=False)
