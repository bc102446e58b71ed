"""Links inside one Ascend rank: launching cpu_op -> device event, and Python call sites.

* ``EXTERNAL_ID``: the ``async_npu`` flow (``torch_to_npu``) starts inside the cpu_op that
  launched the work and ends on the device event (TRACE_FORMATS.md B.7). Both get the
  launching cpu_op's event index as external id (Kineto's convention: a kernel and its CPU op
  share one External id). Device rows sharing a connection_id with a linked row inherit it.
* ``CALL_SITE``: the innermost user Python frames around the launching cpu_op, from the
  ``python_function`` events (Python id / parent id) or, when there are none, from the
  cpu_op's ``Call stack`` arg (frames joined by ``;\\r\\n``, innermost first).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto.call_sites import DEPTH as MAX_FRAMES
from tracekit.parsers.kineto.call_sites import frame_label
from tracekit.schema import Kind

# the call-site format and the framework-frame filter are Kineto's (kineto_call_sites), so that
# call-site rules read both formats the same way: ``func (file:line) <- ...``
MAX_DEPTH = 256
SEP = " <- "


def _frame(cols: dict[str, pa.Array]) -> pd.DataFrame:
    return pd.DataFrame({
        "idx": np.arange(len(cols[S.TS_NS]), dtype="int64"),
        "pid": cols.get("_raw_pid", cols[S.PID]).to_pandas(),
        "tid": cols.get("_raw_tid", cols[S.TID]).to_pandas(),
        "ts": cols[S.TS_NS].to_numpy(zero_copy_only=False),
        "end": pc.add(cols[S.TS_NS], cols[S.DUR_NS]).to_numpy(zero_copy_only=False),
        "kind": cols[S.KIND].to_pandas(),
    })


def _innermost(points: pd.DataFrame, spans: pd.DataFrame) -> pd.Series:
    """For each point (pid, tid, ts), the index of the latest-starting span on the same
    thread that still contains it (shortest first on equal starts); -1 when none."""
    if points.empty or spans.empty:
        return pd.Series(-1, index=points.index, dtype="int64")
    left = points[["pid", "tid", "ts"]].assign(_row=np.arange(len(points)))
    left = left.dropna(subset=["pid", "tid"]).astype({"pid": "int64", "tid": "int64"})
    right = spans.sort_values(["ts", "end"], ascending=[True, False])[["pid", "tid", "ts", "end",
                                                                       "idx"]]
    right = right.dropna(subset=["pid", "tid"]).astype({"pid": "int64", "tid": "int64"})
    m = pd.merge_asof(left.sort_values("ts"), right, on="ts", by=["pid", "tid"],
                      direction="backward")
    hit = m["idx"].notna() & (m["end"] >= m["ts"])
    out = np.full(len(points), -1, dtype="int64")
    out[m.loc[hit, "_row"].to_numpy()] = m.loc[hit, "idx"].to_numpy().astype("int64")
    return pd.Series(out, index=points.index)


def launch_links(cols: dict[str, pa.Array], flows: pa.Table) -> pa.Array:
    n = len(cols[S.TS_NS])
    ev = _frame(cols)
    ext = np.full(n, -1, dtype="int64")
    fl = flows.to_pandas()
    if not fl.empty:
        starts = fl[fl["ph"] == "s"].rename(columns={S.PID: "pid", S.TID: "tid", S.TS_NS: "ts"})
        ends = fl[fl["ph"] == "f"].rename(columns={S.PID: "pid", S.TID: "tid", S.TS_NS: "ts"})
        starts = starts.assign(src=_innermost(starts, ev[ev["kind"] == Kind.CPU_OP]).to_numpy())
        dev = ev[cols[S.DEVICE].is_valid().to_numpy(zero_copy_only=False)]
        dev = dev.sort_values("end", ascending=False).drop_duplicates(["pid", "tid", "ts"])
        ends = ends.merge(dev[["pid", "tid", "ts", "idx"]], on=["pid", "tid", "ts"], how="inner")
        pairs = ends.merge(starts[["id", "src"]], on="id")
        pairs = pairs[pairs["src"] >= 0]
        ext[pairs["idx"].to_numpy()] = pairs["src"].to_numpy()
        ext[pairs["src"].to_numpy()] = pairs["src"].to_numpy()
    # device rows sharing a connection_id (a launch's hardware tasks, an HCCL op) share the link
    conn = cols[S.CORRELATION].to_pandas()
    on_dev = cols[S.DEVICE].is_valid().to_numpy(zero_copy_only=False) | (
        ev["kind"] == Kind.RUNTIME).to_numpy()
    df = pd.DataFrame({"conn": conn, "ext": ext})[on_dev & conn.notna().to_numpy()]
    known = df[df["ext"] >= 0].drop_duplicates("conn").set_index("conn")["ext"]
    fill = df["conn"].map(known)
    take = fill.notna().to_numpy() & (df["ext"] < 0).to_numpy()
    ext[df.index.to_numpy()[take]] = fill[take].astype("int64").to_numpy()
    arr = pa.array(ext, pa.int64())
    return pc.if_else(pc.less(arr, 0), pa.scalar(None, pa.int64()), arr)


def user_frames(frames: list[str]) -> str | None:
    """Innermost-first frames (``file(line): func``) -> the call-site string."""
    labels = [frame_label(f.strip()) for f in frames if f and f.strip()]
    return SEP.join([x for x in labels if x is not None][:MAX_FRAMES]) or None


def call_sites(cols: dict[str, pa.Array]) -> pa.Array:
    n = len(cols[S.TS_NS])
    ev = _frame(cols)
    py = ev[ev["kind"] == Kind.PYTHON]
    names = cols[S.NAME].to_pylist()
    sites = pa.nulls(n, pa.string())
    cpu = ev[ev["kind"] == Kind.CPU_OP]
    if not py.empty and not cpu.empty:
        parent_of = _python_parents(cols, py)
        leaf = _innermost(cpu, py).to_numpy()
        # one frame chain per distinct innermost python_function, not per event
        chains = {int(p): _chain(int(p), names, parent_of) for p in np.unique(leaf[leaf >= 0])}
        per_cpu = pd.Series(leaf).map(chains).where(pd.Series(leaf) >= 0, None)
        full = np.full(n, None, dtype=object)
        full[cpu["idx"].to_numpy()] = per_cpu.to_numpy()
        sites = pa.array(full, pa.string(), from_pandas=True)
    # cpu_ops without python_function ancestry: their own "Call stack" arg (unique stacks only)
    stacks = pc.dictionary_encode(cols["_call_stack"])
    parsed = pa.array([user_frames(t.split(";\r\n")) if t else None
                       for t in stacks.dictionary.to_pylist()], pa.string())
    sites = pc.coalesce(sites, pc.take(parsed, stacks.indices))
    # device events and other rows linked to a cpu_op take its call site
    return pc.coalesce(sites, pc.take(sites, cols[S.EXTERNAL_ID]))


def _chain(leaf: int, names: list[str], parent_of: dict[int, int]) -> str | None:
    """The innermost MAX_FRAMES user frames from ``leaf`` up through its parents."""
    kept: list[str] = []
    cur, depth = leaf, 0
    while cur >= 0 and depth < MAX_DEPTH and len(kept) < MAX_FRAMES:
        label = frame_label(names[cur].strip())
        if label is not None:
            kept.append(label)
        cur, depth = parent_of.get(cur, -1), depth + 1
    return SEP.join(kept) or None


def _python_parents(cols: dict[str, pa.Array], py: pd.DataFrame) -> dict[int, int]:
    """Row index of each python_function's parent (same pid, by Python parent id)."""
    ids = cols[S.PY_ID].to_pandas().iloc[py["idx"]]
    parents = cols[S.PY_PARENT_ID].to_pandas().iloc[py["idx"]]
    by_id = pd.Series(py["idx"].to_numpy(), index=pd.MultiIndex.from_arrays(
        [py["pid"].to_numpy(), ids.to_numpy()]))
    by_id = by_id[~by_id.index.duplicated()]
    keys = pd.MultiIndex.from_arrays([py["pid"].to_numpy(), parents.to_numpy()])
    found = by_id.reindex(keys)
    mask = found.notna().to_numpy()
    return dict(zip(py["idx"].to_numpy()[mask].tolist(),
                    found.to_numpy()[mask].astype("int64").tolist(), strict=True))
