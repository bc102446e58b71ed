"""The native JSON readers (parsers/native/tk_json.h, tk_dict.h) through the accumulator:
exact values for every length of number around the 8-byte words they are read in, the same
strings and codes for every length of string around the 16-byte steps, the forms they must
decline, and never a byte read past the end of what they are given."""

from __future__ import annotations

import json
import mmap
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest

from tracekit import schema as S
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto.accumulator import Accumulator
from tracekit.parsers.kineto.native_columns import timed_table

LIB = kineto_native.accumulator()
pytestmark = pytest.mark.skipif(
    LIB is None, reason="native accumulator unavailable (no C compiler, or TRACEKIT_NATIVE=0)")


def feed(text: str | bytes, tail: bytes = b"") -> Accumulator | None:
    """A fresh accumulator fed ``text`` (events separated by commas); None when it declines.
    ``tail`` lies in memory right after the text, outside what the readers are given."""
    assert LIB is not None
    raw = text.encode() if isinstance(text, str) else text
    block = np.frombuffer(raw + tail, dtype=np.uint8).copy()
    acc = Accumulator(LIB)
    return acc if acc.feed(block, len(raw)) is not None else None


def event(ts: str, dur: str = "1", pid: str = "1", tid: str = "2", name: str = "k",
          ext: str = "7") -> str:
    """One compact timed event whose numbers are the given JSON texts."""
    return ('{"ph":"X","cat":"kernel","name":' + json.dumps(name, ensure_ascii=False)
            + f',"pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},'
            + f'"args":{{"External id":{ext},"grid":[1,2,3],"x":-0.5e-3}}}}')


def digits(n: int, seed: int) -> str:
    """n digits, the first not 0 (a leading 0 is not JSON)."""
    rng = np.random.default_rng(seed)
    return str(rng.integers(1, 10)) + "".join(str(d) for d in rng.integers(0, 10, n - 1))


def ns(text: str) -> int:
    """Exact nanoseconds of a microsecond text."""
    return int(Decimal(text) * 1000)


def time_texts() -> list[str]:
    """Ints and %.3f-style floats with 1 to 16 whole digits, 0 to 3 decimals, either sign."""
    out = ["0", "-0", "0.5", "-0.125", "0.000"]
    for n in range(1, 17):
        for k, frac in enumerate(("", ".5", ".25", ".125", ".000", ".9")):
            if n > 15 and not frac:
                continue  # ints stop at 2**53 (16 digits only below it)
            whole = digits(n, 100 * n + k)
            out += [whole + frac, "-" + whole + frac]
    return out


def test_times_are_exact_for_every_length() -> None:
    # GIVEN events whose ts and dur have every length of whole part around the 8-digit words
    texts = time_texts()
    doc = ",\n".join(event(t, dur=texts[-1 - i]) for i, t in enumerate(texts))
    # WHEN the accumulator reads them
    acc = feed(doc)
    assert acc is not None
    table, _ = timed_table(acc)
    # THEN each is the exact integer nanoseconds of its text
    assert table.column(S.TS_NS).to_pylist() == [ns(t) for t in texts]
    assert table.column(S.DUR_NS).to_pylist() == [ns(t) for t in reversed(texts)]


def test_ints_are_exact_for_every_length() -> None:
    # GIVEN pid, tid and External id of 1 to 18 digits, either sign, and 0
    values = ["0", "-0"] + [s + digits(n, n) for n in range(1, 19) for s in ("", "-")]
    doc = ",".join(event("1.5", pid=v, tid=values[-1 - i], ext=v)
                   for i, v in enumerate(values))
    # WHEN the accumulator reads them
    acc = feed(doc)
    assert acc is not None
    table, _ = timed_table(acc)
    # THEN each is the int of its text
    want = [int(v) for v in values]
    assert table.column(S.PID).to_pylist() == want
    assert table.column(S.TID).to_pylist() == want[::-1]
    assert table.column(S.EXTERNAL_ID).to_pylist() == want


@pytest.mark.parametrize("ts", [
    "1.2345",               # a fourth decimal: not Kineto's %.3f
    "12345678.0001",
    "1e3", "1.5E2", "2.0e-1",  # exponents
    "12345678901234567.5",  # 17 whole digits
    "9007199254740993",     # an int above 2**53
    "1234567890123456789",  # 19 digits
    "01", "00.5", "-", "1.", ".5", "+1", "-a", "1.e3", "0x10",
])
def test_times_declined(ts: str) -> None:
    # GIVEN one valid event, then one whose ts the accumulator must not take as it is
    doc = event("1") + "," + event(ts)
    # WHEN it is fed, THEN the block is declined (the piece path decides)
    assert feed(doc) is None


