"""The flow events of the original Kineto traces (ph "s" / "t" / "f"), for the Perfetto export.

EVENTS keeps only timed events (X, i), so the arrows a trace draws between them, ac2g (CPU
launch -> GPU kernel) and fwdbwd (forward op -> its backward), are read again from each rank's
file (RANK_INFO.source) when exporting. Times get the parser's exact nanosecond rule
(``kineto_decode.exact_ns``); ids, binding points (bp), names and categories are kept as
written. A rank whose file is not a Kineto JSON trace, or is no longer there, has no flows.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa

from tracekit import schema as s

FLOW_PHASES = ("s", "t", "f")
PH, ID, BP = "ph", "id", "bp"  # the trace-event keys, kept under their format names
KEYS = (PH, ID, BP, "pid", "tid", "ts", "name", "cat")
COLUMNS = (s.RANK, PH, ID, BP, s.PID, s.TID, s.TS_NS, s.NAME, s.CATEGORY)
KINETO = "kineto"  # RANK_INFO.format of a Kineto trace


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})


def _read(path: Path) -> list[dict[str, object]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    return events if isinstance(events, list) else []


def file_flows(path: Path, rank: int) -> pd.DataFrame:
    """The flow events of one trace file as rows of COLUMNS (empty when none)."""
    from tracekit.parsers.kineto.decode import exact_ns

    raw = pd.DataFrame.from_records(_read(path), columns=list(KEYS))
    flows = raw[raw[PH].isin(FLOW_PHASES) & raw["ts"].notna()].reset_index(drop=True)
    if flows.empty:
        return _empty()
    ts = exact_ns(flows["ts"].tolist())
    return pd.DataFrame({
        s.RANK: rank, PH: flows[PH], ID: flows[ID], BP: flows[BP],
        s.PID: pd.to_numeric(flows["pid"], errors="coerce"),
        s.TID: pd.to_numeric(flows["tid"], errors="coerce"),
        s.TS_NS: pa.chunked_array([ts]).to_pandas(), s.NAME: flows["name"],
        s.CATEGORY: flows["cat"],
    })[list(COLUMNS)]


def flows(rank_info: pa.Table | None) -> pd.DataFrame:
    """The flow events of every Kineto rank file of the run."""
    if rank_info is None or rank_info.num_rows == 0:
        return _empty()
    info = rank_info.select([s.RANK, s.SOURCE, s.FORMAT]).to_pandas()
    info = info[(info[s.FORMAT].astype(str) == KINETO) & info[s.SOURCE].notna()]
    files = info.drop_duplicates([s.RANK, s.SOURCE])
    parts = [file_flows(Path(str(src)), int(rank))
             for rank, src in zip(files[s.RANK], files[s.SOURCE], strict=True)
             if Path(str(src)).is_file()]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else _empty()
