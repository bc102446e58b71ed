"""A flat folder of Kineto rank files is read without importing the Ascend parser, while
every layout the Ascend sniffer accepts still reaches it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tracekit.parsers as parsers
from tracekit.parsers import ascend
from tracekit.parsers.ascend import rank as ascend_rank

_EVENT = {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10.5,
          "dur": 2.0}


def _write_rank(folder: Path, rank: int) -> None:
    doc = {"distributedInfo": {"rank": rank}, "traceEvents": [_EVENT]}
    with gzip.open(folder / f"rank{rank}.trace.json.gz", "wt") as f:
        json.dump(doc, f)


def test_the_spelled_folder_name_is_the_ascend_parsers() -> None:
    # GIVEN the folder name the pre-check spells to avoid an import
    # WHEN compared with the Ascend parser's own constant
    # THEN they are the same name
    assert parsers.ASCEND_OUTPUT == ascend_rank.OUTPUT


@pytest.mark.parametrize("layout", [
    "flat", "file", "rank_dir", "export_root", "output_dir", "other_subdir", "empty",
])
def test_pre_check_never_hides_an_ascend_export(tmp_path: Path, layout: str) -> None:
    # GIVEN a path of each layout: flat files, an Ascend rank folder, a root of rank
    # folders, the output folder itself, an unrelated subfolder, an empty folder
    out = parsers.ASCEND_OUTPUT
    path = tmp_path / "run"
    path.mkdir()
    if layout == "flat":
        (path / "rank0.trace.json").write_text("{}")
    elif layout == "file":
        path = path / "rank0.trace.json"
        path.write_text("{}")
    elif layout == "rank_dir":
        (path / out).mkdir()
    elif layout == "export_root":
        (path / "r0_ascend_pt" / out).mkdir(parents=True)
    elif layout == "output_dir":
        path = path / out
        path.mkdir()
    elif layout == "other_subdir":
        (path / "logs").mkdir()
    # WHEN the pre-check and the Ascend sniffer look at it
    may_be = path.is_dir() and parsers._may_be_ascend(path)
    # THEN whatever the sniffer takes for an export, the pre-check lets through
    if ascend.sniff(path):
        assert may_be
    assert may_be == (layout in ("rank_dir", "export_root", "output_dir", "other_subdir"))


def test_flat_run_folder_loads_without_the_ascend_parser(tmp_path: Path) -> None:
    # GIVEN a folder holding two Kineto rank files and nothing else
    _write_rank(tmp_path, 0)
    _write_rank(tmp_path, 1)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tracekit.api import LoadOptions\n"
        "from tracekit.parsers import load_run\n"
        "run = load_run(Path(sys.argv[1]), LoadOptions(jobs=1))\n"
        "print(run.ranks, run.events.num_rows, 'tracekit.parsers.ascend' in sys.modules)\n"
    )
    # WHEN a fresh interpreter loads it
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, check=True)
    # THEN both ranks are read and the Ascend parser was never imported
    assert done.stdout.split() == ["[0,", "1]", "2", "False"]
