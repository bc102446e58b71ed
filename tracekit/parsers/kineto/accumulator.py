"""Handle on one native accumulator (tracekit.parsers.kineto.native): feed it blocks of events, and
read back what each block flagged.

``Accumulator.feed`` is what a worker thread runs (ctypes releases the GIL during the C
call): it feeds one block and copies out, before returning, everything of that block the
caller needs later (the flagged events and the names their codes stand for), so that the
caller never reads C memory that the next block may move.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracekit.parsers.kineto import native as A
from tracekit.parsers.kineto.decode import COMM_FIELDS

N_PTRS = (len(A.ROW_INT64) + len(A.ROW_INT32) + len(A.ROW_VALID) + len(A.FLAG_INT64)
          + len(A.FLAG_INT8) + 4)
_FLAG_BASE = len(A.ROW_INT64) + len(A.ROW_INT32) + len(A.ROW_VALID)


@dataclass
class Fed:
    """One fed block: its flagged events (copies; ``aoff`` relative to the block) and the
    names of the codes first seen among them."""

    flags: dict[str, np.ndarray]
    names: dict[int, str]
    piece: Any = None  # the block as msgspec decoded it, when the accumulator declined it


def _view(ptr: int, ctype: Any, start: int, stop: int) -> np.ndarray:
    """A copy of C array elements [start, stop) (stop > start)."""
    arr = (ctype * (stop - start)).from_address(ptr + start * ctypes.sizeof(ctype))
    return np.ctypeslib.as_array(arr).copy()


class Accumulator:
    """Owns one accumulator: freed when the last Arrow buffer over its memory goes (Arrow
    buffers wrapping its arrays hold this object as their base)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.ptr = lib.tk_acc_new()
        if not self.ptr:
            raise MemoryError
        self.nflags = 0
        self.known: set[int] = set()

    def __del__(self) -> None:
        if getattr(self, "ptr", None):
            self.lib.tk_acc_free(self.ptr)
            self.ptr = None

    def info(self) -> dict[str, int]:
        out = (ctypes.c_int64 * len(A.INFO))()
        self.lib.tk_acc_info(self.ptr, out)
        return dict(zip(A.INFO, out, strict=True))

    def arrays(self) -> list[int]:
        out = (ctypes.c_void_p * N_PTRS)()
        self.lib.tk_acc_arrays(self.ptr, out)
        return [p or 0 for p in out]

    def comm_arrays(self) -> list[int]:
        """Pointers of the communication rows (see tk_acc_comm)."""
        out = (ctypes.c_void_p * (2 * len(COMM_FIELDS) + 3))()
        self.lib.tk_acc_comm(self.ptr, out)
        return [p or 0 for p in out]

    def feed(self, block: np.ndarray, length: int) -> Fed | None:
        """Feed the events of ``block[:length]`` (uint8; an optional leading comma, then
        events separated by commas); None when the block failed (its rows were rolled
        back)."""
        used = ctypes.c_int64(0)
        n = self.lib.tk_acc_feed(self.ptr, block.ctypes.data, length, 1, ctypes.byref(used))
        if n < 0:
            return None
        total = self.info()["flags"]
        first, self.nflags = self.nflags, total
        if total == first:
            return Fed({}, {})
        ptrs = self.arrays()
        flags = {k: _view(ptrs[_FLAG_BASE + i], ctypes.c_int64, first, total)
                 for i, k in enumerate(A.FLAG_INT64)}
        flags.update({k: _view(ptrs[_FLAG_BASE + len(A.FLAG_INT64) + i], ctypes.c_int8,
                               first, total) for i, k in enumerate(A.FLAG_INT8)})
        return Fed(flags, self._names(flags["name"], ptrs[-4], ptrs[-3]))

    def _names(self, codes: np.ndarray, offsets: int, data: int) -> dict[int, str]:
        out: dict[int, str] = {}
        for code in set(codes.tolist()) - self.known:
            if code >= 0:
                lo, hi = (ctypes.c_int32 * 2).from_address(offsets + 4 * code)
                out[code] = ctypes.string_at(data + lo, hi - lo).decode()
        self.known.update(out)
        return out

    def skip(self, n_events: int) -> None:
        """Count the events of a block decoded elsewhere (their indices stay in order)."""
        self.lib.tk_acc_skip(self.ptr, n_events)

    def events(self) -> int:
        """Events counted so far (the index of the next block's first event)."""
        return self.info()["events"]

    def done(self) -> None:
        """Reading is over: let the flag arrays and the hash tables go."""
        self.lib.tk_acc_done(self.ptr)
