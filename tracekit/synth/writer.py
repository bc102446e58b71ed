"""Render one rank of a synthetic run as Kineto chrome-trace JSON, step by step.

Events are formatted straight to text (timestamps as Kineto prints them: float microseconds
with three decimals) and written to the output stream one step at a time, so a 500 MB rank
never exists as Python objects. Eager steps carry the full CPU side (python frames, cpu ops,
launches, ac2g flows, record_param_comms with the era's args); CUDA-graph steps carry one
``cudaGraphLaunch`` and kernels without any communication metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from tracekit.synth import names
from tracekit.synth.comm_args import param_comms
from tracekit.synth.config import RankGroups, SynthConfig, torch_version
from tracekit.synth.plan import Slot
from tracekit.synth.timeline import StepTimes

CPU_LEAD_NS = 400_000
COMPUTE_STREAM = 7
DEEPEP_STREAM = 25
PIECE_NS = 14_000
_enc = msgspec.json.Encoder()
_KERNEL_STD = ('"queued":0,"device":{dev},"context":1,"stream":{stream},"correlation":{corr},'
               '"registers per thread":96,"shared memory":87568,"blocks per SM":0.074074,'
               '"warps per SM":1.259259,"grid":[132,1,1],"block":[544,1,1],'
               '"est. achieved occupancy %":0')


def us(ns: int) -> str:
    """Kineto's microsecond text for an integer nanosecond value."""
    return f"{ns // 1000}.{ns % 1000:03d}"


class _Names:
    def __init__(self) -> None:
        self.cache: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        out = self.cache.get(name)
        if out is None:
            out = _enc.encode(name).decode()
            self.cache[name] = out
        return out


