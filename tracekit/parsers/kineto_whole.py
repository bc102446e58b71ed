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

from collections.abc import Callable, Iterator
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
from tracekit.parsers.kineto_codes import masked
from tracekit.parsers.kineto_decode import RAW_IDX, SHAPE_PREFIXES, Args
from tracekit.parsers.kineto_native import accumulator
from tracekit.parsers.kineto_piece import _decode_raw, comm_table
from tracekit.parsers.kineto_scan_c import INT as C_INT
from tracekit.parsers.kineto_scan_c import STRING as C_STRING
from tracekit.parsers.kineto_wrap import shape_ops, timed_table

_ARGS = msgspec.json.Decoder(list[Args])
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

    def _of_kind(self, codes: np.ndarray, kind: int) -> np.ndarray:
        """Which name codes stand for names of ``kind`` (_SHAPE / _THREAD)."""
        wanted = [c for c, k in self.name_kind.items() if k == kind]
        return np.isin(codes, wanted) if wanted else np.zeros(len(codes), dtype=bool)

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
        codes = f["name"]
        timed_mask = f["phase"] == A.PHASE_TIMED
        timed = np.flatnonzero(timed_mask).tolist()
        comm_at = [i for i in timed if _has_comm(decoded[i])]
        comm_args = [decoded[i] for i in comm_at]
        comm_events = f["event"][comm_at]
        rows = f["row"]
        for i in np.flatnonzero(timed_mask & self._of_kind(codes, _SHAPE)).tolist():
            self.shapes[int(rows[i])] = _decode_raw(decoded[i])
        threads = (f["phase"] == A.PHASE_META) & self._of_kind(codes, _THREAD)
        for i in np.flatnonzero(threads).tolist():
            if decoded[i].label:
                label = _decode_raw(decoded[i]).get("label")
                if isinstance(label, str):
                    pid, tid = _pid_tid(int(f["pid"][i]), int(f["pid_state"][i]),
                                        int(f["tid"][i]), int(f["tid_state"][i]))
                    self.threads.append((pid, tid, label.strip()))
        table = comm_table(comm_args, range(len(comm_args)), 0)
        if table is not None:
            self.comm.append(table.set_column(
                table.schema.get_field_index(RAW_IDX), RAW_IDX,
                masked(comm_events, None, pa.int64())))


def _has_comm(a: Args) -> bool:
    """The event carries communication args (a collective name, In msg nelems or size)."""
    return a.coll_name is not None or a.in_nelems is not None or a.in_size is not None


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
    first = ring.fill(stream)
    if first is None:
        return ring.carry.tobytes()
    second = ring.fill(stream)
    if second is None:  # the whole file is one block: no worker thread to start (~0.2 ms)
        buf, _, cut = first
        if cut:
            _take(side, acc.feed(buf, cut), buf)
        return ring.carry.tobytes()
    pending: tuple[Future[Fed | None], np.ndarray] | None = None
    with ThreadPoolExecutor(max_workers=1) as worker:
        for got in _read_on(ring, stream, first, second):
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


def _read_on(ring: _Ring, stream: BinaryIO, *read: tuple[np.ndarray, int, int],
             ) -> Iterator[tuple[np.ndarray, int, int]]:
    """The blocks already read, then the rest of the file, one block per step (a block is
    read only when the caller asks for it: the ring's buffers are reused in turn)."""
    yield from read
    while (got := ring.fill(stream)) is not None:
        yield got


def _collect(side: _Side, job: Future[Fed | None], block: np.ndarray) -> None:
    _take(side, job.result(), block)


def _take(side: _Side, fed: Fed | None, block: np.ndarray) -> None:
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
