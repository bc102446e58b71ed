"""Which files of a run directory are Kineto rank traces (by name, then by their first MB)."""

from __future__ import annotations

from pathlib import Path

from tracekit.errors import BadInputError
from tracekit.parsers.kineto.read import open_trace, read_block

TRACE_SUFFIXES = (".json", ".json.gz")
# files that sit beside rank traces and are not traces themselves
IGNORED_NAMES = ("manifest.json",)
IGNORED_PATTERNS = ("*sidecar*.json", "*sidecar*.json.gz", "*fr_trace*.json", "*.fr_groups.json")
_SNIFF_BYTES = 1 << 20


def _is_trace_name(path: Path) -> bool:
    name = path.name
    if not name.endswith(TRACE_SUFFIXES) or name in IGNORED_NAMES:
        return False
    return not any(path.match(p) for p in IGNORED_PATTERNS)


def sniff_kineto(path: Path) -> bool | None:
    """True: a Kineto trace; False: some other JSON (a sidecar, a config); None: unreadable
    or not JSON (a broken trace, when its name says trace)."""
    try:
        with open_trace(path) as stream:
            head = read_block(stream, path, _SNIFF_BYTES)
            complete = not stream.read(1)
    except BadInputError:
        return None
    if b'"traceEvents"' in head:
        return True
    if not complete:
        return None
    import msgspec

    try:
        doc = msgspec.json.decode(head)
    except msgspec.DecodeError:
        return None
    return isinstance(doc, dict) and "traceEvents" in doc


def trace_files(directory: Path) -> list[Path]:
    """Rank files of a run directory (not recursive), sorted by name; sidecars and manifests
    (JSON without traceEvents) are left out, unreadable trace-named files are kept (they fail
    loudly when parsed)."""
    # a trace-named FIFO or device is kept: it is refused, by name, when it is read
    files = sorted(p for p in directory.iterdir() if not p.is_dir() and _is_trace_name(p))
    return [p for p in files if sniff_kineto(p) is not False]
