"""Why a Kineto file cannot be read: the error of a file whose structure the block splitter
could not follow (kineto_read.SplitError: not a JSON object, no ``traceEvents`` array, no end
of it).

Such a file is not read another way (there is one reader, kineto_parse); this module only
words its error. It decodes the whole document with msgspec's generic decoder, at most
MAX_WHOLE bytes, for the position of a JSON error (truncated text, NaN, a stray character) or
the top-level shape that is wrong (a bare array, a number, no traceEvents, traceEvents not a
list, an event that is no object). A document that decodes and has none of these faults
gets the splitter's own reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import BadInputError
from tracekit.limits import MAX_WHOLE, TOO_DEEP, LimitExceeded
from tracekit.parsers.kineto.read import open_trace, read_block

_NAN = re.compile(rb"-?(NaN|Infinity)")
# msgspec's names of JSON types, as its validation errors word them
_JSON_TYPE = {dict: "object", list: "array", str: "str", int: "int", float: "float",
              bool: "bool", type(None): "null"}


def unreadable(path: Path, why: str) -> BadInputError:
    """The one-line error of ``path``, which the splitter gave up on for ``why``."""
    data = _read_all(path)
    if not data.lstrip(b" \t\r\n"):
        return BadInputError("empty file", path)
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        return BadInputError(_json_message(exc, data), path)
    except RecursionError:
        return BadInputError(TOO_DEEP, path)
    return BadInputError(_shape_message(doc, why), path)


def _shape_message(doc: Any, why: str) -> str:
    if isinstance(doc, list):
        return ("a bare JSON array is not a Kineto trace; this looks like an Ascend"
                " trace_view.json: pass its *_ascend_pt directory")
    if not isinstance(doc, dict):
        return f"JSON {type(doc).__name__} is not a Kineto trace"
    events = doc.get("traceEvents")
    if events is None:
        return "JSON object has no traceEvents: not a Kineto trace"
    if not isinstance(events, list):
        return f"traceEvents is a {type(events).__name__}, expected a list"
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            return f"event {i}: expected object, got {_JSON_TYPE.get(type(event), 'value')}"
    return f"the reader could not follow this trace's structure ({why})"


def _read_all(path: Path) -> bytes:
    """The whole (decompressed) document, at most MAX_WHOLE bytes."""
    limit = MAX_WHOLE.bytes()
    with open_trace(path) as stream:
        data = read_block(stream, path, limit + 1)
    if len(data) > limit:
        raise LimitExceeded(
            f"the streaming reader could not follow this trace's structure (a truncated"
            f" file, or text between events it cannot split), and tracekit reads at most"
            f" {MAX_WHOLE.says()} of such a file to say why; {MAX_WHOLE.hint()}", path)
    return data


def _json_message(exc: msgspec.DecodeError, data: bytes) -> str:
    text = str(exc)
    m = re.search(r"byte (\d+)", text)
    if m:
        pos = int(m.group(1))
        if _NAN.match(data, pos):
            return f"invalid JSON: NaN or Infinity is not a JSON number (byte {pos})"
        if "truncated" in text or pos >= len(data.rstrip()):
            return f"invalid JSON: the document ends early (byte {pos}); truncated file?"
    return f"invalid JSON: {text}"