@pytest.mark.parametrize("pid", ["01", "1.5", "1e2", "12345678901234567890", "-", "--1", "1-"])
def test_ints_declined(pid: str) -> None:
    # GIVEN a pid that is not an int of at most 18 digits, WHEN fed, THEN declined
    assert feed(event("1", pid=pid)) is None


def test_strings_and_codes_for_every_length() -> None:
    # GIVEN names of 0 to 48 characters (ASCII, then UTF-8 of 2 to 4 bytes) at every offset
    # from the 16-byte steps, each one seen twice, in a known order
    base = "sglang/srt/layers/dp_attention.py(466): _dp_gather_via_all_gather"
    names = [base[:n] for n in range(49)] + [base[:n] + "é€😀" for n in range(0, 40, 3)]
    order = names + names[::-1]
    doc = ",".join(event(str(i), name=nm) for i, nm in enumerate(order))
    # WHEN the accumulator reads them
    acc = feed(doc)
    assert acc is not None
    _, name = timed_table(acc)
    # THEN the strings are the names and the codes follow first appearance
    assert name.dictionary.to_pylist() == names
    assert name.indices.to_pylist() == list(range(len(names))) + list(range(len(names)))[::-1]


@pytest.mark.parametrize("name", [
    "a\\nb",                    # an escape: not plain, the piece path decides
    "x\x01y",                   # a raw control character
    "0123456789abcdef\\u00e9",  # an escape past the first 16 bytes
])
def test_strings_declined(name: str) -> None:
    # GIVEN a name (its JSON text) the accumulator does not intern as it is
    doc = event("1").replace('"name":"k"', '"name":"' + name + '"')
    # WHEN fed, THEN declined
    assert feed(doc) is None


def test_bad_utf8_declined() -> None:
    # GIVEN names holding malformed UTF-8 (overlong, surrogate, truncated, stray continuation)
    for bad in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf5\x80\x80\x80"):
        raw = event("1").encode().replace(b'"name":"k"', b'"name":"0123456789abcdef' + bad + b'"')
        block = np.frombuffer(raw, dtype=np.uint8).copy()
        assert LIB is not None
        # WHEN fed, THEN declined
        assert Accumulator(LIB).feed(block, len(raw)) is None, bad


def test_every_prefix_declined() -> None:
    # GIVEN one event with every kind of token (long and short strings, UTF-8, ints, floats,
    # an exponent, nested args), and the rest of its own text in memory after each cut
    raw = EVERY_TOKEN.encode()
    # WHEN every proper prefix is fed (the bytes that would complete it lie just past its end)
    taken = [cut for cut in range(1, len(raw)) if feed(raw[:cut], raw[cut:]) is not None]
    # THEN none is taken, and the whole text is
    assert taken == []
    assert feed(raw) is not None


EVERY_TOKEN = event("4458002142713.822", dur="25.200", pid="100000", tid="-7",
                    name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, é)",
                    ext="123456789012")

# Feeds every prefix of the text ending right before a page the process may not read: a
# reader that looks one byte past its end gets SIGSEGV (run in a child process).
_GUARD_CHILD = """
import ctypes, mmap, sys
import numpy as np
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto.accumulator import Accumulator
lib = kineto_native.accumulator()
page = mmap.PAGESIZE
m = mmap.mmap(-1, 2 * page)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
assert libc.mprotect(base + page, page, 0) == 0  # PROT_NONE
mem = np.frombuffer(m, dtype=np.uint8)
raw = sys.stdin.buffer.read()
taken = 0
for cut in range(1, len(raw) + 1):
    mem[page - cut : page] = np.frombuffer(raw[:cut], dtype=np.uint8)
    taken += Accumulator(lib).feed(mem[page - cut : page], cut) is not None
print(taken)
"""


@pytest.mark.skipif(not hasattr(mmap, "PAGESIZE") or sys.platform == "win32",
                    reason="needs mmap and mprotect")
def test_nothing_read_past_the_end() -> None:
    # GIVEN every prefix of an event with every kind of token, each ending where the
    # readable memory ends (an unreadable page follows)
    # WHEN the accumulator reads each (in a child process: a read past the end kills it)
    done = subprocess.run([sys.executable, "-c", _GUARD_CHILD], input=EVERY_TOKEN.encode(),
                          capture_output=True, timeout=120, check=False)
    # THEN no read faults, and only the whole event is taken
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.split() == [b"1"]
