"""Deterministic synthetic multi-rank Kineto traces of SGLang-style GPU runs, with ground truth.

``synth_run(SynthConfig(...), out_dir)`` writes ``<trace per rank>``, ``rank{r}.sidecar.json``
and ``manifest.json`` in the workload's format. See ``tracekit synth --help``.
"""

from tracekit.synth.config import ModelShape, SynthConfig
from tracekit.synth.run import synth_run

__all__ = ["ModelShape", "SynthConfig", "synth_run"]
