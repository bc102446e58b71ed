"""Interval unions and overlaps on many independent lanes at once, by sorting and sweeping.

Every function takes flat numpy arrays (a lane key per interval, start, end) and works on all
lanes together: each lane is shifted onto its own stretch of one number line, so one sort, one
running maximum and one ``searchsorted`` serve every lane. No Python loop runs over intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

I64 = npt.NDArray[np.int64]
_LIMIT = np.int64(2**62)
LINE_LIMIT = _LIMIT  # the shared line: lanes (or keys) times their width stay below it
_SORTED_SEARCH = 4096  # Union.overlap: from this many intervals on, searched in start order
_DENSE_RANGE = 4  # _sorted_codes: a present-mask where the value range is at most ~4x the rows


@dataclass(frozen=True)
class Lanes:
    """A shared coordinate system: lane k occupies [k * width, (k + 1) * width)."""

    origin: I64  # per lane: earliest time seen, mapped to the lane's offset
    width: int

    @classmethod
    def build(cls, lane: I64, start: I64, end: I64, n_lanes: int) -> Lanes:
        origin = np.full(n_lanes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(origin, lane, start)
        origin[origin == np.iinfo(np.int64).max] = 0
        span = int((end - origin[lane]).max(initial=0)) + 1
        if span * max(n_lanes, 1) >= _LIMIT:
            raise OverflowError("time span times lanes exceeds int64; split the input")
        return cls(origin, span)

    def place(self, lane: I64, t: I64) -> I64:
        """Map a time to the shared line, clamped to its lane's stretch."""
        local = t - self.origin[lane]
        np.clip(local, 0, self.width, out=local)
        local += np.asarray(lane, dtype=np.int64) * self.width
        return local

    def unplace(self, lane: I64, placed: I64) -> I64:
        """Inverse of ``place`` for points inside the lane's stretch."""
        return placed - lane.astype(np.int64) * self.width + self.origin[lane]


@dataclass(frozen=True)
class Union:
    """Sorted disjoint segments on the shared line plus cumulative covered length."""

    start: I64
    end: I64
    lane: I64
    cum: I64  # covered length before segment i

    def covered_before(self, t: I64) -> I64:
        """Length of the union inside (-inf, t) for each t on the shared line."""
        if self.start.size == 0:
            return np.zeros_like(t)
        k = np.searchsorted(self.start, t, side="right") - 1
        kc = np.clip(k, 0, None)
        inside = np.clip(t - self.start[kc], 0, self.end[kc] - self.start[kc])
        return np.where(k >= 0, self.cum[kc] + inside, 0)

    def overlap(self, a: I64, b: I64) -> I64:
        """Length of [a, b) covered by the union (a, b on the shared line). Intervals out of
        order are searched in the order of their starts (the binary searches of ascending
        keys stay near each other: half the time on 131k intervals, sort included)."""
        if a.size < _SORTED_SEARCH or _ascending(a):
            return self.covered_before(b) - self.covered_before(a)
        order = np.argsort(a, kind="stable")
        a, b = np.take(a, order), np.take(b, order)
        out = np.empty(order.size, dtype=np.int64)
        out[order] = self.covered_before(b) - self.covered_before(a)
        return out

    def length_by_lane(self, n_lanes: int) -> I64:
        return np.bincount(self.lane, weights=self.end - self.start, minlength=n_lanes).astype(
            np.int64)


def union(lanes: Lanes, lane: I64, start: I64, end: I64) -> Union:
    """Merge the intervals of each lane: sort by placed start, running max of the end."""
    if start.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return Union(e, e, e, e)
    s = lanes.place(lane, start)
    e = lanes.place(lane, np.maximum(end, start))
    if not _ascending(s):  # callers usually pass rows sorted by (lane, start): no sort then
        order = np.argsort(s, kind="stable")
        s, e, lane = s[order], e[order], lane[order]
    ln = lane
    run = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run[:-1]
    first = np.flatnonzero(new)
    seg_s = s[first]
    seg_e = np.maximum.reduceat(e, first)
    lengths = seg_e - seg_s
    cum = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Union(seg_s, seg_e, ln[first].astype(np.int64), cum)


def _ascending(x: I64) -> bool:
    return bool(x.size < 2 or (x[1:] >= x[:-1]).all())


