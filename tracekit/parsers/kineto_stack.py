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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto_nest import codes, dict_mask, one_chunk, unique_pairs
from tracekit.schema import Kind

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


def frame_label(name: str) -> str | None:
    """``func (file:line)`` for a user frame, None for a framework or builtin frame."""
    m = _FRAME.match(name)
    if m is None:
        return None
    path = m.group("file")
    if any(x in path for x in EXCLUDED_FILES) or path.startswith("<"):
        return None
    return f"{m.group('func')} ({path}:{m.group('line')})"


def _np(col: pa.ChunkedArray | pa.Array, rows: np.ndarray, fill: int = -1) -> np.ndarray:
    """int64 numpy values of ``col`` at ``rows`` (nulls as ``fill``)."""
    taken = col.take(pa.array(rows, pa.int64()))
    return np.array(pc.fill_null(taken, fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _queries(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows that get a call site, and the (pid, tid, ts) to look up for each."""
    kind = table.column(S.KIND)
    has_op = np.asarray(pc.is_valid(table.column(S.OP)), dtype=bool)
    name = one_chunk(table.column(S.NAME))
    hint = np.array(
        [bool(COMM_KERNEL_HINT.search(v or "")) for v in name.dictionary.to_pylist()] + [False]
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
    pid, tid = _np(table.column(S.PID), frames), _np(table.column(S.TID), frames)
    start = _np(table.column(S.TS_NS), frames)
    end = start + _np(table.column(S.DUR_NS), frames, 0)
    py_id = _np(table.column(S.PY_ID), frames)
    parent_id = _np(table.column(S.PY_PARENT_ID), frames)
    order = np.lexsort((-(end - start), start, tid, pid))
    pid, tid, start, end = pid[order], tid[order], start[order], end[order]
    py_id, parent_id, frames = py_id[order], parent_id[order], frames[order]
    # parent position of each sorted frame (same pid), -1 when unknown
    id_order = np.lexsort((py_id, pid))
    ids_sorted, pids_sorted = py_id[id_order], pid[id_order]
    pos = _pid_search(pids_sorted, ids_sorted, pid, parent_id)
    pos = np.clip(pos, 0, ids_sorted.size - 1)
    found = (ids_sorted[pos] == parent_id) & (pids_sorted[pos] == pid) & (parent_id >= 0)
    parent = np.where(found, id_order[pos], -1)
    label_id, label_text = _labels(one_chunk(table.column(S.NAME)), frames)
    frame = _enclosing(pid, tid, start, end, parent, qp, qt, qts)
    # format each distinct innermost frame once, then spread to the queries
    uniq, inverse = np.unique(frame, return_inverse=True)
    texts = _texts(uniq, parent, label_id, label_text)
    # distinct frames can print the same text: keep the dictionary unique
    distinct: dict[str, int] = {}
    text_code = np.array([distinct.setdefault(t, len(distinct)) if t is not None else -1
                          for t in texts] + [-1], dtype=np.int32)
    row_code = np.full(n, -1, dtype=np.int32)
    row_code[rows] = inverse
    row_code = text_code[row_code]
    valid = row_code >= 0
    return pa.DictionaryArray.from_arrays(
        pa.array(row_code, mask=~valid, type=pa.int32()),
        pa.array(list(distinct), pa.string()))


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
           label_text: list[str]) -> list[str | None]:
    """``label <- label ...`` of each frame (None for -1, or when no user frame encloses it):
    the first DEPTH user-frame labels from the frame outwards through its parents.

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
    memo: dict[tuple[int, ...], str | None] = {}
    out: list[str | None] = []
    for row, c in zip(parts.tolist(), count.tolist(), strict=True):
        key = tuple(row[:c])
        if key not in memo:
            memo[key] = " <- ".join(label_text[k] for k in key) if key else None
        out.append(memo[key])
    return out
