"""Run several workload configurations in one process (the helper of test_workload_runs.py).

``python launch_batch.py SPEC.json OUT``: SPEC maps a name to the workload's command-line
arguments; each configuration runs through ``tracekit.workloads.runner.launch`` with its
sidecars in ``OUT/NAME`` and its rank results pickled to ``OUT/NAME/results.pkl`` (or the
traceback in ``OUT/NAME/error.txt``). ``python launch_batch.py --sample NAME OUT``
regenerates the bundled sample scenario NAME into ``OUT/NAME``
(``tracekit.workloads.samples.generate``, the helper of test_samples.py). The ranks are forked
from one forkserver that has torch and the workload imported, instead of each spawned rank
importing torch again: the layer, the gloo groups and the collectives are the same; only the
per-rank interpreter start is shared.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import sys
import traceback
from pathlib import Path
from typing import Any


def _ranks_from_forkserver() -> None:
    multiprocessing.set_forkserver_preload(["tracekit.workloads.runner"])
    import torch.multiprocessing as tmp

    spawn = tmp.start_processes

    def from_forkserver(*args: Any, **kwargs: Any) -> Any:
        kwargs["start_method"] = "forkserver"
        return spawn(*args, **kwargs)

    tmp.start_processes = from_forkserver


def sample(name: str, out: Path) -> None:
    _ranks_from_forkserver()
    from tracekit.workloads.samples import SCENARIOS, generate

    generate(next(s for s in SCENARIOS if s.name == name), out)


def main(spec: Path, out: Path) -> None:
    _ranks_from_forkserver()
    from tracekit.workloads.cli import config_from_args, parser
    from tracekit.workloads.runner import Outputs, launch

    for name, argv in json.loads(spec.read_text()).items():
        folder = out / name
        folder.mkdir(parents=True)
        try:
            cfg = config_from_args(parser().parse_args(argv))
            results = launch(cfg, Outputs(None, folder, "test"))
            (folder / "results.pkl").write_bytes(pickle.dumps((cfg.world_size, results)))
        except BaseException:  # the test that reads this configuration reports it
            (folder / "error.txt").write_text(traceback.format_exc())


if __name__ == "__main__":
    if sys.argv[1] == "--sample":
        sample(sys.argv[2], Path(sys.argv[3]))
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
