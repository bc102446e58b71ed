"""Measurement: time classes, exposed communication, alpha-beta bounds, cross-rank wait.

``measure_run(run, attributed, options) -> Analysis`` is the stage over a whole run
(tracekit.api.measure): its two halves, ``run.measure_ranks`` and ``run.cross_rank``, are what
the pipeline's measure and cross-rank stages run;
``bounds`` holds the pure formulas, ``hardware`` the link profiles, ``format_phase_table``
prints the per-phase table.

The two names are loaded on first use, so that importing a light submodule (the hardware
profile lookup, ``profile_source``, which keys a warm cached analysis) does not load pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracekit.measure.phasetable import format_phase_table
    from tracekit.measure.run import measure_run


def __getattr__(name: str) -> Any:
    if name == "format_phase_table":
        from tracekit.measure.phasetable import format_phase_table

        return format_phase_table
    if name == "measure_run":
        from tracekit.measure.run import measure_run

        return measure_run
    raise AttributeError(f"module 'tracekit.measure' has no attribute {name!r}")


__all__ = ["format_phase_table", "measure_run"]
