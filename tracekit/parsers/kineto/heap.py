"""The allocation policy of the steps that allocate and free many column-sized temporaries
(glibc only; elsewhere nothing changes): building EVENTS after the native scan
(tracekit.parsers.kineto.events_table.build_events_from) and the stages after the parse: the
in-memory run (tracekit.pipeline.in_memory) enters one policy for all of them, from the first
summary to the last report, and the partitioned worker (tracekit.pipeline.per_rank) one per
rank group, so a stage reuses the pages the one before it freed.

The parse leaves glibc giving every block of ``LARGE_BLOCK`` (1 MiB) or more pages of its own,
unmapped when freed (``tracekit.parsers.kineto.sparse_columns.lean_memory``: that keeps the
scan's peak RSS low), and with glibc's 128 KiB trim threshold. Under that policy each
temporary (a 1.6M-row int64 column of the 500 MB benchmark rank is 12.7 MB; a 147k-row one of
the 8-rank synth run 1.2 MB) is a fresh mapping, or heap top given back and taken again,
whose every page faults in: the kernel's share came to a third of the attribute stage's CPU
time (about 210k minor faults per attribution of the 8-rank synth run) and to about 110k
faults, 0.2-0.4 s of kernel time, of building EVENTS on the benchmark rank. While such a step
runs, blocks below ``REUSED_BLOCK`` come from the heap, where freed ones are reused, and up to
``KEPT_TOP`` of free memory at the heap's top is kept; on exit the parse's policy is set again
and the heap's free pages are given back (``malloc_trim``), so what the step freed does not
stay resident for the steps after it.

While such a step runs numpy also stops madvising huge pages for its arrays of 4 MB or more
(on exit its setting before the outermost use is set again). With transparent huge pages in
``madvise`` mode and ``defrag=madvise`` (this VM's), the first touch of such an array's pages
makes the kernel compact memory for a 2 MB page: one attribution of the 8-rank synth run spent
0.32-0.70 s of system time with it and 0.17-0.22 s without (wall 1.82-2.10 -> 1.62-1.78 s, three
fresh processes each, alternated). The parse's native scan is left as it was (switching it off
for the whole run made the parse slower, 0.61-0.63 -> 0.69-0.74 s wall).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import numpy as np

from tracekit.parsers.kineto.sparse_columns import LARGE_BLOCK, c_library

# glibc's own ceiling for the threshold it raises as blocks are freed (DEFAULT_MMAP_THRESHOLD_MAX
# on 64-bit): blocks below it are reused from the heap, larger ones still get pages of their own
REUSED_BLOCK = 32 << 20
_M_MMAP_THRESHOLD = -3  # glibc mallopt parameters
_M_TRIM_THRESHOLD = -1
# free memory at the top of the heap is kept up to this much while the stage runs (glibc
# otherwise gives back everything above 128 KiB at each free, once the threshold above is set,
# and the next temporary faults its pages in again); glibc's default is set again on exit
KEPT_TOP = 64 << 20
DEFAULT_TRIM = 128 << 10
_LOCK = threading.Lock()
_depth = [0]
_huge: list[bool | None] = [None]  # numpy's huge-page setting before the outermost use
_trim = [True]  # the outermost use's ``trim``


@contextmanager
def reused_heap(*, trim: bool = True) -> Iterator[None]:
    """Blocks below ``REUSED_BLOCK`` from glibc's heap, and ``KEPT_TOP`` of its free top kept,
    while the body runs; the outermost of nested or concurrent uses (a rank's EVENTS built
    while another thread attributes) sets both, and on exit
    sets the parse's thresholds (glibc has no getter to restore from) and, with ``trim``
    (the outermost use's), gives the heap's free pages back: not worth its system time
    when the process ends next (the CLI's scope, tracekit.pipeline.in_memory)."""
    libc = c_library()
    with _LOCK:
        outermost = not _depth[0]
        _depth[0] += 1
        if outermost:
            _trim[0] = trim
    if outermost:
        _huge[0] = huge_pages(False)
    if outermost and libc is not None:
        with suppress(AttributeError):  # not glibc
            libc.mallopt(_M_MMAP_THRESHOLD, REUSED_BLOCK)
            libc.mallopt(_M_TRIM_THRESHOLD, KEPT_TOP)
    try:
        yield
    finally:
        with _LOCK:
            _depth[0] -= 1
            last = not _depth[0]
        if last and libc is not None:
            with suppress(AttributeError):
                libc.mallopt(_M_TRIM_THRESHOLD, DEFAULT_TRIM)
                libc.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)
                if _trim[0]:
                    libc.malloc_trim(0)
        if last and _huge[0] is not None:
            huge_pages(_huge[0])


def huge_pages(enabled: bool) -> bool | None:
    """Set whether numpy madvises huge pages for its large arrays; the previous setting, or
    None where this numpy has no such switch."""
    core = getattr(np, "_core", None)  # numpy 2; numpy 1's is np.core
    multiarray = getattr(np.core if core is None else core, "multiarray", None)
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    return None if switch is None else bool(switch(enabled))
