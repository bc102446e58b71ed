"""One Kineto file -> RawTrace through the native accumulator (kineto_accum_c), in one pass
and without one Python object per event.

The file is read in blocks cut at event boundaries; a worker thread feeds each block to the
accumulator (the C call runs without the GIL) while this thread reads the next block and
decodes, with msgspec, the args of the few events the previous block flagged
(communication, record_shapes, thread names). The columns stay in C memory and become Arrow
buffers without a copy (kineto_wrap).

Whenever the result could differ from the piece path's (kineto_parse: a block the
accumulator fails on, even a false boundary; args that fail strict validation; a string pid
on a thread name; a float time with more than three decimals; a read error; no timed
event), ``read_whole`` returns None and the caller parses the file the piece way, which
then decides and words any error.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import pyarrow as pa

from tracekit.errors import BadInputError
from tracekit.parsers import kineto_accum_c as A
from tracekit.parsers import kineto_read as R
from tracekit.parsers.kineto_accum import Accumulator, Fed
from tracekit.parsers.kineto_decode import RAW_IDX, SHAPE_PREFIXES, Args
from tracekit.parsers.kineto_native import accumulator
from tracekit.parsers.kineto_piece import _decode_raw, comm_table
from tracekit.parsers.kineto_scan_c import INT as C_INT
from tracekit.parsers.kineto_scan_c import STRING as C_STRING
from tracekit.parsers.kineto_wrap import shape_ops, timed_table

_ARGS = msgspec.json.Decoder(list[Args])
_NO_COMM = (None, None, None)
THREAD_NAME = "thread_name"
_OTHER, _SHAPE, _THREAD = 0, 1, 2


class _GiveUp(Exception):
    """The piece path must parse this file."""


@dataclass
class _Side:
    """What the flagged events give, gathered block by block (their args are decoded with
    their block and not kept): communication args, record_shapes args, thread names."""

    comm: list[pa.Table] = field(default_factory=list)
    shapes: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> raw args
    threads: list[tuple[Any, Any, str]] = field(default_factory=list)
    name_kind: dict[int, int] = field(default_factory=dict)  # name code -> _SHAPE / _THREAD

    def take(self, fed: Fed, block: np.ndarray) -> None:
        """Decode the args the block flagged and keep what EVENTS needs of them."""
        f = fed.flags
        if not f:
            return
        for code, name in fed.names.items():
            self.name_kind[code] = (_THREAD if name == THREAD_NAME else
                                    _SHAPE if name.startswith(SHAPE_PREFIXES) else _OTHER)
        view = memoryview(block.data)
        spans = [view[a : a + n] for a, n in zip(f["aoff"].tolist(), f["alen"].tolist(),
                                                  strict=True)]
        try:
            decoded = _ARGS.decode(b"".join((b"[", b",".join(spans), b"]")))
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise _GiveUp from None
        del spans, view
        kinds = [self.name_kind.get(c, _OTHER) for c in f["name"].tolist()]
        phases = f["phase"].tolist()
        timed = [i for i, ph in enumerate(phases) if ph == A.PHASE_TIMED]
        comm_at = [i for i in timed
                   if (decoded[i].coll_name, decoded[i].in_nelems, decoded[i].in_size)
                   != _NO_COMM]
        comm_args = [decoded[i] for i in comm_at]
        comm_events = f["event"][comm_at]
        for i in timed:
            if kinds[i] == _SHAPE:
                self.shapes[int(f["row"][i])] = _decode_raw(decoded[i])
        for i, ph in enumerate(phases):
            if ph == A.PHASE_META and kinds[i] == _THREAD and decoded[i].label:
                label = _decode_raw(decoded[i]).get("label")
                if isinstance(label, str):
                    pid, tid = _pid_tid(int(f["pid"][i]), int(f["pid_state"][i]),
                                        int(f["tid"][i]), int(f["tid_state"][i]))
                    self.threads.append((pid, tid, label.strip()))
        table = comm_table(comm_args, range(len(comm_args)), 0)
        if table is not None:
            self.comm.append(table.set_column(
                table.schema.get_field_index(RAW_IDX), RAW_IDX,
                pa.array(comm_events)))


def _pid_tid(pid: int, pid_state: int, tid: int,
             tid_state: int) -> tuple[int | None, int | None]:
    """pid / tid of a thread name as the piece path reads them (int or None); a string
    makes that path decline the piece, so this one gives up."""
    if pid_state == C_STRING or tid_state == C_STRING:
        raise _GiveUp
    return (pid if pid_state == C_INT else None, tid if tid_state == C_INT else None)


def read_whole(path: Path, meta_of: Callable[[bytes], dict[str, Any]]) -> Any:
    """The RawTrace of ``path``, or None when the piece path must parse it."""
    from tracekit.parsers.kineto_parse import RawTrace

    lib = accumulator()
    if lib is None:
        return None
    try:
        acc = Accumulator(lib)
        side = _Side()
        with R.open_trace(path) as stream:
            try:
                head, rest = R.find_head(stream, path)
            except R.SplitError:
                return None
            final = _blocks(acc, side, stream, rest)
        meta = _finish(acc, side, head, final, meta_of)
        acc.done()
        info = acc.info()
        if not info["rows"]:
            return None  # no timed event: the piece path words the error
        table, name = timed_table(acc)
    except (_GiveUp, BadInputError, MemoryError):
        return None
    comm = pa.concat_tables(side.comm) if side.comm else None
    return RawTrace(table, comm, shape_ops(table, name, side.shapes), side.threads,
                    info["events"], meta)


class _Ring:
    """Three block buffers used in turn: while the worker scans block k, this thread reads
    block k + 1 into the next buffer and decodes the flags of block k - 1 from the third
    (reused, so that reading costs no fresh pages)."""

    def __init__(self, lib: Any, rest: bytes) -> None:
        self.lib = lib
        self.bufs = [np.empty(2 * R.CHUNK_BYTES, dtype=np.uint8) for _ in range(3)]
        self.k = 0
        self.carry = np.frombuffer(rest, dtype=np.uint8)

    def fill(self, stream: BinaryIO) -> tuple[np.ndarray, int, int] | None:
        """Read the next block: (buffer, bytes in it, end of its last complete event; 0:
        none), or None at the end of the file (the text left is then ``carry``)."""
        block = R.CHUNK_BYTES
        buf = self.bufs[self.k % 3]
        c = len(self.carry)
        if c + block > len(buf):
            buf = self.bufs[self.k % 3] = np.empty(2 * (c + block), dtype=np.uint8)
        buf[:c] = self.carry
        try:
            got = stream.readinto(buf.data[c : c + block])  # type: ignore[attr-defined]
        except Exception:  # corrupt gzip and friends: the piece path words the error
            raise _GiveUp from None
        if not got:
            return None
        have = c + got
        cut = int(self.lib.tk_boundary(buf.ctypes.data, have))
        self.carry = buf[cut:have].copy()
        self.k += 1
        return buf, have, cut


def _blocks(acc: Accumulator, side: _Side, stream: BinaryIO, rest: bytes) -> bytes:
    """Feed every block of complete events (in a worker thread, one block ahead); return
    the text after the last complete block."""
    ring = _Ring(acc.lib, rest)
    pending: tuple[Future[Fed | None], np.ndarray] | None = None
    with ThreadPoolExecutor(max_workers=1) as worker:
        while (got := ring.fill(stream)) is not None:
            buf, _, cut = got
            if not cut:
                continue
            job = worker.submit(acc.feed, buf, cut)
            if pending is not None:
                _collect(side, *pending)
            pending = (job, buf)
        if pending is not None:
            _collect(side, *pending)
    return ring.carry.tobytes()


def _collect(side: _Side, job: Future[Fed | None], block: np.ndarray) -> None:
    fed = job.result()
    if fed is None:
        raise _GiveUp  # a false boundary, or text the accumulator does not take
    side.take(fed, block)


def _finish(acc: Accumulator, side: _Side, head: bytes, final: bytes,
            meta_of: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    """The last events and the top-level keys after traceEvents (see tail_candidates)."""
    for events, tail in R.tail_candidates(final):
        try:
            meta = meta_of(head + b"[]" + tail)
        except (msgspec.DecodeError, ValueError):
            continue
        if events.strip():
            block = np.frombuffer(events, dtype=np.uint8)
            fed = acc.feed(block, len(block))
            if fed is None:
                continue
            side.take(fed, block)
        return meta
    raise _GiveUp
