"""Call sites: the innermost user Python frames (``python_function`` events) enclosing an
event on its thread, e.g.
``attn_tp_all_reduce (sglang/srt/layers/communicator.py:412) <- forward (...)``.

The parser resolves them for the rows whose communication metadata it read (an op); which
other rows are communication is the rules' verdict, so the rules stage asks for those rows
(``call_sites_at``) from the links EVENTS carries (python ids and parent ids, correlation).

Vectorised: frames are sorted per thread and located with ``numpy.searchsorted``; parents come
from the ``Python parent id`` links. Only the walk up a few ancestors runs per query, and the
formatted stack of a frame is memoised. Device events use the thread and time of the runtime
call that launched them (same ``correlation``).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.dict_codes import masked
from tracekit.parsers.kineto.nest import (
    Launches,
    codes,
    dict_mask,
    ints_at,
    one_chunk,
    valid_mask,
)
from tracekit.schema import Kind

_BITS = 10  # bits per label id in a packed label path (DEPTH * _BITS < 63)
DEPTH = 6  # user frames kept: SGLang helpers sit 3-4 frames above the c10d call, plus callers
_DICT = pa.dictionary(pa.int32(), pa.string())
# frames that belong to the framework rather than the user's code
EXCLUDED_FILES = (
    "torch/", "torch_npu/", "contextlib.py", "functools.py", "threading.py", "typing.py",
    "multiprocessing/", "runpy.py", "<frozen", "concurrent/futures/", "typing_extensions.py",
)
_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")


@lru_cache(maxsize=1 << 16)
def frame_label(name: str) -> str | None:
    """``func (file:line)`` for a user frame, None for a framework or builtin frame
    (memoised: the same frames recur in every rank file of a run)."""
    m = _FRAME.match(name)
    if m is None:
        return None
    path = m.group("file")
    if any(x in path for x in EXCLUDED_FILES) or path.startswith("<"):
        return None
    return f"{m.group('func')} ({path}:{m.group('line')})"


def _queries(table: pa.Table, rows: np.ndarray, launches: Launches | None = None,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (pid, tid, ts) to look up for each of ``rows`` (-1: none)."""
    kind = table.column(S.KIND)
    device = dict_mask(kind, (Kind.KERNEL, Kind.GPU_ANNOTATION))
    # the row whose thread and time each query reads: its own, or for a device row the
    # runtime call that launched it (same correlation; -1: none)
    src = rows.copy()
    dev = device[rows]
    if dev.any():
        if launches is None:
            launches = Launches(kind, table.column(S.CORRELATION), table.column(S.EXTERNAL_ID))
        src[dev] = launches.find(ints_at(launches.correlation, rows[dev]))
    miss = src < 0
    safe = np.maximum(src, 0)
    qp, qt, qts = (ints_at(table.column(c), safe) for c in (S.PID, S.TID, S.TS_NS))
    if miss.any():
        qp[miss] = qt[miss] = qts[miss] = -1
    return qp, qt, qts


def call_sites(table: pa.Table, launches: Launches | None = None) -> pa.Array:
    """CALL_SITE for every row of an EVENTS-like table that carries an op (null elsewhere):
    what the parser knows to be communication from the trace's own metadata."""
    n = table.num_rows
    rows = np.flatnonzero(valid_mask(one_chunk(table.column(S.OP)))) if n else np.zeros(0, int)
    codes_, texts = call_sites_at(table, rows, launches)
    row_code = np.full(n, -1, dtype=np.int32)  # rows without a query: none
    row_code[rows] = codes_
    return pa.DictionaryArray.from_arrays(masked(row_code, row_code >= 0, pa.int32()),
                                          V.strings(texts))


def call_sites_at(table: pa.Table, rows: np.ndarray, launches: Launches | None = None,
                  ) -> tuple[np.ndarray, list[str]]:
    """The call site of each of ``rows`` of an EVENTS-like table (one rank's rows: pids and
    correlation ids are the rank's own): int32 codes into the returned texts, -1 where none.
    A device row reads the thread and time of the runtime call that launched it."""
    rows = np.asarray(rows, dtype=np.int64)
    none = np.full(rows.size, -1, dtype=np.int32)
    if not rows.size or not table.num_rows:
        return none, []
    frames = np.flatnonzero(dict_mask(table.column(S.KIND), (Kind.PYTHON,)))
    if not frames.size:
        return none, []
    qp, qt, qts = _queries(table, rows, launches)
    # frame columns, sorted by (pid, tid, start, longest first); each array is replaced by
    # its sorted copy one at a time, so that few frame-sized arrays are alive at once
    pid, tid = ints_at(table.column(S.PID), frames), ints_at(table.column(S.TID), frames)
    start = ints_at(table.column(S.TS_NS), frames)
    dur = ints_at(table.column(S.DUR_NS), frames, 0)
    order = frame_order(pid, tid, start, dur)
    end = start + dur
    del dur
    # ids read in row order (a gather in order costs less), then reordered with the rest
    py_id = ints_at(table.column(S.PY_ID), frames)
    parent_id = ints_at(table.column(S.PY_PARENT_ID), frames)
    if order is not None:
        pid = pid[order]
        tid = tid[order]
        start = start[order]
        end = end[order]
        frames = frames[order]
        py_id = py_id[order]
        parent_id = parent_id[order]
    parent = _parents(pid, py_id, parent_id)
    del order, py_id, parent_id
    label_id, label_text = _labels(one_chunk(table.column(S.NAME)), frames)
    frame = _enclosing(pid, tid, start, end, parent, qp, qt, qts)
    del pid, tid, start, end, qp, qt, qts
    # format each distinct innermost frame once, then spread to the queries
    uniq, inverse = _distinct(frame, parent.size)
    text_codes, texts = _texts(uniq, parent, label_id, label_text)
    return np.append(text_codes, -1).astype(np.int32)[inverse], texts


