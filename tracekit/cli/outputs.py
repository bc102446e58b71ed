"""The output files of one subcommand: planned and checked before any work, written together.

    plan = plan_outputs(files={"json": json_out, "html": html_out}, folders={"parquet": d})
    ...                                   # the analysis
    with plan:
        plan.write(json_out, text)        # every target replaced only when all succeeded

The inputs are taken from the command's own parameters: every path-valued one that is not an
output (the trace or run directory, rule files, a config file, a baseline), plus
``--hardware`` when it names a file, so a report can never replace one of them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from tracekit.errors import ConfigError
from tracekit.io import Inputs, Outputs

# parameters that are written (or are caches), never read as inputs of the run
NOT_INPUTS = frozenset({"cache_dir", "partitioned", "out", "out_dir"})
# a parameter that is a name or a file
NAME_OR_FILE = frozenset({"hardware"})
# report format -> (extra, modules it needs)
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {"html": ("html", ("bokeh",))}


def _paths(value: Any) -> Iterable[Path]:
    if isinstance(value, Path):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _paths(v)


def command_inputs(outputs: Iterable[str] = ()) -> Inputs:
    """The input files named by the running command's parameters (the parameters named in
    ``outputs`` excepted)."""
    ctx = click.get_current_context(silent=True)
    params: Mapping[str, Any] = ctx.params if ctx is not None else {}
    skip = NOT_INPUTS | set(outputs)
    inputs = Inputs()
    for name, value in params.items():
        if name in skip:
            continue
        if name in NAME_OR_FILE and isinstance(value, str) and Path(value).is_file():
            inputs.add(value)
        for p in _paths(value):
            inputs.add(p)
    return inputs


def require_modules(what: str, extra: str, modules: Iterable[str]) -> None:
    """ConfigError naming ``extra`` when one of ``modules`` is not installed, before any work:
    ``<what> needs the '<extra>' extra (<modules> not installed): pip install ...``."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"{what} needs the '{extra}' extra ({', '.join(missing)} not "
                          f"installed): pip install 'tracekit[{extra}]'")


def require_extras(formats: Iterable[str]) -> None:
    """One line naming the missing extra, before any work (``--html`` without bokeh)."""
    for fmt in formats:
        if fmt in EXTRAS:
            extra, modules = EXTRAS[fmt]
            require_modules(f"--{fmt}", extra, modules)


def plan_outputs(files: Mapping[str, Path | None] = {},
                 folders: Mapping[str, Path | None] = {},
                 formats: Iterable[str] = (),
                 extra_inputs: Iterable[Path | None] = ()) -> Outputs:
    """Check every output of the command now; the returned plan writes them later.

    ``files`` and ``folders`` map the command's parameter names to their targets;
    ``formats`` are the report formats asked for (their extras must be installed)."""
    require_extras(formats)
    inputs = command_inputs([*files, *folders])
    for p in extra_inputs:
        inputs.add(p)
    plan = Outputs(inputs)
    for target in files.values():
        plan.file(target)
    for target in folders.values():
        plan.folder(target)
    return plan