def by_key(keys: I64, n_keys: int) -> I64 | None:
    """A stable order that groups rows by key (None when they already are), by a radix sort
    where the keys fit 16 bits: rows sorted by (lane, start) whose key refines the lane come
    out sorted by (key, start), so the union that follows needs no sort of its own."""
    if _ascending(keys):
        return None
    small = keys.astype(np.uint16) if n_keys <= np.iinfo(np.uint16).max else keys
    return np.argsort(small, kind="stable")


def union_length(keys: I64, start: I64, end: I64, n_keys: int) -> I64:
    """Busy time (length of the union of intervals) per key, nested intervals counted once."""
    if start.size == 0:
        return np.zeros(n_keys, dtype=np.int64)
    order = by_key(keys, n_keys)
    if order is not None:
        keys, start, end = keys[order], start[order], end[order]
    lanes = Lanes.build(keys, start, end, n_keys)
    return union(lanes, keys, start, end).length_by_lane(n_keys)


@dataclass(frozen=True)
class Segments:
    """The union of intervals per key as disjoint segments in their own times (not placed on
    a shared line), in (key, start) order: what a coarser key's union can start from."""

    key: I64
    start: I64
    end: I64

    def length(self, n_keys: int) -> I64:
        """Busy time per key (``union_length`` of the intervals these segments merge)."""
        return np.bincount(self.key, weights=self.end - self.start,
                           minlength=n_keys).astype(np.int64)

    def merged(self, of_key: I64, n_keys: int) -> Segments:
        """The union per coarser key (``of_key``: each key's coarser one): the union of the
        keys' segments is that of their intervals, and there are fewer segments than
        intervals wherever intervals overlap."""
        return segments(of_key[self.key], self.start, self.end, n_keys)


def segments(keys: I64, start: I64, end: I64, n_keys: int) -> Segments:
    """The union of the intervals of each key (rows in any order; grouped by key and sorted
    by start, no sort runs)."""
    if start.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return Segments(e, e, e)
    order = by_key(keys, n_keys)
    if order is not None:
        keys, start, end = keys[order], start[order], end[order]
    ordered = _ordered_segments(keys, start, end, n_keys)
    if ordered is not None:
        return ordered
    lanes = Lanes.build(keys, start, end, n_keys)
    u = union(lanes, keys, start, end)
    return Segments(u.lane, lanes.unplace(u.lane, u.start), lanes.unplace(u.lane, u.end))


