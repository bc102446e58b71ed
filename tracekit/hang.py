"""The hang doctor: desyncs, blocked ranks and mismatches from every rank's Flight Recorder.

For each communicator (pg name and description) every member's dump says the highest
sequence id it entered. Sequence ids count up by one per collective on each rank, so when
the members disagree the first desynchronised id is ``min + 1``: the members that reached it
entered it, the others did not (an evicted older entry does not matter: a rank whose newest
entry is ``k`` entered every id up to ``k``). What a missing rank was doing instead is its
last entry. Group and path of every entry come from the rules engine of `tracekit analyze`
(process-group description, members against the topology, call sites from the frames).
For each sequence id entered by two or more members, op, dtypes, shapes (where the op needs
equal shapes) and the attributed path are compared; the first differing id of each
communicator is reported (after it, pairing ids across ranks proves nothing).
Point-to-point entries are left out (their ids count per pair; gloo records none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.schema import Op

# ops whose every member passes tensors of the same shapes (torch fr_trace's match rules
# exempt all_to_all, gather, scatter and the v-collectives)
SAME_SHAPES = {Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST, Op.REDUCE,
               Op.BARRIER}
COMPARED = (S.OP, S.IN_DTYPES, S.OUT_DTYPES, S.IN_SIZES, S.OUT_SIZES, S.PATH)


@dataclass
class HangReport:
    desyncs: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    communicators: int = 0
    versions: list[str] = field(default_factory=list)
    no_dump: dict[str, list[int]] = field(default_factory=dict)  # "name desc" -> members
    skipped: list[tuple[str, str]] = field(default_factory=list)
    frames: dict[int, str | None] = field(default_factory=dict)  # rank -> call site of last
    cause: bool = False  # the first desync is missed by fewer of its members than the next

    @property
    def found(self) -> bool:
        return bool(self.desyncs or self.mismatches)

    def to_json(self) -> dict[str, Any]:
        return {"desyncs": self.desyncs, "blocked": self.blocked, "mismatches": self.mismatches}


def attribute(fr: pa.Table, topology: Any | None = None,
              rules_files: tuple[Path, ...] = ()) -> pd.DataFrame:
    """FR rows (as pandas) with the engine's group, path, layer and status."""
    from tracekit import model
    from tracekit.parsers.flight_recorder.events import fr_run
    from tracekit.rules.engine import attribute_events, resolve_topology
    from tracekit.rules.loader import load_rules
    from tracekit.tables import to_pandas

    frame = to_pandas(fr)
    if not fr.num_rows:
        return frame.assign(**{S.GROUP: None, S.PATH: None, S.LAYER: None, S.STATUS: None})
    run = fr_run(fr)
    rules = load_rules(rules_files)
    topo = resolve_topology(run, model.AnalyzeOptions(topology=topology), rules)
    attributed, _ = attribute_events(run, rules, topo)
    verdict = to_pandas(attributed, [S.GROUP, S.PATH, S.LAYER, S.STATUS])
    return frame.join(verdict)


def _plain(value: Any) -> Any:
    """Arrow/pandas values as JSON-able Python values."""
    if value is None:
        return None
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def _text(value: Any) -> str | None:
    value = _plain(value)
    return None if value is None else str(value)


def _members(rows: pd.DataFrame) -> list[int]:
    known = rows[S.PG_RANKS].dropna()
    if len(known):
        return sorted(int(r) for r in _plain(known.iloc[0]))
    return sorted(int(r) for r in rows[S.RANK].unique())


def _entry(row: pd.Series) -> dict[str, Any]:
    return {"pg_name": _text(row[S.PG_NAME]), "pg_desc": _text(row[S.PG_DESC]),
            "group": _text(row[S.GROUP]), "path": _text(row[S.PATH]), "op": _text(row[S.OP]),
            "seq": int(row[S.SEQ])}


def _desync(rows: pd.DataFrame, members: list[int], dumped: set[int]) -> dict[str, Any] | None:
    have = [r for r in members if r in dumped]
    if len(have) < 2:
        return None
    hi = rows.groupby(S.RANK)[S.SEQ].max().reindex(have).fillna(0).astype(int)
    if hi.min() == hi.max():
        return None
    seq = int(hi.min()) + 1
    entered = sorted(int(r) for r in hi.index[hi >= seq])
    missing = sorted(int(r) for r in hi.index[hi < seq])
    at = rows[(rows[S.SEQ] == seq) & rows[S.RANK].isin(entered)].sort_values(S.RANK)
    head = at.iloc[0] if len(at) else rows[rows[S.RANK].isin(entered)].iloc[-1]
    out = _entry(head) | {"seq": seq, "entered_ranks": entered, "missing_ranks": missing}
    if not len(at):
        out |= {"group": _text(head[S.GROUP]), "path": None, "op": None}
    out["_ts"] = int(at[S.TS_NS].min()) if len(at) else int(head[S.TS_NS])
    return out


