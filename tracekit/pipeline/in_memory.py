"""The whole run in memory: the stages of tracekit.pipeline.stages over one Run in this process.

The stage functions here (:func:`load`, :func:`attribute`, :func:`measure`) are what
``tracekit.api`` exposes; :class:`InMemory` runs them as one execution, with the additions of
`tracekit analyze` (Flight Recorder evidence, the first summary) when asked. The stage modules
are imported when a stage runs, so that ``import tracekit.api`` does not load pandas and the
rules.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.model import Analysis, AnalyzeOptions, LoadOptions, Run
from tracekit.pipeline.stages import Execution, analyze, concat_findings

if TYPE_CHECKING:
    from tracekit.measure.run import RankMeasures
    from tracekit.rules.model import RuleSet
    from tracekit.summary import Summary


def load(path: Path, options: LoadOptions) -> Run:
    """Stage parse: a trace file or a run directory (Kineto or Ascend) into EVENTS."""
    from tracekit.parsers import load_run  # lazy: keeps `import tracekit.api` cheap

    return load_run(Path(path), options)


def attribute(run: Run, options: AnalyzeOptions) -> tuple[pa.Table, pa.Table]:
    """EVENTS -> (ATTRIBUTED, FINDINGS of the lints) through the topology and the rules."""
    from tracekit.rules.engine import attribute_run  # lazy: keeps `import tracekit.api` cheap

    return attribute_run(run, options)


def measure(run: Run, attributed: pa.Table, options: AnalyzeOptions) -> Analysis:
    """ATTRIBUTED -> MEASURED, PHASES and further tables (bounds, overlap, cross-rank)."""
    from tracekit.measure import measure_run  # lazy: keeps `import tracekit.api` cheap

    return measure_run(run, attributed, options)


def rules_of(options: AnalyzeOptions) -> RuleSet:
    from tracekit.rules.loader import load_rules  # lazy: keeps `import tracekit.api` cheap

    return load_rules(options.rules_files)


def infer_topology(run: Run, options: AnalyzeOptions) -> Any | None:
    """The topology the options give, else the one the run's process groups imply."""
    from tracekit.rules.engine import resolve_topology  # lazy: keeps `import tracekit.api` cheap

    return resolve_topology(run, options, rules_of(options))