def _ordered_segments(keys: I64, start: I64, end: I64, n_keys: int) -> Segments | None:
    """``segments`` of rows grouped by key and in start order within each (the timeline's
    order), None otherwise: each key's first row is its earliest start, so the keys are
    laid on one line by an offset per key (no clip, no sort) and the segments come back in
    the rows' own times. (An interval ending before it starts counts from its start to its
    start, where the general path clips it: either way a segment of no length.)"""
    step = keys[1:] != keys[:-1]
    if not ((start[1:] >= start[:-1]) | step).all():
        return None
    heads = np.concatenate([[0], np.flatnonzero(step) + 1])
    placed_end = np.maximum(end, start)
    origin = np.zeros(n_keys, dtype=np.int64)
    origin[keys[heads]] = start[heads]
    width = int((np.maximum.reduceat(placed_end, heads) - start[heads]).max()) + 1
    if width * max(n_keys, 1) >= _LIMIT:
        return None  # the general path raises
    offset = np.arange(n_keys, dtype=np.int64) * width - origin
    shift = np.take(offset, keys)
    placed_end += shift
    run = np.maximum.accumulate(placed_end)
    new = np.ones(start.size, dtype=bool)
    # a row starts a segment where its placed start (start + shift) passes the running end
    # before it: compared as start > run - shift, in place (no placed-start array)
    np.subtract(run[:-1], shift[1:], out=run[:-1])
    np.greater(start[1:], run[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return Segments(keys[first], start[first],
                    np.maximum.reduceat(placed_end, first) - shift[first])


def uncovered(lanes: Lanes, cover: Union, lane: I64, start: I64, end: I64) -> I64:
    """For each interval, the part of it not covered by ``cover`` on the same lane."""
    stop = np.maximum(end, start)
    return (stop - start) - cover.overlap(lanes.place(lane, start), lanes.place(lane, stop))


def group_rows(*columns: I64) -> tuple[npt.NDArray[np.int64], I64]:
    """Distinct rows of integer columns (sorted) and each input row's index among them.

    Like ``np.unique(np.stack(columns, 1), axis=0, return_inverse=True)`` but through one
    1-D unique of a mixed-radix int64 code, which is many times faster.
    """
    n = columns[0].size
    if n == 0:
        return np.zeros((0, len(columns)), dtype=np.int64), np.zeros(0, dtype=np.int64)
    dense = _dense_rows(columns)
    if dense is not None:
        return dense
    code = np.zeros(n, dtype=np.int64)
    levels = []
    for col in columns:
        values, inv = _sorted_codes(col)
        levels.append(values)
        code = code * values.size + inv
    uniq_code, inverse = _sorted_codes(code)
    rows = np.empty((uniq_code.size, len(columns)), dtype=np.int64)
    rest = uniq_code
    for k in range(len(columns) - 1, -1, -1):
        size = levels[k].size
        rows[:, k] = levels[k][rest % size]
        rest = rest // size
    return rows, inverse


def _dense_rows(columns: tuple[I64, ...]) -> tuple[npt.NDArray[np.int64], I64] | None:
    """``group_rows`` in one pass where the product of the columns' value ranges is not much
    wider than the rows: a mixed-radix code of the values' offsets, whose sorted codes are
    the sorted distinct rows (None where the ranges are too wide)."""
    n = columns[0].size
    bounds = [(int(c.min()), int(c.max())) for c in columns]
    spans = [hi - lo + 1 for lo, hi in bounds]
    if int(np.prod(np.asarray(spans, dtype=object))) >= _DENSE_RANGE * n + 1024:
        return None
    # the offset first (no value near the int64 limits overflows), into one scratch array
    code = np.subtract(columns[0], bounds[0][0], dtype=np.int64)
    scratch = np.empty(n, dtype=np.int64) if len(columns) > 1 else code
    for col, (lo, _), span in zip(columns[1:], bounds[1:], spans[1:], strict=True):
        code *= span
        np.subtract(col, lo, out=scratch, dtype=np.int64)
        code += scratch
    uniq_code, inverse = _sorted_codes(code)
    rows = np.empty((uniq_code.size, len(columns)), dtype=np.int64)
    rest = uniq_code
    for k in range(len(columns) - 1, -1, -1):
        rows[:, k] = rest % spans[k] + bounds[k][0]
        rest = rest // spans[k]
    return rows, inverse


def _sorted_codes(col: I64) -> tuple[I64, I64]:
    """``np.unique(col, return_inverse=True)`` in O(n): where the values span a range not
    much wider than the rows (lanes, phases, layers, mixed-radix codes), a present-mask over
    that range and its running count; else by hashing and sorting only the distinct values."""
    col = np.asarray(col, dtype=np.int64)
    if col.size:
        lo, hi = int(col.min()), int(col.max())
        if hi - lo < _DENSE_RANGE * col.size + 1024:
            offset = col - lo
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[offset] = True
            values = np.flatnonzero(present)
            # each value's rank among the present ones, written only at the present values:
            # the table's other pages are never touched (a running count over the whole
            # range wrote 8 bytes per value of the range)
            rank = np.empty(present.size, dtype=np.int64)
            rank[values] = np.arange(values.size, dtype=np.int64)
            return values.astype(np.int64, copy=False) + lo, np.take(rank, offset)
    codes, values = pd.factorize(col, sort=True)
    return np.asarray(values, dtype=np.int64), codes.astype(np.int64, copy=False)


def lane_start_order(lane: I64, start: I64) -> I64:
    """``np.lexsort((start, lane))`` (stable: ties keep their order) by one stable sort of a
    combined int64 key where lane times the time span fits, which is several times faster."""
    if start.size == 0:
        return np.zeros(0, dtype=np.int64)
    lo = int(start.min())
    width = int(start.max()) - lo + 1
    if int(lane.min()) < 0 or (int(lane.max()) + 1) * width >= _LIMIT:
        return np.lexsort((start, lane))
    key = lane.astype(np.int64) * width
    key += start
    key -= lo
    return np.argsort(key, kind="stable")
