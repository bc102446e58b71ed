"""Write both gloo ranks' Flight Recorder dumps as pickle and JSON (torch 2.13, 2 ranks).

    TORCH_FR_BUFFER_SIZE=100 python make_pair.py OUT_DIR

The committed pair_rank*.fr_trace.* were written by this script run as /tmp/frx/pair.py.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json


def main(rank: int, world: int, out: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29631"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    g = dist.new_group([0, 1], group_desc="tp:device")
    x = torch.ones(4, 3)
    dist.all_reduce(x, group=g)
    dist.all_gather_into_tensor(torch.empty(8, 3), x, group=g)
    dist.broadcast(torch.zeros(5, dtype=torch.bfloat16), src=0, group=g)
    dist.barrier()
    with open(f"{out}/pair_rank{rank}.fr_trace.pkl", "wb") as f:
        f.write(_dump_fr_trace())
    with open(f"{out}/pair_rank{rank}.fr_trace.json", "wb") as f:
        f.write(_dump_fr_trace_json())
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(main, args=(2, sys.argv[1]), nprocs=2)
