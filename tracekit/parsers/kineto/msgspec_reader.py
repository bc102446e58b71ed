"""The msgspec reader of a block of Kineto events: a JSON array of events -> Piece.

What the native accumulator declines (a block with escapes, unusual numbers, odd types...),
and every block when the extension is missing, is read here: first with the typed decoder,
then, for unusual arg types or float times that need the exact decimal path, with the
lenient exact one. Both give what the accumulator gives for the blocks it takes (the
property tests in tests/parsers/test_reader_agreement.py hold them to that).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from tracekit.errors import BadInputError
from tracekit.limits import TOO_DEEP
from tracekit.parsers.kineto.block_columns import BadEvent, Piece, decode_piece
from tracekit.parsers.kineto.decode import DECODER, EXACT_DECODER, InexactTime


def decode_buffer(doc: bytes, start: int, path: Path) -> Piece:
    """Decode a JSON array of events; the first has index ``start``.

    Raises msgspec.DecodeError when the text is not JSON (a false boundary), BadInputError
    when it is JSON but not valid events."""
    try:
        return decode_piece(DECODER.decode(doc), start)
    except (msgspec.ValidationError, InexactTime):
        pass  # unusual arg types or huge float timestamps: the exact, lenient decoder
    except BadEvent as exc:
        raise BadInputError(str(exc), path) from None
    except RecursionError:
        raise BadInputError(f"{TOO_DEEP} in traceEvents (from event {start} on)",
                            path) from None
    try:
        return decode_piece(EXACT_DECODER.decode(doc), start)
    except msgspec.ValidationError as exc:
        raise BadInputError(_validation_message(exc, start), path) from None
    except (BadEvent, InexactTime) as exc:
        raise BadInputError(str(exc), path) from None
    except RecursionError:  # pragma: no cover - the first decoder recursed as deep
        raise BadInputError(f"{TOO_DEEP} in traceEvents (from event {start} on)",
                            path) from None


_PATH = re.compile(r"`\$\[(\d+)\]\.?([^`]*)`")


def _validation_message(exc: msgspec.ValidationError, start: int) -> str:
    text = str(exc)
    m = _PATH.search(text)
    if m is None:
        return f"wrong type in traceEvents: {text}"
    where = f"event {start + int(m.group(1))}"
    fld = m.group(2).replace("args.", "args ").strip(".")
    what = text[: m.start()].removesuffix(" - at ").replace("`", "")
    what = what[:1].lower() + what[1:]
    return f"{where}: {fld}: {what}" if fld else f"{where}: {what}"
