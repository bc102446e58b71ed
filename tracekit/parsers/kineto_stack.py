"""Call sites: the innermost user Python frames (``python_function`` events) enclosing each
communication event on its thread, e.g.
``attn_tp_all_reduce (sglang/srt/layers/communicator.py:412) <- forward (...)``.

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
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto_codes import masked
from tracekit.parsers.kineto_nest import codes, dict_mask, one_chunk, unique_pairs
from tracekit.schema import Kind

_BITS = 10  # bits per label id in a packed label path (DEPTH * _BITS < 63)
DEPTH = 6  # user frames kept: SGLang helpers sit 3-4 frames above the c10d call, plus callers
_DICT = pa.dictionary(pa.int32(), pa.string())
# frames that belong to the framework rather than the user's code
EXCLUDED_FILES = (
    "torch/", "torch_npu/", "contextlib.py", "functools.py", "threading.py", "typing.py",
    "multiprocessing/", "runpy.py", "<frozen", "concurrent/futures/", "typing_extensions.py",
)
# kernels that are communication although kineto gives them no args (custom AR, DeepEP...)
COMM_KERNEL_HINT = re.compile(
    r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|deep_?ep|"
    r"dispatch|combine|cross_device|multimem|hccl|moe_?distribute",
    re.IGNORECASE,
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


@lru_cache(maxsize=1 << 16)
def _comm_hint(name: str) -> bool:
    """The name looks like a communication kernel (COMM_KERNEL_HINT)."""
    return COMM_KERNEL_HINT.search(name) is not None


def _np(col: pa.ChunkedArray | pa.Array, rows: np.ndarray, fill: int = -1) -> np.ndarray:
    """int64 numpy values of ``col`` at ``rows`` (nulls as ``fill``); a writable copy."""
    arr = one_chunk(col)
    if arr.null_count == 0 and arr.type == pa.int64():
        return np.asarray(arr.to_numpy(zero_copy_only=True))[rows]  # indexed: a copy
    taken = arr.take(pa.array(rows, pa.int64()))
    return np.array(pc.fill_null(taken, fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _queries(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows that get a call site, and the (pid, tid, ts) to look up for each."""
    kind = table.column(S.KIND)
    has_op = np.asarray(pc.is_valid(table.column(S.OP)), dtype=bool)
    name = one_chunk(table.column(S.NAME))
    hint = np.array(
        [_comm_hint(v or "") for v in name.dictionary.to_pylist()] + [False]
    )[codes(name)]
    device = dict_mask(kind, (Kind.KERNEL, Kind.GPU_ANNOTATION))
    rows = np.flatnonzero(has_op | (device & hint))
    cols = (table.column(S.PID), table.column(S.TID), table.column(S.TS_NS))
    qp, qt, qts = (_np(c, rows) for c in cols)
    dev = device[rows]
    if dev.any():
        # device rows: the thread and time of the runtime call that launched them
        runtime = np.flatnonzero(dict_mask(kind, (Kind.RUNTIME,)))
        rt_corr = _np(table.column(S.CORRELATION), runtime)
        order = np.argsort(rt_corr, kind="stable")
        sorted_corr = rt_corr[order]
        keys = _np(table.column(S.CORRELATION), rows[dev])
        qp[dev] = -1
        if sorted_corr.size:
            pos = np.clip(np.searchsorted(sorted_corr, keys), 0, sorted_corr.size - 1)
            hit = (sorted_corr[pos] == keys) & (keys >= 0)
            launch = runtime[order[pos]]
            lp, lt, lts = (_np(c, launch) for c in cols)
            qp[dev] = np.where(hit, lp, -1)
            qt[dev] = np.where(hit, lt, -1)
            qts[dev] = np.where(hit, lts, -1)
    return rows, qp, qt, qts


