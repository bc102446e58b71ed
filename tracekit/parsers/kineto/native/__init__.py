"""The native Kineto accumulator: a CPython extension module (``_accum``, built from
``accum.c`` by setuptools when the package is built) whose C functions are called through
ctypes (each call releases the GIL, so a worker thread scans a block while the main thread
reads the next).

``accumulator()`` returns the loaded library, or None when the extension is not built (a
pure-Python install: one warning line says what that costs) or ``TRACEKIT_NATIVE=0`` (no
warning: the caller chose msgspec). The JSON keys it knows are declared once, in
``tk_keys.h``; the extension exports them, and a build whose tables differ from the msgspec
decoder's fields (kineto_decode.Args, COMM_TYPES) is refused with the same warning.

The constants below give the order of the pointer tables the C functions fill.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
import warnings
from functools import cache
from types import ModuleType

# pointer table of tk_acc_arrays, in this order
ROW_INT64 = ("event_id", "pid", "tid", "ts", "dur", "external_id", "correlation", "py_id",
             "py_parent_id")
ROW_INT32 = ("name", "cat")
# validity bitmaps: every row column but event_id
ROW_VALID = ("name", "cat", "pid", "tid", "ts", "dur", "external_id", "correlation", "py_id",
             "py_parent_id")
FLAG_INT64 = ("event", "row", "pid", "tid", "aoff", "alen", "name")
FLAG_INT8 = ("phase", "pid_state", "tid_state", "comm")
PHASE_OTHER, PHASE_TIMED, PHASE_META = 0, 1, 2
# the FLAG_INT8 "comm" state of a flagged event: no communication row read here, a row read
# here (its args are decoded again only for their record_shapes or thread-name keys), or
# values left to msgspec (the event's args are decoded and msgspec decides)
COMM_NONE, COMM_READ, COMM_SLOW = 0, 1, 2
# how the accumulator reads each communication arg (COMM_KIND, kineto_decode.COMM_FIELDS order)
COMM_STRING, COMM_INT64, COMM_UINT64 = 0, 1, 2
# FLAG_INT8 pid_state / tid_state: the value was null, an int, a float, a string
NULL, INT, FLOAT, STRING = 0, 1, 2, 3
# tk_acc_info fields
INFO = ("rows", "events", "flags", "names", "cats", "comm_rows", "comm_strings")
_LOAD_LOCK = threading.Lock()

# what reading without the extension costs, measured with benchmarks/parse.py --size-mb 200
# --skip-hta --repeat 3 on 2 cores: 9.6x the CPU time of the load, 10.7-11.8x its wall time,
# 2.3x the peak RSS (docs/native-reader.md)
SLOWDOWN = "about 10x"
_MISSING = ("tracekit: the native Kineto reader is not built ({why}); Kineto files are read "
            "with msgspec, " + SLOWDOWN + " slower (reinstall tracekit where a C compiler is "
            "available, or set TRACEKIT_NATIVE=0 to choose msgspec silently)")


def enabled() -> bool:
    """False when ``TRACEKIT_NATIVE`` is 0 / false / no / off."""
    return os.environ.get("TRACEKIT_NATIVE", "1") not in ("0", "false", "no", "off")


def _module() -> ModuleType:
    """The extension module: the one built with the package, or the build that
    ``TRACEKIT_NATIVE_LIB`` names (a sanitizer build, tests/parsers/test_reader_sanitizers)."""
    other = os.environ.get("TRACEKIT_NATIVE_LIB")
    if not other:
        from tracekit.parsers.kineto.native import _accum  # type: ignore[attr-defined]

        return _accum
    spec = importlib.util.spec_from_file_location("tracekit.parsers.kineto.native._accum", other)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {other}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mismatch(mod: ModuleType) -> str | None:
    """What differs between the extension's key tables and the msgspec decoder's, or None."""
    import pyarrow as pa

    from tracekit.parsers.kineto.block_columns import COMM_TYPES
    from tracekit.parsers.kineto.decode import Args, Event

    fields = Args.__struct_encode_fields__
    kind = {pa.string(): COMM_STRING, pa.int64(): COMM_INT64, pa.uint64(): COMM_UINT64}
    want = {
        "EVENT_KEYS": tuple(Event.__struct_encode_fields__),
        "ID_KEYS": tuple(fields[:4]),
        "FLAG_KEYS": tuple(fields[4:]),
        "COMM_KIND": tuple(kind[t] for t in COMM_TYPES.values()),
    }
    for name, value in want.items():
        if tuple(getattr(mod, name, ())) != value:
            return f"its {name} differ from the msgspec decoder's"
    return None


def accumulator() -> ctypes.CDLL | None:
    """The accumulator library, or None (see the module docstring). Ranks parsed in
    threads at once load it once (one warning at most)."""
    if not enabled():
        return None
    with _LOAD_LOCK:
        return _loaded()


@cache
def _loaded() -> ctypes.CDLL | None:
    try:
        mod = _module()
    except ImportError as exc:
        warnings.warn(_MISSING.format(why=f"no extension module: {exc}"), RuntimeWarning,
                      stacklevel=2)
        return None
    why = _mismatch(mod)
    if why is not None:
        warnings.warn(_MISSING.format(why=why), RuntimeWarning, stacklevel=2)
        return None
    return _bind(ctypes.CDLL(mod.__file__))


def reader_name() -> str:
    """The reader a Kineto file gets in this process: ``native`` or ``msgspec``."""
    return "native" if accumulator() is not None else "msgspec"


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.tk_acc_new.argtypes = []
    lib.tk_acc_new.restype = ctypes.c_void_p
    lib.tk_acc_free.argtypes = [ctypes.c_void_p]
    lib.tk_acc_free.restype = None
    lib.tk_boundary.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.tk_boundary.restype = ctypes.c_int64
    lib.tk_acc_feed.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    lib.tk_acc_feed.restype = ctypes.c_int64
    lib.tk_acc_skip.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.tk_acc_skip.restype = None
    lib.tk_acc_intern.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                  ctypes.c_int64]
    lib.tk_acc_intern.restype = ctypes.c_int32
    lib.tk_acc_done.argtypes = [ctypes.c_void_p]
    lib.tk_acc_done.restype = None
    for fn in (lib.tk_acc_info, lib.tk_acc_arrays, lib.tk_acc_comm):
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = None
    return lib
