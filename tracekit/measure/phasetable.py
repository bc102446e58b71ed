"""PHASES: per (rank, phase, layer) time by class, exposed communication, bytes and bounds.

Rows come at three levels: per rank and layer (layer set), per rank over all layers (layer
null; this row also counts time outside any layer), and over all ranks (rank and layer null;
sums over ranks). Busy time per class is the union of intervals on each device (nested CPU
ops counted once) summed over the rank's devices; time whose row carries no phase counts as
``other``. Wait includes the notify (synchronisation) kernels' time, also given apart
(``notify_ns``, "notify ms"). ``format_phase_table`` renders the all-rank rows as plain text.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema
from tracekit.measure.crossrank import frame
from tracekit.measure.intervals import Segments, group_rows
from tracekit.measure.phases import (
    CLASS_COLUMNS,
    CLASSES,
    COMM,
    Timeline,
    exposed_of_segments,
    timeline_class_segments,
    uncovered_of_segments,
    value_codes,
)
from tracekit.schema import Phase

_SUMS = (schema.COUNT, schema.MSG_BYTES, schema.TRANSFER_NS, schema.WAIT_NS, schema.NOTIFY_NS,
         schema.BOUND_NS)
_BOUNDED = "_bounded_transfer"
# the MEASURED columns phase_table reads
MEASURED_COLUMNS = (schema.RANK, schema.PHASE, schema.LAYER, schema.MSG_BYTES, schema.TRANSFER_NS,
                    schema.WAIT_NS, schema.NOTIFY_NS, schema.BOUND_NS)


def _phase_layer(attributed: pa.Table, rows: npt.NDArray[np.int64]
                 ) -> tuple[np.ndarray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sorted phase names, each row's index among them (null phase: other), and its layer
    (-1: none). Phases are few: they are looked up once per distinct value, never decoded
    or compared per row as strings."""
    phase = attributed.column(schema.PHASE)
    # dictionary chunks: coded on every row through the dictionary and the rows picked from
    # the codes (a take of the rows keeps the same dictionaries); text: the rows taken
    whole = all(pa.types.is_dictionary(chunk.type) for chunk in phase.chunks)
    sub = attributed.select([schema.PHASE]) if whole else \
        attributed.select([schema.PHASE]).take(pa.array(rows))
    words = {Phase.OTHER}
    for chunk in sub.column(schema.PHASE).chunks:
        distinct = chunk.dictionary if pa.types.is_dictionary(chunk.type) else pc.unique(chunk)
        words.update(w for w in distinct.to_pylist() if w is not None)
    names = np.asarray(sorted(words), dtype=str)  # unused names are never indexed
    codes = value_codes(sub, schema.PHASE, tuple(str(w) for w in names)).astype(np.int64)
    if whole:
        codes = codes[rows]
    codes[codes == -2] = int(np.flatnonzero(names == Phase.OTHER)[0])
    layer = np.asarray(pc.fill_null(attributed.column(schema.LAYER), -1).to_numpy(),
                       dtype=np.int64)[rows]
    return names, codes, layer


