"""Read one Flight Recorder dump (pickle or JSON) into a checked plain dict.

A dump is data: the pickle is read by an Unpickler that refuses every global and persistent
id, so only dicts, lists, tuples, strings, numbers, booleans and None can come out of it.

Format facts (torch ``torch/csrc/distributed/c10d/FlightRecorder.hpp`` and, before it,
``NCCLUtils.hpp``; the reader side in ``torch/distributed/flight_recorder/components``):
top-level keys ``version``, ``entries``, ``pg_config``, ``pg_status`` (plus
``nccl_comm_state`` / ``comm_lib_version``); each entry has ``record_id``, ``pg_id``,
``process_group`` = (name, desc), ``collective_seq_id``, ``p2p_seq_id``, ``op_id``,
``profiling_name``, ``time_created_ns``, ``input_sizes``, ``output_sizes``, ``state``,
``retired``, ``time_discovered_started_ns`` / ``_completed_ns`` and, depending on the
version, ``is_p2p``, ``input_dtypes`` / ``output_dtypes``, ``timeout_ms``, ``duration_ms``,
``frames`` (pickle only: the JSON dump leaves the stacks out), ``thread_id``, ``thread_name``.
Format versions seen in torch's sources: "2.3" (NCCLUtils.hpp, torch 2.5), "2.4"
(FlightRecorder.hpp, torch 2.6), "2.7" and "2.10" (torch 2.13, which also records gloo).
The format's rule is "minor when adding fields, major when changing existing fields", so
every 2.x from 2.3 to 2.10 is read; any other version is refused.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

from tracekit.errors import BadInputError

MIN_MINOR, MAX_MINOR = 3, 10  # format versions 2.3 .. 2.10 (torch 2.5 .. 2.13)
REQUIRED = ("process_group", "profiling_name", "collective_seq_id", "time_created_ns",
            "input_sizes", "output_sizes", "state")
_VERSION = re.compile(r"^(\d+)\.(\d+)$")
_MAX_BYTES = 1 << 30


class _DataOnly(pickle.Unpickler):
    """Unpickler for plain data: no class, function or persistent object may be loaded."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}: a dump holds data only")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id: a dump holds data only")


def _decode(path: Path, raw: bytes) -> Any:
    head = raw.lstrip()[:1]
    if head == b"{":
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise BadInputError(f"not a Flight Recorder dump: invalid JSON ({exc})", path) from exc
    if raw[:1] != b"\x80":
        raise BadInputError("not a Flight Recorder dump (neither a pickle nor JSON)", path)
    try:
        return _DataOnly(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            KeyError, AttributeError, MemoryError, RecursionError) as exc:
        text = str(exc) or type(exc).__name__
        raise BadInputError(f"not a readable Flight Recorder pickle ({text})", path) from exc


def check_version(version: Any, path: Path) -> str:
    """The dump's format version as a string; unknown versions are refused."""
    m = _VERSION.match(str(version)) if isinstance(version, str) else None
    if m is None or int(m.group(1)) != 2 or not MIN_MINOR <= int(m.group(2)) <= MAX_MINOR:
        raise BadInputError(
            f"Flight Recorder format version {version!r} is not supported (tracekit reads "
            f"2.{MIN_MINOR} to 2.{MAX_MINOR}, written by torch 2.5 to 2.13)", path)
    return str(version)


def _check_entry(i: int, e: Any, path: Path) -> None:
    if not isinstance(e, dict):
        raise BadInputError(f"entry {i} is a {type(e).__name__}, not a dict", path)
    missing = [k for k in REQUIRED if k not in e]
    if missing:
        raise BadInputError(f"entry {i} has no {', '.join(missing)}", path)
    pg = e["process_group"]
    if not isinstance(pg, (list, tuple)) or len(pg) != 2 or not all(isinstance(x, str)
                                                                     for x in pg):
        raise BadInputError(f"entry {i}: process_group is not (name, desc)", path)
    if not isinstance(e["profiling_name"], str):
        raise BadInputError(f"entry {i}: profiling_name is not a string", path)
    for key in ("collective_seq_id", "time_created_ns"):
        if not isinstance(e[key], int) or isinstance(e[key], bool):
            raise BadInputError(f"entry {i}: {key} is not an integer", path)
    for key in ("input_sizes", "output_sizes"):
        sizes = e[key]
        if not isinstance(sizes, list) or not all(
                isinstance(s, list) and all(isinstance(d, int) for d in s) for s in sizes):
            raise BadInputError(f"entry {i}: {key} is not a list of shapes", path)


def read_dump(path: Path) -> dict[str, Any]:
    """The dump at ``path`` as a dict with a checked ``version`` and ``entries``."""
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES:
            raise BadInputError(f"{size} bytes: too large for a Flight Recorder dump", path)
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"cannot read: {exc.strerror or exc}", path) from exc
    if not raw:
        raise BadInputError("empty file, not a Flight Recorder dump", path)
    dump = _decode(path, raw)
    if not isinstance(dump, dict) or "version" not in dump:
        raise BadInputError("not a Flight Recorder dump (no 'version' key)", path)
    dump["version"] = check_version(dump["version"], path)
    entries = dump.get("entries", [])
    if not isinstance(entries, list):
        raise BadInputError("'entries' is not a list", path)
    for i, e in enumerate(entries):
        _check_entry(i, e, path)
    pg_config = dump.get("pg_config") or {}
    if not isinstance(pg_config, dict):
        raise BadInputError("'pg_config' is not a dict", path)
    dump["entries"], dump["pg_config"] = entries, pg_config
    return dump