def frame_order(pid: np.ndarray, tid: np.ndarray, start: np.ndarray,
                dur: np.ndarray) -> np.ndarray | None:
    """``np.lexsort((-dur, start, tid, pid))``, or None when that is the identity (profilers
    write a thread's frames in start order). A constant key orders nothing and is left out;
    the duration only orders frames that start together on one thread, so it is sorted on
    only when two do (the order by start alone is then final)."""
    keys = [k for k in (tid, pid) if k.size and (k != k[0]).any()]
    if _in_order([*keys[::-1], start], dur):
        return None
    order = np.lexsort((start, *keys))
    sorted_start = start[order]
    tie = sorted_start[1:] == sorted_start[:-1]
    for k in keys:
        if not tie.any():
            break
        sk = k[order]
        tie &= sk[1:] == sk[:-1]
    if tie.any():
        return np.lexsort((-dur, start, *keys))
    return order


def _in_order(cols: list[np.ndarray], descending: np.ndarray) -> bool:
    """The rows are sorted by ``cols`` (the first the most significant), then by
    ``descending`` from largest to smallest, ties kept."""
    undecided: np.ndarray | None = None  # adjacent pairs equal on every column so far
    for col in cols:
        step = np.diff(col)
        if (step < 0 if undecided is None else step[undecided] < 0).any():
            return False
        undecided = step == 0 if undecided is None else undecided & (step == 0)
        if not undecided.any():
            return True
    if undecided is None:  # no ascending column
        return not (np.diff(descending) > 0).any()
    return not (np.diff(descending)[undecided] > 0).any()