def _time_by_key(tl: Timeline, names: np.ndarray, phase_code: npt.NDArray[np.int64],
                 layer: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (rank, phase, layer) and per (rank, phase) over all layers (layer -1): class busy
    time and exposed communication."""
    keys, inv = group_rows(tl.lane, phase_code, layer)
    n = len(keys)
    per_layer = timeline_class_segments(tl, inv, n)
    comm = per_layer[COMM]
    exposed = uncovered_of_segments(tl, comm, keys[:, 0])
    # over all layers: the union of each (lane, phase) from its layers' segments, fewer than
    # its rows wherever they overlap
    coarse, of_key = group_rows(keys[:, 0], keys[:, 1])
    n_all = len(coarse)
    all_layers = [seg.merged(of_key, n_all) for seg in per_layer]
    # where no two layers' communication segments merged, they are the coarser key's
    # segments and their exposed parts are the same
    all_exposed = np.bincount(of_key[comm.key], weights=exposed, minlength=n_all).astype(
        np.int64) if all_layers[COMM].key.size == comm.key.size else exposed_of_segments(
        tl, all_layers[COMM], n_all, coarse[:, 0])
    flat = np.column_stack([coarse, np.full(n_all, -1, dtype=np.int64)])
    return (_key_frame(tl, names, keys, per_layer,
                       np.bincount(comm.key, weights=exposed, minlength=n).astype(np.int64)),
            _key_frame(tl, names, flat, all_layers, all_exposed))


def _key_frame(tl: Timeline, names: np.ndarray, keys: npt.NDArray[np.int64],
               per_class: list[Segments], exposed: np.ndarray) -> pd.DataFrame:
    """The per-key frame of (lane, phase code, layer) keys, their unions by class and their
    exposed communication."""
    n = len(keys)
    # grouped on the phase's code, not its text: the names are sorted, so the codes sort
    # as the names do; the names are put in once per group after
    data: dict[str, np.ndarray] = {
        schema.RANK: tl.lane_rank[keys[:, 0]], schema.PHASE: keys[:, 1],
        schema.LAYER: keys[:, 2],
    }
    for col, seg in zip(CLASS_COLUMNS, per_class, strict=True):
        data[col] = seg.length(n)
    data[schema.EXPOSED_NS] = exposed
    frame = pd.DataFrame(data).groupby([schema.RANK, schema.PHASE, schema.LAYER],
                                       as_index=False).sum()
    frame[schema.PHASE] = names[frame[schema.PHASE].to_numpy()]
    return frame


def phase_table(tl: Timeline, attributed: pa.Table, measured: pd.DataFrame) -> pa.Table:
    """PHASES from the timeline (time classes) and the MEASURED rows (bytes, bounds, wait;
    ``measured`` needs only the MEASURED_COLUMNS)."""
    names, phase, layer = _phase_layer(attributed, tl.row)
    per_layer, all_layers = _time_by_key(tl, names, phase, layer)
    if per_layer.empty and measured.empty:  # no device time and no collective (issue 16)
        return schema.PHASES.empty_table()
    m = measured.copy()
    m[schema.PHASE] = m[schema.PHASE].fillna(Phase.OTHER)
    m[schema.LAYER] = m[schema.LAYER].fillna(-1).astype("int64")
    m[schema.COUNT] = 1
    bounded = m[schema.BOUND_NS].notna() & m[schema.TRANSFER_NS].notna()
    m[_BOUNDED] = m[schema.TRANSFER_NS].where(bounded, 0)
    sums = [*_SUMS, _BOUNDED]
    keys = [schema.RANK, schema.PHASE, schema.LAYER]
    by_layer = m.groupby(keys, as_index=False)[sums].sum(min_count=1)
    if all(pd.api.types.is_integer_dtype(m[c].dtype) for c in sums):
        # over all layers: the sums of the layers' sums (integers: exact; missing only where
        # every row is), a groupby of the few per-layer rows instead of all of them again
        by_rank = by_layer.groupby([schema.RANK, schema.PHASE], as_index=False)[sums].sum(
            min_count=1)
        by_rank.insert(2, schema.LAYER, np.full(len(by_rank), -1, dtype=np.int64))
    else:
        by_rank = m.assign(**{schema.LAYER: -1}).groupby(keys, as_index=False)[sums].sum(
            min_count=1)
    lay = per_layer[per_layer[schema.LAYER] >= 0].merge(
        by_layer[by_layer[schema.LAYER] >= 0], on=keys, how="outer")
    tot = all_layers.merge(by_rank, on=keys, how="outer")
    frame = pd.concat([lay, tot], ignore_index=True)
    everyone = tot.drop(columns=[schema.RANK]).groupby([schema.PHASE, schema.LAYER],
                                                       as_index=False).sum(min_count=1)
    everyone[schema.RANK] = -1
    frame = pd.concat([frame, everyone], ignore_index=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = frame[schema.BOUND_NS].astype("float64") / frame[_BOUNDED].astype("float64")
    frame[schema.EFFICIENCY] = eff.where(frame[_BOUNDED].fillna(0) > 0)
    for col in (*CLASS_COLUMNS, schema.EXPOSED_NS, schema.COUNT):
        frame[col] = frame[col].fillna(0)
    frame = frame.sort_values([schema.RANK, schema.PHASE, schema.LAYER], kind="stable")
    table = pa.Table.from_pandas(frame.drop(columns=[_BOUNDED]), preserve_index=False)
    for name in (schema.RANK, schema.LAYER):
        col = table.column(name)
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pc.if_else(pc.equal(col, -1), pa.scalar(None, col.type), col))
    return schema.conform(table, schema.PHASES)


def format_phase_table(phases: pa.Table) -> str:
    """Plain-text per-phase table (all-rank rows): what `tracekit analyze --hardware` prints."""
    df = frame(phases)
    df = df[df[schema.RANK].isna() & df[schema.LAYER].isna()]
    order = {p: i for i, p in enumerate(Phase.ALL)}
    df = df.sort_values(schema.PHASE, key=lambda s: s.map(order).fillna(len(order)))
    head = ("phase", "count", "MB", "comm ms", "fused ms", "exposed ms", "transfer ms",
            "wait ms", "notify ms", "bound ms", "efficiency")
    lines = [head]
    for rec in df.itertuples(index=False):
        r = rec._asdict()
        eff = r[schema.EFFICIENCY]
        lines.append((
            str(r[schema.PHASE]), str(int(r[schema.COUNT])), _num(r[schema.MSG_BYTES], 1e6),
            _num(r[schema.COMM_NS], 1e6), _num(r[schema.FUSED_NS], 1e6),
            _num(r[schema.EXPOSED_NS], 1e6), _num(r[schema.TRANSFER_NS], 1e6),
            _num(r[schema.WAIT_NS], 1e6), _num(r.get(schema.NOTIFY_NS), 1e6),
            _num(r[schema.BOUND_NS], 1e6),
            "-" if eff is None or pd.isna(eff) else f"{100 * eff:.1f}%",
        ))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                  enumerate(zip(row, widths, strict=True)))
        for row in lines) + "\n"


def _num(value: object, scale: float) -> str:
    if value is None or pd.isna(value):  # type: ignore[arg-type]
        return "-"
    return f"{float(value) / scale:.3f}"  # type: ignore[arg-type]


__all__ = ["CLASSES", "format_phase_table", "phase_table"]