def _value_key(value: Any) -> str:
    return repr(_plain(value))


def _suspect_seqs(rows: pd.DataFrame) -> list[int]:
    """Sequence ids held by two or more ranks where some compared column takes more than
    one value (a superset of the mismatches: the exemptions are applied per id after)."""
    keys = pd.DataFrame({col: rows[col].map(_value_key) for col in COMPARED})
    keys[S.SEQ] = rows[S.SEQ].to_numpy()
    keys[S.PATH] = keys[S.PATH].where(rows[S.PATH].notna().to_numpy(), None)
    counts = keys.groupby(S.SEQ).nunique(dropna=True)
    ranks = rows.groupby(S.SEQ)[S.RANK].nunique()
    suspect = (counts > 1).any(axis=1) & (ranks.reindex(counts.index) > 1)
    return sorted(int(q) for q in counts.index[suspect.to_numpy()])


def _first_mismatch(rows: pd.DataFrame) -> dict[str, Any] | None:
    suspects = _suspect_seqs(rows)
    chosen = rows[rows[S.SEQ].isin(suspects)].sort_values([S.SEQ, S.RANK])
    for seq, at in chosen.groupby(S.SEQ, sort=True):
        fields = []
        ops = set(at[S.OP].dropna())
        for col in COMPARED:
            if col in (S.IN_SIZES, S.OUT_SIZES) and not ops <= SAME_SHAPES:
                continue
            known = at[at[col].notna()] if col == S.PATH else at
            groups: dict[str, list[int]] = {}
            values: dict[str, Any] = {}
            for r, v in zip(known[S.RANK], known[col], strict=True):
                k = _value_key(v)
                groups.setdefault(k, []).append(int(r))
                values[k] = _plain(v)
            if len(groups) > 1:
                fields.append({"field": col, "values": [
                    {"ranks": sorted(rs), "value": values[k]} for k, rs in groups.items()]})
        if fields:
            head = at.iloc[0]
            return {"pg_name": _text(head[S.PG_NAME]), "pg_desc": _text(head[S.PG_DESC]),
                    "group": _text(head[S.GROUP]), "seq": int(seq),
                    "ranks": sorted(int(r) for r in at[S.RANK]), "fields": fields,
                    "_ts": int(at[S.TS_NS].min())}
    return None


def _share(d: dict[str, Any]) -> float:
    return len(d["missing_ranks"]) / (len(d["missing_ranks"]) + len(d["entered_ranks"]))


def diagnose(frame: pd.DataFrame, dumped: set[int]) -> HangReport:
    """Desyncs, blocked ranks and mismatches of an attributed FR frame (see ``attribute``)."""
    report = HangReport(ranks=sorted(dumped))
    report.versions = sorted(set(frame[S.FR_VERSION].dropna())) if len(frame) else []
    coll = frame[~frame[S.IS_P2P].fillna(False).astype(bool)]
    missing_somewhere: set[int] = set()
    keys = coll[[S.PG_NAME, S.PG_DESC]].drop_duplicates().itertuples(index=False, name=None)
    for name, desc in keys:
        rows = coll[(coll[S.PG_NAME] == name) & (coll[S.PG_DESC] == desc)]
        members = _members(rows)
        report.communicators += 1
        absent = [r for r in members if r not in dumped]
        if absent:
            report.no_dump[f"{name} {desc}"] = absent
        d = _desync(rows, members, dumped)
        if d is not None:
            report.desyncs.append(d)
            missing_somewhere.update(d["missing_ranks"])
        m = _first_mismatch(rows)
        if m is not None:
            report.mismatches.append(m)
    # likely cause first: the desync that the smallest share of its members missed (one
    # rank skipped it), then the earliest; the desyncs it caused follow
    report.desyncs.sort(key=lambda d: (_share(d), d["_ts"]))
    report.mismatches.sort(key=lambda d: d["_ts"])
    for d in (*report.desyncs, *report.mismatches):
        d.pop("_ts")
    report.cause = bool(report.desyncs) and (
        len(report.desyncs) == 1 or _share(report.desyncs[0]) < _share(report.desyncs[1]))
    for rank in sorted(missing_somewhere):
        mine = frame[frame[S.RANK] == rank]
        if len(mine):
            last = mine.iloc[-1]
            report.blocked.append({"rank": rank} | _entry(last))
            report.frames[rank] = _text(last[S.CALL_SITE])
    return report


def hang(path: Path, topology: Any | None = None, rules_files: tuple[Path, ...] = ()
         ) -> HangReport:
    """Read every dump under ``path`` and diagnose."""
    from tracekit.parsers.flight_recorder import load_dumps

    dumps = load_dumps(path)
    report = diagnose(attribute(dumps.table, topology, rules_files), set(dumps.files))
    report.skipped = dumps.skipped
    return report