def _distinct(frame: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(frame, return_inverse=True)`` for values in [-1, count): marked in a
    table of that size instead of sorted."""
    present = np.zeros(count + 1, dtype=bool)
    present[frame + 1] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) - 1, rank[frame + 1]


def _parents(pid: np.ndarray, py_id: np.ndarray, parent_id: np.ndarray) -> np.ndarray:
    """Position of each frame's parent (same pid, ``Python id`` == its parent id), -1 when
    unknown."""
    direct = _parents_direct(pid, py_id, parent_id)
    if direct is not None:
        return direct
    id_order = np.lexsort((py_id, pid))
    ids_sorted, pids_sorted = py_id[id_order], pid[id_order]
    del py_id
    pos = _pid_search(pids_sorted, ids_sorted, pid, parent_id)
    pos = np.clip(pos, 0, ids_sorted.size - 1)
    found = (ids_sorted[pos] == parent_id) & (pids_sorted[pos] == pid) & (parent_id >= 0)
    return np.where(found, id_order[pos], -1)


def _parents_direct(pid: np.ndarray, py_id: np.ndarray,
                    parent_id: np.ndarray) -> np.ndarray | None:
    """``_parents`` through a table indexed by (process, id) when the frames are in pid order
    and the ids are dense (Python ids count up from 1 per process); None otherwise, or when
    an id occurs twice in one process (the sorted search then picks the first)."""
    n = pid.size
    span = int(py_id.max()) + 1 if n else 0
    if span <= 0:
        return None
    if pid[0] == pid[-1] and not (pid != pid[0]).any():
        base: np.ndarray | int = 0
        groups = 1
    else:
        step = np.diff(pid)
        if (step < 0).any():
            return None
        group = np.zeros(n, dtype=np.int64)
        np.cumsum(step != 0, out=group[1:])
        groups = int(group[-1]) + 1
        base = group * span
    if groups * span > 4 * n + 1024:
        return None
    own = py_id >= 0
    key = (base + py_id)[own]
    at = np.flatnonzero(own)
    table = np.full(groups * span, -1, dtype=np.int32)
    table[key] = at
    if not (table[key] == at).all():
        return None
    found = (parent_id >= 0) & (parent_id < span)
    out = np.full(n, -1, dtype=np.int64)
    out[found] = table[(base + parent_id)[found] if groups > 1 else parent_id[found]]
    return out


def _enclosing(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray,
               parent: np.ndarray, qp: np.ndarray, qt: np.ndarray,
               qts: np.ndarray) -> np.ndarray:
    """Index of the innermost frame (sorted by pid, tid, start) enclosing each query, or -1.

    Per thread, the last frame that starts at or before the query; then, while that frame
    ended before the query, its parent (all queries at once, one level per round)."""
    frame = np.full(qp.size, -1, dtype=np.int64)
    # the queries of one thread at a time, threads taken in order of first query (a few
    # threads: one pass each, no sort of the queries by thread)
    todo = qp >= 0
    while todo.any():
        first = int(np.argmax(todo))
        p, t = int(qp[first]), int(qt[first])
        mine = todo & (qp == p) & (qt == t)
        todo &= ~mine
        lo = int(np.searchsorted(pid, p, side="left"))
        hi = int(np.searchsorted(pid, p, side="right"))
        lo += int(np.searchsorted(tid[lo:hi], t, side="left"))
        hi = lo + int(np.searchsorted(tid[lo:hi], t, side="right"))
        if lo == hi:
            continue
        sel = np.flatnonzero(mine)
        js = lo + np.searchsorted(start[lo:hi], qts[sel], side="right") - 1
        frame[sel] = np.where(js >= lo, js, -1)
    # only the queries whose frame ended before them move up (once enclosed or without a
    # frame, a query stays as it is); a walk longer than the frames count is in a parent
    # cycle (malformed ids) and finds no enclosing frame
    active = np.flatnonzero(frame >= 0)
    rounds = 0
    while active.size:
        active = active[end[frame[active]] < qts[active]]
        if rounds > parent.size:
            frame[active] = -1
            break
        frame[active] = parent[frame[active]]
        active = active[frame[active] >= 0]
        rounds += 1
    return frame


def _pid_search(pids_sorted: np.ndarray, ids_sorted: np.ndarray, pid: np.ndarray,
                parent_id: np.ndarray) -> np.ndarray:
    pos = np.zeros(pid.size, dtype=np.int64)
    for p in np.unique(pid):
        lo = np.searchsorted(pids_sorted, p, side="left")
        hi = np.searchsorted(pids_sorted, p, side="right")
        sel = pid == p
        pos[sel] = lo + np.searchsorted(ids_sorted[lo:hi], parent_id[sel])
    return pos


def _labels(names: pa.DictionaryArray, frames: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Label id of every frame (-1: not a user frame) and the text of each id."""
    text: list[str] = []
    ids: dict[str, int] = {}
    per_value = [ids.setdefault(lab, len(ids)) if (lab := frame_label(v) if v else None)
                 is not None else -1 for v in names.dictionary.to_pylist()]
    text = list(ids)
    lookup = np.array([*per_value, -1], dtype=np.int64)  # a null name reads the last -1
    return lookup[codes(names)[frames]], text


def _texts(frames: np.ndarray, parent: np.ndarray, label_id: np.ndarray,
           label_text: list[str]) -> tuple[np.ndarray, list[str]]:
    """``label <- label ...`` of each frame: the first DEPTH user-frame labels from the
    frame outwards through its parents. Returns the code of each frame's text (-1: none, for
    frame -1 or when no user frame encloses it) and the distinct texts, in order of first
    appearance among ``frames``.

    All frames walk up together, one level per round (a parent cycle stops after as many
    rounds as there are frames)."""
    n = frames.size
    parts = np.full((n, DEPTH), -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    at = frames.astype(np.int64, copy=True)
    active = np.flatnonzero(at >= 0)
    rounds = 0
    while active.size and rounds <= parent.size:
        here = at[active]
        lab = label_id[here]
        has = active[lab >= 0]
        parts[has, count[has]] = lab[lab >= 0]
        count[has] += 1
        at[active] = parent[here]
        active = active[(at[active] >= 0) & (count[active] < DEPTH)]
        rounds += 1
    # one text per distinct label path, numbered in order of first appearance
    if len(label_text) < (1 << _BITS) - 1:
        keys = np.zeros(n, dtype=np.int64)
        for j in range(DEPTH):
            keys |= (parts[:, j] + 1) << (_BITS * j)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    else:  # pragma: no cover - more distinct user frames than a packed key holds
        _, first, inverse = np.unique(parts, axis=0, return_index=True, return_inverse=True)
    codes = np.full(first.size, -1, dtype=np.int32)
    texts: list[str] = []
    for k in np.argsort(first, kind="stable").tolist():
        row = int(first[k])
        if count[row]:
            codes[k] = len(texts)
            texts.append(" <- ".join(label_text[i] for i in parts[row, : count[row]].tolist()))
    return codes[inverse.ravel()], texts
