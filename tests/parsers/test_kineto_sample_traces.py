"""The bundled sample traces (real gloo captures with ground-truth sidecars): every c10d
collective a rank issued is found, in order, with its op and the function that called it."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import schema as S
from tracekit.parsers.kineto import load_kineto_file

WRAPPERS = ("c10d::", "_c10d_functional::")


def rank_files(sample_traces: Path) -> list[tuple[Path, Path]]:
    out = []
    for manifest in sorted(sample_traces.glob("*/manifest.json")):
        for info in json.loads(manifest.read_text())["ranks"].values():
            out.append((manifest.parent / info["trace"], manifest.parent / info["sidecar"]))
    return out


def test_c10d_ops_match_the_sidecar_ground_truth(sample_traces: Path) -> None:
    files = rank_files(sample_traces)
    assert files
    for trace, sidecar in files:
        # GIVEN a rank's trace and the collectives its workload recorded issuing
        truth = json.loads(sidecar.read_text())["collectives"]
        ev = load_kineto_file(trace).events.to_pylist()
        # WHEN its c10d-level collective ops are taken in trace order
        ops = [e for e in ev if e[S.KIND] == "cpu_op" and e[S.OP]
               and (e[S.NAME] or "").startswith(WRAPPERS)]
        # THEN there is one per issued collective, with the same op, and the call site's
        # chain of user frames contains the function that issued it
        where = f"{trace.parent.name}/{trace.name}"
        assert len(ops) == len(truth), where
        for e, t in zip(ops, truth, strict=True):
            assert e[S.OP] == t["op"], (where, t["index"], e[S.NAME])
            chain = [f.split(" (")[0] for f in (e[S.CALL_SITE] or "").split(" <- ")]
            assert t["call"] in chain, (where, t["index"], e[S.CALL_SITE])
