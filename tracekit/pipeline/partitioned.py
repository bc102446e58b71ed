"""Many ranks in bounded memory: the stages rank by rank into a Parquet dataset (issue 8).

The rank-local stages (parse -> attribute with rank-local evidence -> the rank's own measures)
run per task in workers (:func:`tracekit.engine.map_per_rank`, the local process pool or Dask;
tracekit.pipeline.per_rank), each rank written to its parts (tracekit.pipeline.parts). The
run-wide stages (cross-rank, findings) then read only the small parts
(tracekit.pipeline.across_ranks); with LINTS_BESIDE_UNITS set, the lints of stage findings
of a large run go to a worker of their own beside the cross-rank half
(tracekit.engine.beside), as the two read different parts. Stage order and progress are
tracekit.pipeline.stages'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from tracekit import schema as S
from tracekit.engine import Beside, beside, default_jobs, map_per_rank
from tracekit.errors import BadInputError
from tracekit.measure.run import CrossRanked
from tracekit.model import Analysis, AnalyzeOptions, LoadOptions, Run
from tracekit.parsers import trace_files
from tracekit.pipeline import across_ranks
from tracekit.pipeline.batches import BATCH_FILES, BatchTask, RankDone, disk_bytes, plan_batches
from tracekit.pipeline.parts import ranks_written, read_part, remove_stale_temporaries
from tracekit.pipeline.per_rank import process_batch
from tracekit.pipeline.stages import Execution, concat_findings, execute
from tracekit.rules.engine import resolve_topology
from tracekit.rules.loader import load_rules
from tracekit.rules.model import RuleSet

# from this many collective units on (a partitioned run's comm rows), the lints run in a
# worker of their own beside the cross-rank stage; None: never (the default). Both halves
# then hold their peak at once: on the 64 x 50 MB benchmark (588,800 units) about 0.72 GB
# each, 1.44 to 1.50 GB for the tree against the 1.5 GB target, to save the lints' ~3 s of
# the tail (docs/performance.md). Worth it once the lints' frames are smaller.
LINTS_BESIDE_UNITS: int | None = None


class Partitioned(Execution):
    """Rank by rank into the dataset ``out``; the Analysis holds the cross-rank results, not
    the events (they stay in ``out/events``)."""

    # a worker parses, attributes and measures each rank of its task in one go
    inside: ClassVar[dict[str, str]] = {"attribute": "parse", "measure": "parse"}

    def __init__(self, source: Path, out: Path, options: AnalyzeOptions,
                 load: LoadOptions | None = None, *, keep_events: bool = True,
                 attribute: bool = True, batch_files: int = BATCH_FILES) -> None:
        """``load.engine`` / ``load.jobs`` / ``load.scheduler`` choose where the tasks run;
        ``batch_files`` caps the files of one task (1: a task per file); ``attribute=False``:
        no rules, kernel classes from the parser's op column."""
        self.source, self.out = Path(source), Path(out)
        self.options, self.load = options, load or LoadOptions()
        self.keep_events, self.attribute_ranks, self.batch_files = (
            keep_events, attribute, batch_files)
        self.done: list[RankDone] = []
        self.skipped: list[tuple[str, str]] = []
        self.ranks: list[int] = []
        self.info = Run(S.empty(S.EVENTS), S.empty(S.PROCESS_GROUPS), S.empty(S.RANK_INFO))
        self.rules: RuleSet | None = None
        self.topology: Any = None
        self.cross: CrossRanked | None = None
        self.findings_table: pa.Table | None = None
        self._lints: Beside[pa.Table] | None = None

    @classmethod
    def reopen(cls, out: Path, options: AnalyzeOptions,
               ranks: list[int] | None = None) -> Partitioned:
        """The dataset an earlier run wrote in ``out``, ready for the run-wide stages."""
        ex = cls(out, out, options)
        ex.ranks = ranks_written(out) if ranks is None else list(ranks)
        return ex

    def parse(self) -> None:
        """The per-rank tasks (parse, attribute, measure; written to the parts)."""
        src, out = self.source, self.out
        if not src.exists():
            raise BadInputError("no such file or directory", src)
        files = trace_files(src) if src.is_dir() else [src]
        if not files:
            raise BadInputError("no trace files in this directory", src)
        if out.is_dir():
            remove_stale_temporaries(out)
        forced = self.load.rank if not src.is_dir() else None
        tasks = [BatchTask(tuple(str(f) for f in batch), str(out), forced, self.options,
                           self.load.on_error, self.keep_events, self.attribute_ranks)
                 for batch in plan_batches(files, self.load.jobs or default_jobs(),
                                           max_files=self.batch_files)]
        # sizes: a small run (INLINE_MAX_BYTES) runs in this process unless --jobs asks for
        # workers, as a small in-memory run does: a pool would cost more than it saves
        self.done = [d for batch in map_per_rank(
            process_batch, tasks, engine=self.load.engine, jobs=self.load.jobs,
            scheduler=self.load.scheduler, progress=self.load.progress, label="ranks",
            weights=[len(t.paths) for t in tasks],
            sizes=[disk_bytes(t.paths) for t in tasks]) for d in batch]
        self.skipped = [(d.source, d.error) for d in self.done if d.error is not None]
        self.ranks = _distinct_ranks(self.done, src)

    def cross_rank(self) -> None:
        self.info = across_ranks.run_info(self.out, self.ranks)
        # one topology for the whole run, from every rank's process groups
        self.rules = load_rules(self.options.rules_files)
        self.topology = resolve_topology(self.info, self.options, self.rules)
        # the lints read the units parts only: on a large run they start now, beside this
        self._lints = beside(across_ranks.lints_task, across_ranks.LintTask(
            str(self.out), tuple(self.ranks), self.rules, self.topology, self.info),
            separate=self._lints_beside())
        try:
            self.cross = across_ranks.match_and_bound(self.out, self.ranks, self.info,
                                                      self.topology, self.options)
        except BaseException:
            self._lints.close()
            raise

    def _lints_beside(self) -> bool:
        """Whether the lints get a worker of their own: local engine, more than one job
        and a run with at least LINTS_BESIDE_UNITS collective units (None: never)."""
        if LINTS_BESIDE_UNITS is None:
            return False
        jobs = self.load.jobs or default_jobs()
        units = sum(d.comm_rows for d in self.done if d.error is None)
        return self.load.engine == "local" and jobs > 1 and units >= LINTS_BESIDE_UNITS

    def findings(self) -> None:
        assert self.cross is not None and self._lints is not None, "stage cross-rank first"
        lints, self._lints = self._lints.result(), None
        self.findings_table = concat_findings(lints, self.cross.findings)

    def result(self) -> Analysis:
        assert self.cross is not None, "stage findings first"
        run = Run(events=S.empty(S.EVENTS), process_groups=self.info.process_groups,
                  rank_info=self.info.rank_info, skipped=self.skipped)
        analysis = Analysis(run=run, measured=self.cross.measured,
                            findings_table=self.findings_table,
                            extra_tables={"stragglers": self.cross.stragglers,
                                          "time_classes": read_part(self.out, "classes",
                                                                    self.ranks)})
        analysis.info["partitioned"] = str(self.out)
        analysis.source = str(self.source)
        return analysis


