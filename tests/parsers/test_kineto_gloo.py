"""A real CPU capture: 2 processes on gloo under torch.profiler, parsed as one run."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracekit import schema as S
from tracekit.api import LoadOptions
from tracekit.parsers import load_run

# The ranks fork from one forkserver that has torch imported (this script's own process never
# imports it): one torch import for the capture instead of three.
CAPTURE = textwrap.dedent('''
    import multiprocessing as mp
    import os, sys

    def attn_tp_all_reduce(t, group):
        import torch.distributed as dist

        dist.all_reduce(t, group=group)

    def worker(rank, world, out, port):
        import torch
        import torch.distributed as dist
        from torch.profiler import ProfilerActivity, profile, record_function

        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = port
        dist.init_process_group("gloo", rank=rank, world_size=world)
        tp = dist.new_group([0, 1], group_desc="tp")
        x = torch.ones(10, 16)
        splits = [4, 6] if rank == 0 else [6, 4]
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     with_stack=True) as prof:
            with record_function("my_layer"):
                attn_tp_all_reduce(x, tp)
                dist.all_reduce(x, async_op=True).wait()
                dist.all_to_all_single(torch.empty(10, 16), x, splits, splits)
                dist.broadcast(x, src=1)
                if rank == 0:
                    dist.send(x, 1)
                else:
                    dist.recv(x, 0)
        prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
        dist.destroy_process_group()

    if __name__ == "__main__":
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "torch.distributed", "torch.profiler"])
        ranks = [ctx.Process(target=worker, args=(r, 2, sys.argv[1], sys.argv[2]))
                 for r in range(2)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join()
        sys.exit(max(p.exitcode for p in ranks))
''')


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo")
    script = out / "capture.py"
    script.write_text(CAPTURE)
    res = subprocess.run([sys.executable, str(script), str(out), free_port()],
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    script.unlink()
    return out


@pytest.mark.slow
def test_gloo_capture_parses_collectives_threads_and_groups(gloo_run: Path) -> None:
    # GIVEN the two rank files of a real gloo capture WHEN loaded as a run directory
    run = load_run(gloo_run, LoadOptions(jobs=1))
    assert run.ranks == [0, 1]
    ev = run.events.to_pylist()
    # THEN the c10d ops carry their op and, for all_to_all_single, the uneven split sizes
    a2a = [e for e in ev if e[S.NAME] == "c10d::alltoall_base_"]
    assert [(e[S.RANK], e[S.OP], e[S.IN_SPLIT]) for e in a2a] == [
        (0, "all_to_allv", [4, 6]), (1, "all_to_allv", [6, 4])]
    assert all(e[S.IN_BYTES] == 10 * 16 * 4 for e in a2a)
    # AND the gloo:* titles of async collectives sit on pt_gloo_runloop threads with bytes
    runloop = [e for e in ev if (e[S.NAME] or "").startswith("gloo:all_reduce")]
    assert runloop and all("pt_gloo_runloop" in (e[S.THREAD] or "") for e in runloop)
    assert {e[S.IN_BYTES] for e in runloop} == {640}
    assert {e[S.OP] for e in runloop} == {"all_reduce"}
    # AND send/recv run inline with their op set at every level
    assert {e[S.OP] for e in ev if e[S.NAME] in ("c10d::send", "c10d::recv_")} == {"send", "recv"}
    # AND the first all_reduce's call site is the user function that issued it
    first = next(e for e in ev if e[S.NAME] == "c10d::allreduce_" and e[S.RANK] == 0)
    assert first[S.CALL_SITE].startswith("attn_tp_all_reduce (")
    # AND pg_config gives the tp group (desc, ranks) on both ranks, with backend gloo
    groups = {(g[S.RANK], g[S.PG_DESC], tuple(g[S.PG_RANKS]))
              for g in run.process_groups.to_pylist()}
    assert {(0, "tp", (0, 1)), (1, "tp", (0, 1)), (0, "default_pg", (0, 1))} <= groups
    assert set(run.rank_info.column(S.BACKEND).to_pylist()) == {"gloo"}
