"""What a reader may hold, and the checks every input file passes before it is read.

Each limit has a default that real traces do not reach and an environment variable that
raises it (read when the limit is checked, so that worker processes see it too). They are
listed, with the message each gives, in docs/limits.md. A limit that is reached raises
:class:`LimitExceeded` (a BadInputError: one line naming the file, exit 2), which the
readers never swallow to try another path.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracekit.errors import BadInputError, TracekitError

MB = 1 << 20


class LimitExceeded(BadInputError):
    """A size, ratio or depth limit was reached; the message names the variable to raise."""


@dataclass(frozen=True)
class Limit:
    env: str
    default: float
    unit: str  # how the value is written: "MiB", "GiB", "x" (a ratio), "levels"

    def value(self) -> float:
        text = os.environ.get(self.env)
        if text is None or not text.strip():
            return self.default
        try:
            v = float(text)
        except ValueError:
            raise TracekitError(f"{self.env}={text!r} is not a number") from None
        if not v > 0 or v != v or v == float("inf"):
            raise TracekitError(f"{self.env}={text!r} must be a positive finite number")
        return v

    def bytes(self) -> int:
        scale = {"MiB": MB, "GiB": 1 << 30}[self.unit]
        return int(self.value() * scale)

    def says(self) -> str:
        v = self.value()
        shown = int(v) if v == int(v) else v
        return f"{shown} {self.unit}" if self.unit != "x" else f"{shown}x"

    def hint(self) -> str:
        return f"set {self.env} to raise the limit of {self.says()}"


# one event of traceEvents (or the text between two events): real events stay below 1 MiB
MAX_EVENT = Limit("TRACEKIT_MAX_EVENT_MB", 64, "MiB")
# the text before the traceEvents array (distributedInfo, deviceProperties ...)
MAX_HEAD = Limit("TRACEKIT_MAX_HEAD_MB", 64, "MiB")
# the decompressed size of one .gz file, and its ratio to the compressed size (checked once
# RATIO_AFTER bytes came out: Kineto text compresses 10-20x)
MAX_DECOMPRESSED = Limit("TRACEKIT_MAX_DECOMPRESSED_GB", 64, "GiB")
MAX_RATIO = Limit("TRACEKIT_MAX_GZIP_RATIO", 200, "x")
RATIO_AFTER = 128 * MB
# a whole-document fallback (a trace whose structure the streaming reader cannot follow)
MAX_WHOLE = Limit("TRACEKIT_MAX_WHOLE_MB", 1024, "MiB")
# an options file (--hardware, --config, --rules, --baseline), and its nesting
MAX_OPTIONS = Limit("TRACEKIT_MAX_OPTIONS_MB", 64, "MiB")
MAX_DEPTH = Limit("TRACEKIT_MAX_DEPTH", 200, "levels")
# an Ascend JSON export file (trace_view.json is read whole)
MAX_ASCEND_JSON = Limit("TRACEKIT_MAX_ASCEND_JSON_MB", 4096, "MiB")

LIMITS = (MAX_EVENT, MAX_HEAD, MAX_DECOMPRESSED, MAX_RATIO, MAX_WHOLE, MAX_OPTIONS,
          MAX_DEPTH, MAX_ASCEND_JSON)

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path: Path, error: type[TracekitError] = BadInputError) -> os.stat_result:
    """The stat of ``path`` (links followed) when it is a regular file, else ``error``: a
    FIFO would block the read forever and /dev/zero never ends, so neither is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error("no such file", path) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", path) from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise error("is a directory, expected a file", path)
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in _KINDS if test(mode)), "not a file")
        raise error(f"not a regular file ({kind}); tracekit reads only regular files", path)
    return st


def read_limited(path: Path, limit: Limit, what: str,
                 error: type[TracekitError] = BadInputError) -> bytes:
    """The bytes of a regular file of at most ``limit``."""
    st = regular_file(path, error)
    if st.st_size > limit.bytes():
        raise error(f"{what} is too large ({st.st_size / MB:.0f} MiB); {limit.hint()}", path)
    try:
        with open(path, "rb") as f:
            return f.read(limit.bytes() + 1)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror}", path) from None


def utf8(data: bytes, path: Path, what: str,
         error: type[TracekitError] = BadInputError) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1]
        raise error(f"{what} is not UTF-8 text (byte {exc.start} is {bad!r})", path) from None


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_YAML_QUOTED = re.compile(rb"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*'|#[^\n]*")


def nesting_depth(data: bytes, yaml: bool = False) -> int:
    """The deepest bracket nesting of a JSON (or YAML) text, without recursion: strings (and
    YAML comments) are blanked out, then a running sum over the bracket bytes. For YAML the
    block indentation and ``- - -`` chains count too (an upper bound)."""
    text = (_YAML_QUOTED if yaml else _JSON_STRING).sub(b'""', data)
    arr = np.frombuffer(text, dtype=np.uint8)
    step = (np.isin(arr, (0x5B, 0x7B)).astype(np.int32)
            - np.isin(arr, (0x5D, 0x7D)).astype(np.int32))
    deepest = int(np.cumsum(step).max()) if arr.size else 0
    if yaml:
        for line in text.splitlines():
            body = line.lstrip(b" ")
            indent = len(line) - len(body)
            dashes = len(re.match(rb"(?:[-?:]\s+)*", body).group(0).split())  # type: ignore[union-attr]
            deepest = max(deepest, indent // 2 + dashes + 1)
    return deepest


def check_depth(data: bytes, path: Path, what: str, yaml: bool = False,
                error: type[TracekitError] = BadInputError) -> None:
    limit = int(MAX_DEPTH.value())
    depth = nesting_depth(data, yaml)
    if depth > limit:
        raise error(f"{what} is nested {depth} levels deep; {MAX_DEPTH.hint()}", path)


def read_options_file(path: Path, what: str, yaml: bool,
                      error: type[TracekitError] = BadInputError) -> str:
    """An options file's text: a regular file, at most MAX_OPTIONS, UTF-8, and nested no
    deeper than MAX_DEPTH (the YAML and JSON parsers recurse)."""
    data = read_limited(Path(path), MAX_OPTIONS, what, error)
    text = utf8(data, Path(path), what, error)
    check_depth(data, Path(path), what, yaml, error)
    return text


TOO_DEEP = "JSON nested too deeply for the decoder (about 1000 levels)"
