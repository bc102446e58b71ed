"""The runs the golden files pin: each builds its input under a scratch folder and says how.

* ``kineto_tp2``: a hand-written 2-rank Kineto run (tests/golden/inputs/kineto_tp2): TP=2 with
  ``distributedInfo``, two all-reduces and an all-gather, each a ``record_param_comms`` op, its
  ``cudaLaunchKernel`` and its NCCL kernel; rank 1 launches 40 us later, so rank 0 waits.
* ``sample_tp4_full_tp``: the bundled sample sample_traces/tp4_full_tp (4 ranks, SGLang TP=4),
  analysed with its manifest as the parallel config. Its EVENTS and ATTRIBUTED files keep the
  rows with an ``op`` (the collectives and their CPU ops) to stay small; ``rows.csv`` pins the
  row count of every stage in full.
* ``ascend_tp2``: a 2-rank Ascend text export written by tests/fixtures/make_ascend.py (one
  all-gather, two layers of HCCL collectives).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fixtures.make_ascend as mk  # tests/ is on the path (pyproject's pythonpath, regen.py)

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
INPUTS = Path(__file__).resolve().parent / "inputs"
EXPECTED = Path(__file__).resolve().parent / "expected"


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path], Path]  # scratch folder -> the path to analyse
    config: Path | None = None  # --config (a manifest or YAML), None: inferred
    comm_rows_only: bool = False  # EVENTS/ATTRIBUTED: only rows with an op
    hardware: str | None = None  # --hardware profile (bounds and efficiency in MEASURED)


def _copy(src: Path) -> Callable[[Path], Path]:
    def build(scratch: Path) -> Path:
        dst = scratch / src.name
        shutil.copytree(src, dst)
        return dst

    return build


def _ascend(scratch: Path) -> Path:
    root = scratch / "ascend_tp2"
    mk.write_export(root, world=2, layers=2, export="text")
    return root


SAMPLE = REPO / "sample_traces" / "tp4_full_tp"

CASES: tuple[Case, ...] = (
    Case("kineto_tp2", _copy(INPUTS / "kineto_tp2"), hardware="h200"),
    Case("sample_tp4_full_tp", _copy(SAMPLE), config=SAMPLE / "manifest.json",
         comm_rows_only=True, hardware="h200"),
    Case("ascend_tp2", _ascend, hardware="ascend-910b"),
)