class InMemory(Execution):
    """Every rank of the run in this process: EVENTS and ATTRIBUTED stay in the Analysis."""

    def __init__(self, options: AnalyzeOptions, *, source: Path | None = None,
                 load: LoadOptions | None = None, run: Run | None = None,
                 flight_recorder: Path | bool = False, summarize: bool = False,
                 scope: contextlib.ExitStack | None = None) -> None:
        """``source`` is read in stage parse, unless ``run`` was read already;
        ``flight_recorder``: Flight Recorder dumps as evidence of the communicator of trace
        collectives that name none (a folder, or True: those beside the traces);
        ``summarize``: the first summary (tracekit.summary) travels with the results;
        ``scope``: where the allocation policy of the steps after the parse is entered (see
        :meth:`_after_parse`), for a caller whose process ends once its reports are written
        (the CLI): closed there without giving the heap's free pages back; None: this
        execution's own, closed by :meth:`close`, which gives them back."""
        self.options = options
        self.scope = scope
        self._own_scope: contextlib.ExitStack | None = None
        self._heap_entered = False
        self.source, self.load_options = source, load or LoadOptions()
        self.run = run
        self.flight_recorder, self.summarize = flight_recorder, summarize
        self.summary: Summary | None = None
        self.fr_findings: pa.Table | None = None
        self.attributed: pa.Table | None = None
        self.units: pa.Table | None = None
        self.rules: RuleSet | None = None
        self.topology: Any | None = None
        self.rank_measures: RankMeasures | None = None
        self.analysis: Analysis | None = None
        self.findings_table: pa.Table | None = None

    def parse(self) -> None:
        if self.source is None:
            raise ValueError("InMemory: nothing to parse (no source given)")
        self.run = load(self.source, self.load_options)
        if self.flight_recorder is not False:
            self.run, self.fr_findings = flight_recorder_evidence(
                self.run, self.source,
                None if self.flight_recorder is True else Path(self.flight_recorder))
        self._after_parse()
        if self.summarize:
            from tracekit.summary import summarize  # lazy: keeps `import tracekit.api` cheap

            self.summary = summarize(self.run)

    def attribute(self) -> None:
        from tracekit.rules.engine import (  # lazy: see the module doc
            attribute_events,
            resolve_topology,
        )

        run = self._run()
        self._after_parse()
        # one topology for every stage: the rules, the lints and the cross-rank matching
        # (which fills the members of communicators whose trace rows lack them) must agree
        self.rules = rules_of(self.options)
        self.topology = resolve_topology(run, self.options, self.rules)
        self.options = dataclasses.replace(self.options, topology=self.topology)
        self.attributed, self.units = attribute_events(run, self.rules, self.topology)

    def measure(self) -> None:
        from tracekit.measure.run import measure_ranks  # lazy: see the module doc

        assert self.attributed is not None, "stage attribute first"
        # conformed once: the phase table of stage cross-rank reads this same ATTRIBUTED
        self.attributed = S.conform(self.attributed, S.ATTRIBUTED)
        self.rank_measures = measure_ranks(self.attributed)

    def cross_rank(self) -> None:
        from tracekit.measure.run import analysis_of, cross_rank  # lazy: see the module doc

        assert self.attributed is not None and self.rank_measures is not None, \
            "stage measure first"
        run, ranks = self._run(), self.rank_measures
        cross = cross_rank(ranks.comm, run, self.options)
        # from here on the Analysis holds ATTRIBUTED: no second reference
        attributed, self.attributed, self.rank_measures = self.attributed, None, None
        self.analysis = analysis_of(run, attributed, ranks, cross)

    def findings(self) -> None:
        from tracekit.rules.lints import run_lints  # lazy: see the module doc

        assert self.analysis is not None and self.units is not None, "stage cross-rank first"
        assert self.rules is not None
        lints = run_lints(self.units, self.rules, self.topology, self._run())
        self.units = None
        self.findings_table = concat_findings(lints, self.analysis.findings_table,
                                              self.fr_findings)

    def result(self) -> Analysis:
        assert self.analysis is not None, "stage findings first"
        self.analysis.findings_table = self.findings_table
        if self.summary is not None:
            self.analysis.extra_tables.update(self.summary.tables())
        if self.source is not None:
            self.analysis.source = str(self.source)
        return self.analysis

    def close(self) -> None:
        """Leave the allocation policy of the steps after the parse, where this execution
        entered it on a scope of its own."""
        own, self._own_scope = self._own_scope, None
        if own is not None:
            own.close()

    def _after_parse(self) -> None:
        """From the summary to the last report one allocation policy,
        tracekit.parsers.kineto.heap.reused_heap: freed blocks stay in glibc's heap for the
        next stage's temporaries, and numpy's large arrays get no huge pages. Each stage in a
        scope of its own (the attribute stage's) gave its heap back at the end and the next
        one faulted its pages in afresh: on the 8-rank synth run measure took 19k minor
        faults and 0.18-0.23 s of system time, under one scope 4-5k and 0.02 s."""
        if self._heap_entered:
            return
        from tracekit.parsers.kineto.heap import reused_heap  # lazy: see the module doc

        self._heap_entered = True
        if self.scope is not None:  # the caller's: its process ends after its reports
            self.scope.enter_context(reused_heap(trim=False))
        else:
            self._own_scope = contextlib.ExitStack()
            self._own_scope.enter_context(reused_heap())

    def _run(self) -> Run:
        assert self.run is not None, "stage parse first"
        return self.run


def flight_recorder_evidence(run: Run, path: Path, fr_dir: Path | None
                             ) -> tuple[Run, pa.Table | None]:
    """FR dumps (``fr_dir``, else those beside the traces) fill the communicator of trace
    collectives that name none; disagreements come back as FINDINGS."""
    from tracekit.parsers.flight_recorder import find_dumps, load_dumps  # lazy: module doc
    from tracekit.parsers.flight_recorder.evidence import apply_flight_recorder

    if fr_dir is None and not (path.is_dir() and find_dumps(path)):
        return run, None
    return apply_flight_recorder(run, load_dumps(fr_dir or path).table)


def analyze_run(run: Run, options: AnalyzeOptions | None = None) -> Analysis:
    """Every stage after parse over a Run already read."""
    return analyze(InMemory(options or AnalyzeOptions(), run=run), first="attribute")


def analyze_path(path: Path, load_options: LoadOptions | None = None,
                 options: AnalyzeOptions | None = None) -> Analysis:
    """Every stage over the trace file or run directory ``path``."""
    return analyze(InMemory(options or AnalyzeOptions(), source=Path(path), load=load_options))
