"""Decode the pieces of one big trace file in parallel worker processes.

The main process reads and splits the file (cheap: page cache or ISA-L, and a backwards
search for an event boundary); workers decode pieces into Arrow columns with event indices
relative to the piece, and the main process shifts them into place, in order. A piece that
fails to decode in a worker is handled in the main process: merged with the next piece when
its boundary was false, or decoded again there to word the error with the right event index.
Small files (one piece), and loaders already running inside a worker process, stay serial.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import msgspec

from tracekit.errors import BadInputError
from tracekit.limits import MAX_EVENT
from tracekit.parsers.kineto.msgspec_reader import decode_buffer
from tracekit.parsers.kineto.piece import Piece, shift_piece
from tracekit.parsers.kineto.read import CHUNK_BYTES, event_too_large, join_arrays

_SPLIT = "split"  # the piece did not decode: a false boundary (or broken JSON)
_BAD = "bad"  # the piece is bad input: decode again in the main process for the message


def _worker(buf: bytes, path: str) -> Piece | str:
    try:
        return decode_buffer(buf, 0, Path(path))
    except BadInputError:
        return _BAD
    except msgspec.DecodeError:
        return _SPLIT


def usable_jobs(jobs: int) -> int:
    """Worker processes cannot start their own pools (daemonic): stay serial there."""
    return 1 if mp.current_process().daemon else max(1, jobs)


class PieceDecoder:
    """Decode pieces in order; ``pending`` keeps an undecodable tail for the final split."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pieces: list[Piece] = []
        self.count = 0
        self.pending = b""
        self.done = 0  # bytes of the pieces decoded so far (about: for messages)

    def _take(self, piece: Piece) -> None:
        self.pieces.append(piece)
        self.count += piece.n_events

    def _serial(self, buf: bytes, sep: bytes) -> None:
        data = join_arrays(self.pending, sep, buf) if self.pending else buf
        try:
            piece = decode_buffer(data, self.count, self.path)
        except BadInputError:
            raise
        except msgspec.DecodeError:
            self.pending = data  # merge with the next piece
            if len(data) > MAX_EVENT.bytes() + 2 * CHUNK_BYTES:
                raise event_too_large(self.path, self.done) from None
            return
        self.pending = b""
        self.done += len(data)
        self._take(piece)

    def _resolve(self, buf: bytes, sep: bytes, result: Piece | str) -> None:
        if self.pending or result == _BAD:
            self._serial(buf, sep)
        elif result == _SPLIT:
            self.pending = buf
        else:
            assert isinstance(result, Piece)
            self._take(shift_piece(result, self.count))

    def run(self, bufs: Iterable[tuple[bytes, bytes]], jobs: int) -> None:
        """Decode (array, separator) pieces in order, in ``jobs`` processes when > 1."""
        it: Iterator[tuple[bytes, bytes]] = iter(bufs)
        head = list(itertools.islice(it, 2))
        if jobs <= 1 or len(head) < 2:
            for buf, sep in itertools.chain(head, it):
                self._serial(buf, sep)
            return
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        window: deque[tuple[bytes, bytes, Future[Piece | str]]] = deque()
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            for buf, sep in itertools.chain(head, it):
                window.append((buf, sep, pool.submit(_worker, buf, str(self.path))))
                if len(window) > 2 * jobs:
                    done, done_sep, fut = window.popleft()
                    self._resolve(done, done_sep, fut.result())
            while window:
                done, done_sep, fut = window.popleft()
                self._resolve(done, done_sep, fut.result())
