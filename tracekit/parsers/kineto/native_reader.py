"""One Kineto file -> RawTrace through the native accumulator (tracekit.parsers.kineto.native), in
one pass and without one Python object per event.

The file is read in blocks cut at event boundaries; a worker thread feeds each block to the
accumulator (the C call runs without the GIL) while this thread reads the next block and
decodes, with msgspec, the args of the few events the previous block flagged
(communication, record_shapes, thread names). The columns stay in C memory and become Arrow
buffers without a copy (kineto_native_columns).

A block the accumulator declines (text it does not take: escapes, unusual numbers or types,
a float time with more than three decimals, a bad event) is decoded by msgspec
(kineto_msgspec) in the same worker, in its place: the accumulator only counts its events,
and its rows join the others by event index at the end (``RawTrace.reader`` then says
``native+msgspec``). Only what a block cannot settle makes ``read_whole`` return None, so
that the caller reads the file with msgspec alone, which then decides and words any error: a
block that is not JSON (a false boundary), bad input, flagged args that fail strict
validation, a string pid on a thread name, a read error, no timed event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.errors import BadInputError
from tracekit.limits import MAX_EVENT, LimitExceeded
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto import native as A
from tracekit.parsers.kineto import read as R
from tracekit.parsers.kineto.accumulator import Accumulator, Fed
from tracekit.parsers.kineto.block_columns import Piece, _decode_raw, comm_table
from tracekit.parsers.kineto.declined_blocks import with_pieces
from tracekit.parsers.kineto.decode import RAW_IDX, SHAPE_PREFIXES, Args
from tracekit.parsers.kineto.dict_codes import masked
from tracekit.parsers.kineto.msgspec_reader import decode_buffer
from tracekit.parsers.kineto.native import INT as C_INT
from tracekit.parsers.kineto.native import STRING as C_STRING
from tracekit.parsers.kineto.native import accumulator
from tracekit.parsers.kineto.native_columns import comm_rows, shape_ops, timed_table
from tracekit.parsers.kineto.raw_trace import MIXED, NATIVE, RawTrace

_ARGS = msgspec.json.Decoder(list[Args])
THREAD_NAME = "thread_name"
_OTHER, _SHAPE, _THREAD = 0, 1, 2
_DONE = object()


class _GiveUp(Exception):
    """The piece path must parse this file."""


@dataclass
class _Side:
    """What the flagged events give, gathered block by block (their args are decoded with
    their block and not kept): communication args, record_shapes args, thread names."""

    comm: list[pa.Table] = field(default_factory=list)
    shapes: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> raw args
    threads: list[tuple[Any, Any, str]] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)  # the blocks msgspec decoded
    name_kind: dict[int, int] = field(default_factory=dict)  # name code -> _SHAPE / _THREAD

    def _of_kind(self, codes: np.ndarray, kind: int) -> np.ndarray:
        """Which name codes stand for names of ``kind`` (_SHAPE / _THREAD)."""
        wanted = [c for c, k in self.name_kind.items() if k == kind]
        return np.isin(codes, wanted) if wanted else np.zeros(len(codes), dtype=bool)

    def take(self, fed: Fed, block: np.ndarray) -> None:
        """Decode the args the block flagged and keep what EVENTS needs of them: those of
        record_shapes ops and thread names, and of events whose communication values the
        accumulator left to msgspec (any other flagged event was only flagged for keys that
        EVENTS does not read there)."""
        if fed.piece is not None:
            self.pieces.append(fed.piece)
            self.threads.extend(fed.piece.threads)
            return
        f = fed.flags
        if not f:
            return
        for code, name in fed.names.items():
            self.name_kind[code] = (_THREAD if name == THREAD_NAME else
                                    _SHAPE if name.startswith(SHAPE_PREFIXES) else _OTHER)
        codes, phase, comm = f["name"], f["phase"], f["comm"]
        timed_mask = phase == A.PHASE_TIMED
        shape = timed_mask & self._of_kind(codes, _SHAPE)
        thread = (phase == A.PHASE_META) & self._of_kind(codes, _THREAD)
        slow = comm == A.COMM_SLOW
        need = np.flatnonzero(shape | thread | slow)
        if not need.size:
            return
        view = memoryview(block.data)
        aoff, alen = f["aoff"], f["alen"]
        spans = [view[aoff[i] : aoff[i] + alen[i]] for i in need.tolist()]
        try:
            decoded = dict(zip(need.tolist(), _ARGS.decode(
                b"".join((b"[", b",".join(spans), b"]"))), strict=True))
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise _GiveUp from None
        del spans, view
        comm_at = [i for i in np.flatnonzero(slow & timed_mask).tolist()
                   if _has_comm(decoded[i])]
        rows = f["row"]
        for i in np.flatnonzero(shape).tolist():
            self.shapes[int(rows[i])] = _decode_raw(decoded[i])
        for i in np.flatnonzero(thread).tolist():
            if decoded[i].label:
                label = _decode_raw(decoded[i]).get("label")
                if isinstance(label, str):
                    pid, tid = _pid_tid(int(f["pid"][i]), int(f["pid_state"][i]),
                                        int(f["tid"][i]), int(f["tid_state"][i]))
                    self.threads.append((pid, tid, label.strip()))
        comm_args = [decoded[i] for i in comm_at]
        table = comm_table(comm_args, range(len(comm_args)), 0)
        if table is not None:
            self.comm.append(table.set_column(
                table.schema.get_field_index(RAW_IDX), RAW_IDX,
                masked(f["event"][comm_at], None, pa.int64())))


def _merge_comm(read: pa.Table | None, decoded: list[pa.Table]) -> pa.Table | None:
    """The communication rows read by the accumulator and those msgspec decoded, in event
    order."""
    parts = ([read] if read is not None else []) + decoded
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    merged = pa.concat_tables(parts)
    return merged.take(V.from_numpy(np.argsort(V.numpy(merged.column(RAW_IDX)),
                                               kind="stable")))


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


def read_whole(path: Path, meta_of: Callable[[bytes], dict[str, Any]],
               beside: Iterator[None] | None = None) -> RawTrace | None:
    """The RawTrace of ``path``, or None when msgspec alone must read it. ``beside``: work
    for this thread while the worker scans (see ``_blocks``)."""
    lib = accumulator()
    if lib is None:
        return None
    try:
        acc = _Feeder(lib, path)
        side = _Side()
        with R.open_trace(path) as stream:
            try:
                head, rest = R.find_head(stream, path)
            except R.SplitError:
                return None
            final = _blocks(acc, side, stream, rest, _offset(stream, head, rest), path,
                            beside)
        meta = _finish(acc, side, head, final, meta_of)
        comm = _merge_comm(comm_rows(acc), side.comm)
        acc.done()
        info = acc.info()
        if not info["rows"] and not any(p.columns.num_rows for p in side.pieces):
            return None  # no timed event: the msgspec reader words the error
        table, name = timed_table(acc)
        ops = shape_ops(table, name, side.shapes)
    except LimitExceeded:
        raise
    except (_GiveUp, BadInputError, MemoryError, msgspec.DecodeError):
        return None
    if not side.pieces:
        return RawTrace(table, comm, ops, side.threads, info["events"], meta, NATIVE)
    table, comm, ops = with_pieces(table, comm, ops, side.pieces)
    return RawTrace(table, comm, ops, side.threads, info["events"], meta, MIXED)


class _Feeder(Accumulator):
    """The accumulator, with msgspec in the place of a block it declines (in the same
    thread, before the next block is fed: the event indices stay in order)."""

    def __init__(self, lib: Any, path: Path) -> None:
        super().__init__(lib)
        self.path = path
        self.failed = False

    def feed(self, block: np.ndarray, length: int) -> Fed:
        """Feed one block. After a block that fails (its start may have been a false event
        boundary), no later block is read: it would start inside a string, where text such
        as ``},{},{`` decodes as events that are not there."""
        if self.failed:
            raise _GiveUp
        self.failed = True
        fed = super().feed(block, length)
        if fed is None:
            text = bytes(block.data[:length]).lstrip(b" \t\r\n").removeprefix(b",")
            piece = decode_buffer(b"[" + text + b"]", self.events(), self.path)
            self.skip(piece.n_events)
            fed = Fed({}, {}, self._coded(piece))
        self.failed = False
        return fed

    def _coded(self, piece: Piece) -> Piece:
        """``piece`` with its NAME and CATEGORY as codes into the accumulator's dictionaries
        (its values added to them in the order the block first shows them, untimed events
        included: what the accumulator would have done reading the block itself)."""
        cols = piece.columns
        for which, key in ((0, S.NAME), (1, S.CATEGORY)):
            col = cols.column(key).combine_chunks()
            codes = np.array([self._intern(which, v) for v in col.dictionary.to_pylist()],
                             dtype=np.int32)
            idx = col.indices
            picked = codes[np.asarray(V.numpy(V.fill_null(idx, 0)),
                                      dtype=np.int64)] if len(codes) else np.zeros(
                len(idx), dtype=np.int32)
            valid = None if idx.null_count == 0 else V.numpy(idx.is_valid())
            cols = cols.set_column(cols.schema.get_field_index(key), key,
                                   masked(picked, valid, pa.int32()))
        return dataclasses.replace(piece, columns=cols)

    def _intern(self, which: int, value: str) -> int:
        raw = value.encode()
        code = int(self.lib.tk_acc_intern(self.ptr, which, raw, len(raw)))
        if code < 0:
            raise MemoryError
        return code


def _offset(stream: BinaryIO, head: bytes, rest: bytes) -> int | None:
    """The file offset of ``rest`` (the text after ``traceEvents: [``) in a plain file, or
    None (a compressed stream)."""
    if not isinstance(stream, io.BufferedReader):
        return None
    try:
        return stream.tell() - len(rest)
    except OSError:
        return None


class _Ring:
    """Three block buffers used in turn: while the worker scans block k, this thread reads
    block k + 1 into the next buffer and decodes the flags of block k - 1 from the third
    (reused, so that reading costs no fresh pages)."""

    def __init__(self, lib: Any, rest: bytes, path: Path) -> None:
        self.lib, self.path, self.done = lib, path, 0
        self.bufs = [_block_buffer(2 * R.CHUNK_BYTES) for _ in range(3)]
        self.k = 0
        self.carry = np.frombuffer(rest, dtype=np.uint8)

    def release(self) -> None:
        """Hand the buffers to the next file's ring (``kept_block_buffers``)."""
        _give_back(self.bufs)
        self.bufs = []

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
        except LimitExceeded:
            raise
        except Exception:  # corrupt gzip and friends: the piece path words the error
            raise _GiveUp from None
        if not got:
            return None
        have = c + got
        cut = int(self.lib.tk_boundary(buf.ctypes.data, have))
        if not cut and have > MAX_EVENT.bytes():
            raise R.event_too_large(self.path, self.done)
        self.done += cut
        self.carry = buf[cut:have].copy()
        if cut:  # the next buffer only after one handed out (one without a cut is all carry:
            self.k += 1  # moving on would reuse, too early, the buffer being scanned)
        return buf, have, cut


# block buffers of finished rings, kept for the next file's ring while kept_block_buffers()
# is entered (a 16 MiB buffer of its own for each of a file's three blocks faults its
# pages in anew: 8 x 6k minor faults over the 8-rank synth run's gzipped ranks)
_SPARE: list[np.ndarray] = []
_SPARE_LOCK = threading.Lock()
_keeping = [0]  # how many kept_block_buffers() are entered
KEPT_BUFFERS = 6  # two rings: the ranks parsed two at a time (tracekit.engine.threads)


def _block_buffer(size: int) -> np.ndarray:
    """A kept buffer of at least ``size`` bytes, else a new one."""
    with _SPARE_LOCK:
        for i, buf in enumerate(_SPARE):
            if len(buf) >= size:
                return _SPARE.pop(i)
    return np.empty(size, dtype=np.uint8)


def _give_back(bufs: list[np.ndarray]) -> None:
    with _SPARE_LOCK:
        if _keeping[0]:
            _SPARE.extend(bufs[:max(0, KEPT_BUFFERS - len(_SPARE))])


@contextlib.contextmanager
def kept_block_buffers() -> Iterator[None]:
    """While entered, a finished file's block buffers go to the next file's ring; on the
    last exit they are freed (their pages are not held past the parse)."""
    with _SPARE_LOCK:
        _keeping[0] += 1
    try:
        yield
    finally:
        with _SPARE_LOCK:
            _keeping[0] -= 1
            if not _keeping[0]:
                _SPARE.clear()


class _Windows:
    """The blocks of a plain (uncompressed) file as read-only maps of its windows, in the
    place of the ring's reads: the scan reads the page cache itself, where a read copies
    every byte first (about 0.08 s of kernel time on the 500 MB benchmark rank). Each
    window is the text the previous block left over plus the next CHUNK_BYTES, as the
    ring's; a window's pages count in the RSS only while it is mapped (its array holds the
    map; the last blocks in use are the only ones alive). A file that another process
    truncates while it is read would fault on the lost pages: trace files are read once the
    profiler has written them (``tracekit capture`` analyses after the run)."""

    def __init__(self, lib: Any, stream: BinaryIO, start: int, path: Path) -> None:
        self.lib, self.path, self.start = lib, path, start
        self.fd = stream.fileno()
        self.size = os.fstat(self.fd).st_size
        self.pos = self.hi = start  # first byte not yet fed; end of the bytes mapped so far
        self.carry = np.zeros(0, dtype=np.uint8)

    def fill(self, stream: BinaryIO) -> tuple[np.ndarray, int, int] | None:
        if self.hi >= self.size:
            return None
        self.hi = min(self.size, self.hi + R.CHUNK_BYTES)
        base = self.pos - self.pos % mmap.ALLOCATIONGRANULARITY
        try:
            window = mmap.mmap(self.fd, self.hi - base, access=mmap.ACCESS_READ, offset=base)
        except (OSError, ValueError):  # the file changed under us: the piece path words it
            raise _GiveUp from None
        buf = np.frombuffer(window, dtype=np.uint8)[self.pos - base :]
        have = self.hi - self.pos
        cut = int(self.lib.tk_boundary(buf.ctypes.data, have))
        if not cut and have > MAX_EVENT.bytes():
            del buf
            window.close()
            raise R.event_too_large(self.path, self.pos - self.start)
        self.pos += cut
        self.carry = buf[cut:have]
        return buf, have, cut


def _reader(lib: Any, stream: BinaryIO, rest: bytes, start: int | None,
            path: Path) -> _Ring | _Windows:
    """Windows of the map for a plain file whose events start at byte ``start``, else the
    ring of reads."""
    if start is not None and isinstance(stream, io.BufferedReader):
        with contextlib.suppress(OSError, io.UnsupportedOperation):
            return _Windows(lib, stream, start, path)
    return _Ring(lib, rest, path)


def _blocks(acc: _Feeder, side: _Side, stream: BinaryIO, rest: bytes,
            start: int | None, path: Path, beside: Iterator[None] | None = None) -> bytes:
    """Feed every block of complete events (in a worker thread, one block ahead); return
    the text after the last complete block. ``start``: the file offset of ``rest`` in a
    plain file (the blocks are then read from a map of the file). ``beside``: steps of other
    work, one run by this thread after each block is handed to the worker and before the
    previous one is collected (the scan runs without the GIL, and this thread would
    otherwise wait for it): a cold process's one-off work, such as imports, is then done
    beside the scan of a file of several blocks. A step should take less than a block's
    scan (about 15 ms for CHUNK_BYTES); the steps left at the end are not run."""
    ring = _reader(acc.lib, stream, rest, start, path)
    first = ring.fill(stream)
    if first is None:
        return ring.carry.tobytes()
    second = ring.fill(stream)
    if second is None:  # the whole file is one block: no worker thread to start (~0.2 ms)
        buf, _, cut = first
        if cut:
            _take(side, acc.feed(buf, cut), buf)
        return ring.carry.tobytes()
    pending: tuple[Future[Fed], np.ndarray] | None = None
    with ThreadPoolExecutor(max_workers=1) as worker:
        for got in _read_on(ring, stream, first, second):
            buf, _, cut = got
            if not cut:
                continue
            job = worker.submit(acc.feed, buf, cut)
            if beside is not None and next(beside, _DONE) is _DONE:
                beside = None
            if pending is not None:
                _collect(side, *pending)
            pending = (job, buf)
        if pending is not None:
            _collect(side, *pending)
    final = ring.carry.tobytes()
    if isinstance(ring, _Ring):  # every block scanned and taken: no view of them is left
        ring.release()
    return final


def _read_on(ring: _Ring | _Windows, stream: BinaryIO, *read: tuple[np.ndarray, int, int],
             ) -> Iterator[tuple[np.ndarray, int, int]]:
    """The blocks already read, then the rest of the file, one block per step (a block is
    read only when the caller asks for it: the ring's buffers are reused in turn)."""
    yield from read
    while (got := ring.fill(stream)) is not None:
        yield got


def _collect(side: _Side, job: Future[Fed], block: np.ndarray) -> None:
    _take(side, job.result(), block)


def _take(side: _Side, fed: Fed | None, block: np.ndarray) -> None:
    if fed is None:  # pragma: no cover - _Feeder.feed decodes a declined block or raises
        raise _GiveUp
    side.take(fed, block)


def _finish(acc: _Feeder, side: _Side, head: bytes, final: bytes,
            meta_of: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    """The last events and the top-level keys after traceEvents (see tail_candidates)."""
    for events, tail in R.tail_candidates(final):
        try:
            meta = meta_of(head + b"[]" + tail)
        except (msgspec.DecodeError, ValueError):
            continue
        if events.strip():
            block = np.frombuffer(events, dtype=np.uint8)
            try:
                fed = acc.feed(block, len(block))
            except msgspec.DecodeError:
                acc.failed = False  # a wrong guess at the end (rolled back): the next one
                continue
            side.take(fed, block)
        return meta
    raise _GiveUp