def call_sites(table: pa.Table) -> pa.Array:
    """CALL_SITE for every row of an EVENTS-like table (null where none applies)."""
    n = table.num_rows
    frames = np.flatnonzero(dict_mask(table.column(S.KIND), (Kind.PYTHON,)))
    if not frames.size or not n:
        return pa.nulls(n, _DICT)
    rows, qp, qt, qts = _queries(table)
    if not rows.size:
        return pa.nulls(n, _DICT)
    # frame columns, sorted by (pid, tid, start, longest first); each array is replaced by
    # its sorted copy one at a time, so that few frame-sized arrays are alive at once
    pid, tid = _np(table.column(S.PID), frames), _np(table.column(S.TID), frames)
    start = _np(table.column(S.TS_NS), frames)
    dur = _np(table.column(S.DUR_NS), frames, 0)
    order = np.lexsort((-dur, start, tid, pid))
    end = start + dur
    del dur
    pid = pid[order]
    tid = tid[order]
    start = start[order]
    end = end[order]
    frames = frames[order]
    parent = _parents(pid, _np(table.column(S.PY_ID), frames),
                      _np(table.column(S.PY_PARENT_ID), frames))
    del order
    label_id, label_text = _labels(one_chunk(table.column(S.NAME)), frames)
    frame = _enclosing(pid, tid, start, end, parent, qp, qt, qts)
    del pid, tid, start, end, qp, qt, qts
    # format each distinct innermost frame once, then spread to the queries
    uniq, inverse = np.unique(frame, return_inverse=True)
    codes, texts = _texts(uniq, parent, label_id, label_text)
    text_code = np.append(codes, -1).astype(np.int32)
    row_code = np.full(n, -1, dtype=np.int32)
    row_code[rows] = inverse
    row_code = text_code[row_code]  # rows without a query read the appended -1
    return pa.DictionaryArray.from_arrays(masked(row_code, row_code >= 0, pa.int32()),
                                          pa.array(texts, pa.string()))


def _parents(pid: np.ndarray, py_id: np.ndarray, parent_id: np.ndarray) -> np.ndarray:
    """Position of each frame's parent (same pid, ``Python id`` == its parent id), -1 when
    unknown."""
    id_order = np.lexsort((py_id, pid))
    ids_sorted, pids_sorted = py_id[id_order], pid[id_order]
    del py_id
    pos = _pid_search(pids_sorted, ids_sorted, pid, parent_id)
    pos = np.clip(pos, 0, ids_sorted.size - 1)
    found = (ids_sorted[pos] == parent_id) & (pids_sorted[pos] == pid) & (parent_id >= 0)
    return np.where(found, id_order[pos], -1)


def _enclosing(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray,
               parent: np.ndarray, qp: np.ndarray, qt: np.ndarray,
               qts: np.ndarray) -> np.ndarray:
    """Index of the innermost frame (sorted by pid, tid, start) enclosing each query, or -1.

    Per thread, the last frame that starts at or before the query; then, while that frame
    ended before the query, its parent (all queries at once, one level per round)."""
    frame = np.full(qp.size, -1, dtype=np.int64)
    for p, t in unique_pairs(qp, qt):
        if p < 0:
            continue
        lo = int(np.searchsorted(pid, p, side="left"))
        hi = int(np.searchsorted(pid, p, side="right"))
        lo += int(np.searchsorted(tid[lo:hi], t, side="left"))
        hi = lo + int(np.searchsorted(tid[lo:hi], t, side="right"))
        if lo == hi:
            continue
        sel = np.flatnonzero((qp == p) & (qt == t))
        js = lo + np.searchsorted(start[lo:hi], qts[sel], side="right") - 1
        frame[sel] = np.where(js >= lo, js, -1)
    while True:
        valid = frame >= 0
        ended = np.zeros(frame.size, dtype=bool)
        ended[valid] = end[frame[valid]] < qts[valid]
        if not ended.any():
            return frame
        frame[ended] = parent[frame[ended]]


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