def _distinct_ranks(done: list[RankDone], src: Path) -> list[int]:
    """The ranks the tasks made, each from one file (BadInputError: none, or one twice)."""
    good = [d for d in done if d.error is None and d.rank is not None]
    if not good:
        raise BadInputError("no readable trace file", src)
    seen: dict[int, str] = {}
    for d in good:
        rank = int(d.rank)  # type: ignore[arg-type]  # not None in ``good``
        if rank in seen:
            raise BadInputError(f"rank {rank} appears twice ({Path(seen[rank]).name} and "
                                f"{Path(d.source).name})", src)
        seen[rank] = d.source
    return sorted(seen)


@dataclass
class PartitionedResult:
    """The cross-rank results of a partitioned run (the per-rank tables stay on disk)."""

    out_dir: Path
    ranks: list[int]
    measured: pa.Table  # MEASURED (transfer / wait / skew / exposed; bounds need a profile)
    stragglers: pa.Table  # STRAGGLERS
    findings: pa.Table  # FINDINGS: per-rank lints plus the straggler and evidence findings
    classes: pa.Table  # TIME_CLASSES of every rank
    done: list[RankDone]
    skipped: list[tuple[str, str]] = field(default_factory=list)


def analyze_partitioned(path: str | Path, out_dir: str | Path, *,
                        load: LoadOptions | None = None, options: AnalyzeOptions | None = None,
                        keep_events: bool = True, attribute: bool = True,
                        batch_files: int = BATCH_FILES) -> PartitionedResult:
    """Every stage of ``path``'s rank files, partitioned into ``out_dir`` (the keywords are
    :class:`Partitioned`'s)."""
    ex = Partitioned(Path(path), Path(out_dir), options or AnalyzeOptions(), load,
                     keep_events=keep_events, attribute=attribute, batch_files=batch_files)
    execute(ex)
    analysis = ex.result()
    assert analysis.measured is not None and analysis.findings_table is not None
    return PartitionedResult(ex.out, ex.ranks, analysis.measured,
                             analysis.extra_tables["stragglers"], analysis.findings_table,
                             analysis.extra_tables["time_classes"], ex.done, ex.skipped)


def load_partitioned(out_dir: str | Path, ranks: list[int] | None = None) -> Run:
    """Read a partitioned dataset back as a Run (EVENTS only: attribution columns dropped)."""
    out = Path(out_dir)
    if ranks is None:
        ranks = ranks_written(out)
    events = S.conform(read_part(out, "events", ranks), S.EVENTS)
    return Run(events, S.conform(read_part(out, "groups", ranks), S.PROCESS_GROUPS),
               S.conform(read_part(out, "info", ranks), S.RANK_INFO))
