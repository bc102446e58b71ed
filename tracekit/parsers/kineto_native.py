"""The native code, compiled on first use and loaded with ctypes: the ``traceEvents`` piece
scanner (kineto_scan_c; ``scan`` returns its columns as numpy arrays, or None when it is
unavailable (no C compiler, ``TRACEKIT_NATIVE=0``) or declines a piece) and the whole-file
accumulator (kineto_accum_c; ``accumulator`` returns the library or None).

Each shared library is cached under ``$TRACEKIT_NATIVE_DIR`` (default
``~/.cache/tracekit/native``), named by a hash of its source, and written under a temporary
name then renamed, so that concurrent processes never load a half-written file.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracekit.parsers import kineto_scan_c as C
from tracekit.parsers.kineto_decode import Args

EVENT_KEYS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args")
_ID_FIELDS = 4  # Args starts with External id, correlation, Python id, Python parent id
ID_KEYS = Args.__struct_encode_fields__[:_ID_FIELDS]
FLAG_KEYS = Args.__struct_encode_fields__[_ID_FIELDS:]  # comm and record_shapes keys
_SMALL = -2  # tk_scan: the arrays are too small
_FLAGS = ("-O3", "-shared", "-fPIC")
_MAX_BYTES = (1 << 31) - 1  # string offsets are int32


class _CapacityError(Exception):
    """More events than the arrays were sized for."""


def enabled() -> bool:
    return os.environ.get("TRACEKIT_NATIVE", "1") not in ("0", "false", "no", "off")


def _cache_dir() -> Path:
    env = os.environ.get("TRACEKIT_NATIVE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "tracekit" / "native"


def _compile(src: str, target: Path) -> None:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise OSError("no C compiler")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        c_file = Path(tmp) / "scan.c"
        c_file.write_text(src)
        built = Path(tmp) / target.name
        subprocess.run([cc, *_FLAGS, "-o", str(built), str(c_file)],
                       check=True, capture_output=True, timeout=120)
        os.replace(built, target)


def _prune(keep: Path, stem: str) -> None:
    """Remove the libraries of older sources of ``stem`` (best effort; a loaded one stays
    mapped in the processes using it)."""
    for old in keep.parent.glob(f"{stem}_*.so"):
        if old != keep:
            with contextlib.suppress(OSError):
                old.unlink()


def _load(stem: str, src: str) -> ctypes.CDLL | None:
    """The shared library of ``src``, compiled once into the cache (None: cannot build)."""
    where = f"{sys.platform}-{platform.machine()}"
    tag = hashlib.sha256(f"{src}{_FLAGS}{where}".encode()).hexdigest()[:16]
    target = _cache_dir() / f"{stem}_{tag}.so"
    try:
        if not target.exists():
            _compile(src, target)
            _prune(target, stem)
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError):
        return None


@cache
def _library() -> ctypes.CDLL | None:
    lib = _load("kineto_scan", C.source(EVENT_KEYS, ID_KEYS, FLAG_KEYS))
    if lib is None:
        return None
    fn = lib.tk_scan
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                   ctypes.POINTER(ctypes.c_void_p)]
    fn.restype = ctypes.c_int64
    return lib


@cache
def accumulator() -> ctypes.CDLL | None:
    """The whole-file accumulator (kineto_accum_c), or None when it cannot be built or
    ``TRACEKIT_NATIVE=0``."""
    if not enabled():
        return None
    from tracekit.parsers import kineto_accum_c as A

    lib = _load("kineto_accum", A.source(EVENT_KEYS, ID_KEYS, FLAG_KEYS, comm_kinds()))
    if lib is None:
        return None
    lib.tk_acc_new.argtypes = []
    lib.tk_acc_new.restype = ctypes.c_void_p
    lib.tk_acc_free.argtypes = [ctypes.c_void_p]
    lib.tk_acc_free.restype = None
    lib.tk_boundary.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.tk_boundary.restype = ctypes.c_int64
    lib.tk_acc_feed.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    lib.tk_acc_feed.restype = ctypes.c_int64
    lib.tk_acc_done.argtypes = [ctypes.c_void_p]
    lib.tk_acc_done.restype = None
    for fn in (lib.tk_acc_info, lib.tk_acc_arrays, lib.tk_acc_comm):
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = None
    return lib


def comm_kinds() -> tuple[int, ...]:
    """How the accumulator reads each communication arg (the first FLAG_KEYS): by its
    column type in the comm side table."""
    from tracekit.parsers import kineto_accum_c as A
    from tracekit.parsers.kineto_decode import COMM_FIELDS
    from tracekit.parsers.kineto_piece import COMM_TYPES

    kind = {pa.string(): A.COMM_STRING, pa.int64(): A.COMM_INT64, pa.uint64(): A.COMM_UINT64}
    return tuple(kind[COMM_TYPES[f]] for f in COMM_FIELDS)


def available() -> bool:
    return enabled() and _library() is not None


@dataclass
class Scanned:
    """Columns of one piece: ``ival`` / ``state`` rows follow C.INT_COLUMNS, ``dval`` rows
    C.FLOAT_COLUMNS; ``strings`` the three string columns; ``args`` the (start, length) of
    the flagged args objects (length 0: none)."""

    n: int
    ival: np.ndarray
    dval: np.ndarray
    state: np.ndarray
    strings: list[pa.StringArray]
    arg_start: np.ndarray
    arg_len: np.ndarray


def scan(doc: bytes) -> Scanned | None:
    """Scan a JSON array of events; None when the scanner is unavailable or declines."""
    lib = _library() if enabled() else None
    if lib is None or len(doc) >= _MAX_BYTES:
        return None
    if not isinstance(doc, bytes):
        doc = bytes(doc)
    try:
        return _scan(lib, doc, len(doc) // 64 + 64)  # a guess, then a bound ("{}," each)
    except _CapacityError:
        try:
            return _scan(lib, doc, len(doc) // 3 + 2)
        except _CapacityError:  # pragma: no cover - the bound holds
            return None


def _scan(lib: ctypes.CDLL, doc: bytes, cap: int) -> Scanned | None:
    try:
        return _scan_into(lib, doc, cap)
    except MemoryError:  # the scratch arrays: let the msgspec path try
        return None


class _Scratch:
    """The scanner's output arrays, kept between pieces (fresh ones would cost a page fault
    per 4 KiB written); everything read from them is copied out before the next scan."""

    def __init__(self, cap: int, size: int) -> None:
        ni, ns = len(C.INT_COLUMNS), len(C.STRING_COLUMNS)
        self.cap, self.size = cap, size
        self.ival = np.empty((ni, cap), dtype=np.int64)
        self.dval = np.empty((len(C.FLOAT_COLUMNS), cap), dtype=np.float64)
        self.state = np.empty((ni, cap), dtype=np.int8)
        self.soff = np.empty((ns, cap + 1), dtype=np.int32)
        self.sdata = np.empty((ns, size), dtype=np.uint8)
        self.snull = np.empty((ns, cap), dtype=np.int8)
        self.aoff = np.empty(cap, dtype=np.int64)
        self.alen = np.empty(cap, dtype=np.int64)
        arrays = (self.ival, self.dval, self.state, self.soff, self.sdata, self.snull,
                  self.aoff, self.alen)
        self.ptrs = (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))


_local = threading.local()  # one scratch per thread: the scan runs without the GIL
_KEEP_BYTES = 64 << 20  # a whole document (the safe path) gets scratch of its own


def _scratch_for(cap: int, size: int) -> _Scratch:
    if size > _KEEP_BYTES:
        return _Scratch(cap, size)
    x: _Scratch | None = getattr(_local, "scratch", None)
    if x is None or x.cap < cap or x.size < size:
        _local.scratch = None  # let the old arrays go first
        x = _local.scratch = _Scratch(cap, max(size, 1))
    return x


def release_scratch() -> None:
    """Let this thread's scratch arrays go (once a file's pieces are all scanned)."""
    _local.scratch = None


def _scan_into(lib: ctypes.CDLL, doc: bytes, cap: int) -> Scanned | None:
    ns = len(C.STRING_COLUMNS)
    x = _scratch_for(cap, len(doc))
    n = int(lib.tk_scan(doc, len(doc), x.cap, x.size, x.ptrs))
    if n == _SMALL:
        raise _CapacityError
    if n <= 0:  # declined; or no events: the msgspec path
        return None
    soff, sdata, snull = x.soff, x.sdata, x.snull
    strings = []
    for c in range(ns):
        end = int(soff[c, n])
        valid = snull[c, :n] == 0
        strings.append(pa.StringArray.from_buffers(
            n, pa.py_buffer(soff[c, : n + 1].copy()), pa.py_buffer(sdata[c, :end].copy()),
            None if valid.all() else pa.array(valid).buffers()[1]))
    return Scanned(n, x.ival[:, :n], x.dval[:, :n], x.state[:, :n], strings, x.aoff[:n],
                   x.alen[:n])
