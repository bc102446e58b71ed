"""`tracekit capture -- COMMAND` and `tracekit.capture.profile()` on real gloo processes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracekit.capture.torch import HOOK_DIR, CaptureOptions, capture_env


def tracekit(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, timeout=timeout)


def _trace(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


@pytest.mark.slow
def test_capture_workload_writes_rank_traces_and_summary(tmp_path: Path) -> None:
    # GIVEN the reference workload on 2 ranks, unchanged
    out = tmp_path / "cap"
    # WHEN tracekit capture runs it
    res = tracekit("capture", "--out", str(out), "--", sys.executable, "-m",
                   "tracekit.workloads", "--tp", "2", "--layers", "1")
    # THEN it succeeds with one trace per rank, named by rank
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in out.glob("*.trace.json.gz")) == [
        "rank0.trace.json.gz", "rank1.trace.json.gz"]
    # AND each trace has the stack, the shapes and every group the program made
    trace = _trace(out / "rank1.trace.json.gz")
    assert trace["with_stack"] == 1 and trace["record_shapes"] == 1
    descs = {pg["pg_desc"] for pg in trace["distributedInfo"]["pg_config"]}
    assert {"default_pg", "tp:device", "world:device", "moe_ep:device"} <= descs
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "c10d::allreduce_" in names and "gloo:all_reduce" in names
    # AND the workload's own verdict and the analysis summary are printed
    assert "output matches the reference" in res.stdout
    assert "2 rank trace(s)" in res.stdout and "tracekit analyze" in res.stdout


CRASH = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def work(rank, port):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=2)
        x = torch.ones(4)
        dist.all_reduce(x)
        if rank == 1:
            raise RuntimeError("boom in rank one")
        dist.all_reduce(x)
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(work, args=(int(sys.argv[1]),), nprocs=2)
""")


@pytest.mark.slow
def test_crashing_rank_is_named_and_traces_are_kept(tmp_path: Path) -> None:
    # GIVEN a 2-rank program whose rank 1 raises after one collective
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    from tracekit.workloads.runner import free_port

    out = tmp_path / "cap"
    # WHEN it is captured
    res = tracekit("capture", "--out", str(out), "--no-analyze", "--", sys.executable,
                   str(script), str(free_port()))
    # THEN the exit is non-zero and the last line names rank 1 first and why
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("tracekit: error: rank 1 failed first: RuntimeError: boom in rank one")
    # AND the failing rank's trace was written and kept
    assert (out / "rank1.trace.json.gz").is_file()
    assert _trace(out / "rank1.trace.json.gz")["distributedInfo"]["rank"] == 1


def test_out_folder_with_traces_is_refused(tmp_path: Path) -> None:
    # GIVEN a folder that already holds a trace WHEN captured into THEN refuse, keep the file
    (tmp_path / "rank0.trace.json.gz").write_bytes(b"keep me")
    res = tracekit("capture", "--out", str(tmp_path), "--", sys.executable, "-c", "pass")
    assert res.returncode == 2 and "already holds trace files" in res.stderr
    assert (tmp_path / "rank0.trace.json.gz").read_bytes() == b"keep me"


def test_program_without_torch_distributed_is_an_error(tmp_path: Path) -> None:
    # GIVEN a program that never initialises torch.distributed WHEN captured THEN say so
    res = tracekit("capture", "--out", str(tmp_path / "c"), "--", sys.executable, "-c",
                   "print('hello')")
    assert res.returncode == 1
    assert "no rank wrote a trace" in res.stderr and "hello" in res.stdout


def test_failing_program_exit_code_is_kept(tmp_path: Path) -> None:
    # GIVEN a program that exits 7 before any rank starts WHEN captured THEN exit 7, one line
    res = tracekit("capture", "--out", str(tmp_path / "c"), "--", sys.executable, "-c",
                   "import sys; sys.exit(7)")
    assert res.returncode == 7
    assert res.stderr.strip().endswith(f"exit status 7; kept 0 trace(s) in {tmp_path / 'c'}")


def test_hook_goes_first_on_pythonpath_and_keeps_the_rest(tmp_path: Path) -> None:
    env = capture_env(tmp_path, CaptureOptions(with_stack=False),
                      base={"PYTHONPATH": "/x/y", "PATH": os.environ.get("PATH", "")})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(HOOK_DIR), "/x/y"]
    assert env["TRACEKIT_CAPTURE_DIR"] == str(tmp_path.resolve())
    assert env["TRACEKIT_CAPTURE_STACK"] == "0" and env["TRACEKIT_CAPTURE_SHAPES"] == "1"


def test_profile_context_manager_writes_a_trace(tmp_path: Path) -> None:
    # GIVEN a region marked with tracekit.capture.profile() in a plain process
    code = textwrap.dedent(f"""
        import torch, tracekit.capture as tc
        with tc.profile({str(tmp_path)!r}, rank=5):
            with torch.profiler.record_function("my_region"):
                torch.ones(8).sum()
    """)
    # WHEN it runs
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
    # THEN rank5.trace.json.gz holds the region, with stacks and shapes, and no temp file stays
    assert [p.name for p in tmp_path.iterdir()] == ["rank5.trace.json.gz"]
    trace = _trace(tmp_path / "rank5.trace.json.gz")
    assert trace["with_stack"] == 1
    assert "my_region" in {e.get("name") for e in trace["traceEvents"]}


PLAIN_LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, time
    if len(sys.argv) > 2:  # a rank
        import torch.distributed as dist
        rank = int(sys.argv[2])
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}",
                                rank=rank, world_size=2)
        if rank == 1:
            raise ValueError("bad shard")
        time.sleep(600)  # rank 0 never notices; a plain launcher would wait forever
    else:
        procs = [subprocess.Popen([sys.executable, __file__, sys.argv[1], str(r)])
                 for r in range(2)]
        sys.exit(max(p.wait() for p in procs))
""")


@pytest.mark.slow
def test_remaining_ranks_are_stopped_after_a_failure(tmp_path: Path) -> None:
    # GIVEN a launcher that never stops its ranks, and rank 1 fails while rank 0 sleeps
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_LAUNCHER)
    from tracekit.workloads.runner import free_port

    # WHEN captured with a 2 s grace
    res = tracekit("capture", "--out", str(tmp_path / "cap"), "--failed-grace", "2",
                   "--no-analyze", "--", sys.executable, str(script), str(free_port()),
                   timeout=120)
    # THEN capture stopped rank 0 itself and names rank 1 and its error
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert "rank 1 failed first: ValueError: bad shard" in last
    assert "rank(s) 0 stopped before writing a trace" in last


@pytest.mark.slow
def test_capture_under_torchrun(tmp_path: Path) -> None:
    # GIVEN the workload launched by torchrun (one process per rank, env:// init)
    from tracekit.workloads.runner import free_port

    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed beside this python")
    out = tmp_path / "cap"
    # WHEN captured
    res = tracekit("capture", "--out", str(out), "--no-analyze", "--", str(torchrun),
                   "--nproc-per-node", "2", "--master-port", str(free_port()), "-m",
                   "tracekit.workloads", "--tp", "2", "--layers", "1")
    # THEN each torchrun worker wrote its own rank's trace
    assert res.returncode == 0, res.stderr[-2000:]
    assert [_trace(out / f"rank{r}.trace.json.gz")["distributedInfo"]["rank"]
            for r in range(2)] == [0, 1]
    assert "output matches the reference on rank 0" in res.stdout