class RankRenderer:
    """Stateful renderer of one rank: ids and sequence numbers continue across steps."""

    def __init__(self, cfg: SynthConfig, rank: int, groups: RankGroups,
                 emit: Callable[[str], object]) -> None:
        self.cfg, self.rank, self.groups, self.emit = cfg, rank, groups, emit
        self.torch = torch_version(cfg)
        self.pid = 100_000 + 131 * rank
        self.dev = rank % cfg.gpus_per_node
        self.q = _Names()
        self.ext = 1_000
        self.corr = 50_000
        self.py_id = 0
        self.ev_idx = 0
        self.seq: dict[str, int] = {}
        self.first = True
        self.sidecar: list[dict[str, Any]] = []
        device = sorted((g for g in groups.member_of if g.desc.endswith(":device")),
                        key=lambda g: int(g.pg_name))
        self.pg_stream = {g.pg_name: 40 + 4 * i for i, g in enumerate(device)}
        self.stream_free: dict[int, int] = {}
        self.uid = {g.pg_name: i for i, g in enumerate(groups.member_of)}
        self.frames: list[list[Any]] = []

    # ---- low-level events ---------------------------------------------------------------------
    def _e(self, text: str) -> None:
        if self.first:
            self.first = False
            self.emit(text)
        else:
            self.emit(",\n" + text)

    def _cpu(self, cat: str, name: str, ts: int, dur: int, ext: int, extra: str = "") -> None:
        self.ev_idx += 1
        self._e(f'{{"ph":"X","cat":"{cat}","name":{self.q(name)},"pid":{self.pid},'
                f'"tid":{self.pid},"ts":{us(ts)},"dur":{us(dur)},"args":{{"External id":{ext},'
                f'"Record function id":0,"Ev Idx":{self.ev_idx}{extra}}}}}')

    def _runtime(self, name: str, ts: int, dur: int, corr: int, ext: int | None) -> None:
        link = f'"External id":{ext},' if ext is not None else ""
        self._e(f'{{"ph":"X","cat":"cuda_runtime","name":"{name}","pid":{self.pid},'
                f'"tid":{self.pid},"ts":{us(ts)},"dur":{us(dur)},"args":{{{link}'
                f'"cbid":211,"correlation":{corr}}}}}')
        self._e(f'{{"ph":"s","id":{corr},"pid":{self.pid},"tid":{self.pid},"ts":{us(ts)},'
                f'"cat":"ac2g","name":"ac2g"}}')

    def _kernel(self, name: str, stream: int, ts: int, dur: int, corr: int, ext: int | None,
                comm: dict[str, object] | None = None, flow: bool = True) -> None:
        args = _KERNEL_STD.format(dev=self.dev, stream=stream, corr=corr)
        if ext is not None:
            args = f'"External id":{ext},' + args
        if comm:
            args += "," + _enc.encode(comm).decode()[1:-1]
        self._e(f'{{"ph":"X","cat":"kernel","name":{self.q(name)},"pid":{self.dev},'
                f'"tid":{stream},"ts":{us(ts)},"dur":{us(dur)},"args":{{{args}}}}}')
        if flow:
            self._e(f'{{"ph":"f","id":{corr},"pid":{self.dev},"tid":{stream},"ts":{us(ts)},'
                    f'"cat":"ac2g","name":"ac2g","bp":"e"}}')

    def _gpu_slot(self, stream: int, ts: int, dur: int) -> tuple[int, int]:
        """Start no earlier than the stream is free; keep at least 0.5 µs."""
        start = max(ts, self.stream_free.get(stream, 0))
        dur = max(500, ts + dur - start)
        self.stream_free[stream] = start + dur
        return start, dur

    # ---- python frames --------------------------------------------------------------------
    def open(self, name: str, t: int) -> int:
        self.py_id += 1
        parent = self.frames[-1][1] if self.frames else None
        self.frames.append([name, self.py_id, parent, t])
        return t + 100

    def close(self, t: int) -> int:
        name, pid_, parent, ts = self.frames.pop()
        par = "null" if parent is None else str(parent)
        self._e(f'{{"ph":"X","cat":"python_function","name":{self.q(name)},"pid":{self.pid},'
                f'"tid":{self.pid},"ts":{us(ts)},"dur":{us(t - ts)},"args":{{"Python parent id":'
                f'{par},"Python id":{pid_},"Ev Idx":0}}}}')
        return t + 100

    # ---- metadata -------------------------------------------------------------------------
    def metadata(self) -> None:
        host, dev = self.pid, self.dev
        self._e(f'{{"name":"process_name","ph":"M","ts":0,"pid":{host},"tid":0,'
                f'"args":{{"name":"python3"}}}}')
        self._e(f'{{"name":"thread_name","ph":"M","ts":0,"pid":{host},"tid":{host},'
                f'"args":{{"name":"thread {host} (python3)"}}}}')
        self._e(f'{{"name":"process_name","ph":"M","ts":0,"pid":{dev},"tid":0,'
                f'"args":{{"name":"python3"}}}}')
        self._e(f'{{"name":"process_labels","ph":"M","ts":0,"pid":{dev},"tid":0,'
                f'"args":{{"labels":"GPU {dev}"}}}}')
        streams = [COMPUTE_STREAM, DEEPEP_STREAM, *self.pg_stream.values()]
        for s in streams:
            self._e(f'{{"name":"thread_name","ph":"M","ts":0,"pid":{dev},"tid":{s},'
                    f'"args":{{"name":"stream {s} "}}}}')

    # ---- steps ----------------------------------------------------------------------------
    def step(self, times: StepTimes, slots: list[Slot]) -> None:
        info = times.info
        cpu = times.start_ns - CPU_LEAD_NS
        cpu = self.open(names.F["loop"], cpu)
        cpu = self.open(names.F["run_batch"], cpu)
        cpu = self.open(names.F["forward"], cpu)
        bs = sum(info.rows)
        label = (f"step[EXTEND bs={len(info.rows)} toks={bs}]" if info.mode == "extend"
                 else f"step[DECODE bs={bs}]")
        ann_ts, ann_ext = cpu, self._next_ext()
        cpu += 200
        cpu = self.open(names.F["forward_extend" if info.mode == "extend" else "forward_decode"],
                        cpu)
        if info.graph:
            cpu = self._graph_step(times, slots, cpu)
        else:
            cpu = self._eager_step(times, slots, cpu)
        cpu = self.close(cpu)
        self._cpu("user_annotation", label, ann_ts, cpu - ann_ts, ann_ext)
        cpu += 200
        for _ in range(3):
            cpu = self.close(cpu)

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def _compute_window(self, start: int, end: int, cpu: int, k: int, slot: Slot,
                        graph_corr: int | None) -> int:
        """Compute (and a memcpy) on the compute stream between ``start`` and ``end``."""
        span = max(1_000, end - start)
        n = max(1, min(6, span // PIECE_NS))
        piece = span // n
        for i in range(n):
            ts = start + i * piece
            is_copy = slot.memcpy_bytes and i == n - 1
            op, kname = names.COMPUTE[(k + i) % len(names.COMPUTE)]
            if is_copy:
                op, kname = "aten::copy_", "Memcpy DtoD (Device -> Device)"
            if graph_corr is None:
                ext, corr = self._next_ext(), self._next_corr()
                cpu = self.open(names.MODULE_CALL, cpu)
                cpu = self.open(names.COPY_FRAME if is_copy else
                                names.COMPUTE_FRAMES[(k + i) % len(names.COMPUTE)], cpu)
                self._cpu("cpu_op", op, cpu, 4_000, ext)
                launch = "cudaMemcpyAsync" if is_copy else "cudaLaunchKernel"
                self._runtime(launch, cpu + 1_000, 2_000, corr, ext)
                ts = max(ts, cpu + 3_500)
                cpu = self.close(self.close(cpu + 4_100))
            else:
                ext, corr = None, graph_corr
            ts, dur = self._gpu_slot(COMPUTE_STREAM, ts, piece - 300)
            if is_copy:
                self._memcpy(ts, dur, corr, ext, slot.memcpy_bytes, graph_corr is None)
            else:
                self._kernel(kname, COMPUTE_STREAM, ts, dur, corr, ext, None, graph_corr is None)
        return cpu

    def _memcpy(self, ts: int, dur: int, corr: int, ext: int | None, nbytes: int,
                flow: bool) -> None:
        link = f'"External id":{ext},' if ext is not None else ""
        self._e(f'{{"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoD (Device -> Device)",'
                f'"pid":{self.dev},"tid":{COMPUTE_STREAM},"ts":{us(ts)},"dur":{us(dur)},'
                f'"args":{{{link}"device":{self.dev},"context":1,"stream":{COMPUTE_STREAM},'
                f'"correlation":{corr},"bytes":{nbytes},"memory bandwidth (GB/s)":'
                f'{nbytes / max(dur, 1):.3f}}}}}')
        if flow:
            self._e(f'{{"ph":"f","id":{corr},"pid":{self.dev},"tid":{COMPUTE_STREAM},'
                    f'"ts":{us(ts)},"cat":"ac2g","name":"ac2g","bp":"e"}}')

    def _eager_step(self, times: StepTimes, slots: list[Slot], cpu: int) -> int:
        cpu = self.open(names.F["model"], cpu)
        layer = None
        for k, slot in enumerate(slots):
            if slot.layer != layer:
                if layer is not None:
                    cpu = self.close(cpu)
                layer = slot.layer
                cpu = self.open(names.F["layer"], cpu)
            arrive = int(times.arrive[k, self.rank])
            cpu = self._compute_window(int(times.prev_end[k]), arrive, cpu, k, slot, None)
            cpu = self._comm(slot, arrive, int(times.end[k]), cpu, None)
        if layer is not None:
            cpu = self.close(cpu)
        last = int(times.end[-1]) if len(slots) else times.start_ns
        cpu = self._compute_window(last, times.end_ns - 5_000, cpu, len(slots), slots[-1], None) \
            if slots else cpu
        return self.close(cpu)

    def _graph_step(self, times: StepTimes, slots: list[Slot], cpu: int) -> int:
        cpu = self.open(names.F["replay"], cpu)
        cpu = self.open(names.F["graph_replay"], cpu)
        corr = self._next_corr()
        self._runtime("cudaGraphLaunch", cpu, 12_000, corr, None)
        cpu += 12_500
        for k, slot in enumerate(slots):
            arrive = int(times.arrive[k, self.rank])
            self._compute_window(int(times.prev_end[k]), arrive, cpu, k, slot, corr)
            self._comm(slot, arrive, int(times.end[k]), cpu, corr)
        cpu = self.close(cpu)
        return self.close(cpu)

    # ---- one collective -------------------------------------------------------------------
    def _comm(self, slot: Slot, arrive: int, end: int, cpu: int, graph_corr: int | None) -> int:
        pg = self.groups.device(slot.gkind)
        self.sidecar.append({
            "op": slot.op, "group": slot.group, "group_desc": pg.desc,
            "members": list(pg.ranks), "path": slot.path,
            "phase": _phase(slot.path), "layer": slot.layer, "bytes": int(slot.nbytes),
            "call": slot.call,
        })
        if slot.transport == "c10d":
            stream = self.pg_stream[pg.pg_name]
        elif slot.transport == "deepep" and "normal" in slot.path:
            stream = DEEPEP_STREAM
        else:
            stream = COMPUTE_STREAM
        eager = graph_corr is None
        if eager:
            for f in slot.frames:
                cpu = self.open(names.F[f], cpu)
        comm: dict[str, object] | None = None
        op_args: dict[str, object] | None = None
        ext: int | None = None
        if slot.transport == "c10d":
            seq = self.seq.get(pg.pg_name, 0) + 1
            self.seq[pg.pg_name] = seq
            coll_name = names.C10D[slot.op][1]
            op_args, comm = param_comms(self.torch, coll_name, slot.in_nelems, slot.out_nelems,
                                        slot.in_split, slot.out_split, pg,
                                        self.uid.get(pg.pg_name, 0), self.rank, seq)
        if eager:
            cpu, ext, launch_end, corrs = self._comm_cpu(slot, cpu, op_args)
        else:
            assert graph_corr is not None
            launch_end, corrs = cpu, [graph_corr] * len(slot.kernels)
        n = len(slot.kernels)
        total = max(1_000, end - max(arrive, launch_end + 1_500))
        ts0 = max(arrive, launch_end + 1_500)
        shares = _shares(slot, n)
        t = ts0
        for i, kname in enumerate(slot.kernels):
            dur = max(500, int(total * shares[i]))
            start, dur = self._gpu_slot(stream, t, dur)
            self._kernel(kname, stream, start, dur, corrs[i], ext if slot.transport == "c10d"
                         else None, comm if eager else None, eager)
            if slot.transport == "c10d" and eager:
                assert ext is not None  # the nccl: annotation's id follows record_param_comms
                self._e(f'{{"ph":"X","cat":"gpu_user_annotation","name":"{names.C10D[slot.op][2]}",'
                        f'"pid":{self.dev},"tid":{stream},"ts":{us(start)},"dur":{us(dur)},'
                        f'"args":{{"External id":{ext + 1}}}}}')
            t = start + dur
        if eager:
            for _ in slot.frames:
                cpu = self.close(cpu)
        return cpu

    def _comm_cpu(self, slot: Slot, cpu: int, op_args: dict[str, object] | None
                  ) -> tuple[int, int | None, int, list[int]]:
        """CPU events of an eager collective: returns (cursor, kernel External id, launch end,
        correlation of each kernel)."""
        corrs = [self._next_corr() for _ in slot.kernels]
        if slot.transport == "c10d":
            c10d_op, _, title = names.C10D[slot.op]
            e_c10d, e_rpc, e_title = self._next_ext(), self._next_ext(), self._next_ext()
            extra = ""
            if op_args:
                extra = "," + _enc.encode(op_args).decode()[1:-1]
            self._cpu("cpu_op", c10d_op, cpu, 24_000, e_c10d)
            self._cpu("cpu_op", "record_param_comms", cpu + 1_000, 22_000, e_rpc, extra)
            self._cpu("user_annotation", title, cpu + 2_000, 20_000, e_title)
            self._runtime("cudaLaunchKernelExC", cpu + 12_000, 6_000, corrs[0], e_rpc)
            return cpu + 24_500, e_rpc, cpu + 18_000, corrs
        if slot.transport == "ca":
            ext = self._next_ext()
            self._cpu("cpu_op", "sglang::outplace_all_reduce", cpu, 9_000, ext)
            self._runtime("cudaLaunchKernel", cpu + 4_000, 3_000, corrs[0], ext)
            return cpu + 9_500, None, cpu + 7_000, corrs
        # pynccl and DeepEP: ctypes / pybind calls with no cpu op; one launch per kernel
        t = cpu
        for corr in corrs:
            self._runtime("cudaLaunchKernelExC", t, 3_000, corr, None)
            t += 3_500
        return t, None, t - 500, corrs


def _phase(path: str) -> str:
    from tracekit.rules.labels import PathLabel

    return PathLabel.PHASE_OF[path]


def _shares(slot: Slot, n: int) -> list[float]:
    if n == 1:
        return [1.0]
    if slot.transport == "deepep":  # layout and notify first: short
        return [0.15, 0.85] if n == 2 else [0.05, 0.15, 0.8]
    return [1.0 / n] * n
