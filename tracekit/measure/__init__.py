"""Measurement: time classes, exposed communication, alpha-beta bounds, cross-rank wait.

``measure_run(run, attributed, options) -> Analysis`` is the stage over a whole run
(tracekit.api.measure): its two halves, ``run.measure_ranks`` and ``run.cross_rank``, are what
the pipeline's measure and cross-rank stages run;
``bounds`` holds the pure formulas, ``hardware`` the link profiles, ``format_phase_table``
prints the per-phase table.
"""

from __future__ import annotations

from tracekit.measure.phasetable import format_phase_table
from tracekit.measure.run import measure_run

__all__ = ["format_phase_table", "measure_run"]
