"""The two Kineto readers agree: the native one (with the blocks it declines decoded by msgspec)
and msgspec alone give identical EVENTS, PROCESS_GROUPS and RANK_INFO tables, or the same
one-line error, on generated documents (nasty numbers, escapes, unicode, missing fields, the
communication args of every Kineto era) and on every reference and sample trace.

``TRACEKIT_AGREEMENT_EXAMPLES`` sets how many documents hypothesis generates (the sanitizer
run, test_reader_sanitizers.py, sets it to bound its time).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.errors import BadInputError
from tracekit.parsers.kineto import load_kineto_file
from tracekit.parsers.kineto import native as kineto_native
from tracekit.parsers.kineto import parse as kineto_parse
from tracekit.parsers.kineto import read as kineto_read

pytestmark = pytest.mark.skipif(
    kineto_native.accumulator() is None,
    reason="native reader unavailable (extension not built, or TRACEKIT_NATIVE=0)")

EXAMPLES = int(os.environ.get("TRACEKIT_AGREEMENT_EXAMPLES", "150"))

# ------------------------------------------------------------------ documents

# text: ASCII, Latin-1, CJK, astral (emoji), quotes and backslashes, control characters
_TEXT = st.text(st.sampled_from(
    [*"abcXYZ019 _-:/.()<>*,{}[]", '"', "\\", "\n", "\t", "\x01", "é", "µ", "通", "信", "😀",
     "\u2028", "\x7f"]), max_size=12)
_NAMES = st.one_of(st.sampled_from([
    "aten::mm", "record_param_comms", "cudaLaunchKernel", "c10d::allreduce_",
    "gloo:all_reduce", "_c10d_functional::all_gather_into_tensor", "thread_name",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "nccl:all_reduce",
    "cross_device_reduce_1stage", "ProfilerStep#3", "sglang/x.py(12): forward",
]), _TEXT)
_CATS = st.sampled_from(["kernel", "cpu_op", "python_function", "user_annotation",
                         "gpu_user_annotation", "cuda_runtime", "gpu_memcpy", "ac2g", "Trace",
                         "odd cat é"])


def _decimal(digits: int) -> st.SearchStrategy[str]:
    """A JSON number text with ``digits`` decimals (0: an int), maybe negative, maybe big."""
    whole = st.one_of(st.integers(0, 999), st.integers(1_700_000_000_000_000,
                                                       1_800_000_000_000_000))
    frac = st.integers(0, 10 ** digits - 1) if digits else st.just(0)
    return st.tuples(st.booleans(), whole, frac).map(
        lambda t: ("-" if t[0] else "") + str(t[1])
        + (f".{t[2]:0{digits}d}" if digits else ""))


# times as their JSON text: ints, floats with up to 6 decimals (more than three: msgspec's
# exact path), exponents, -0, huge ints, and non-numbers
_TIME_TEXT = st.one_of(
    st.integers(0, 6).flatmap(_decimal),
    st.sampled_from(["-0", "-0.0", "0.0", "1e3", "1.5E-1", "2.5e-7", "1E+2", "9007199254740993",
                     "99999999999999999999", "1.0000000000000000000001", "null", '"1.5"',
                     "true"]),
)
_ID = st.one_of(st.none(), st.integers(-2, 2 ** 31), st.integers(2 ** 62, 2 ** 64 + 5),
                st.sampled_from(["12", "", 3.0]))
_INT = st.one_of(st.none(), st.integers(-1, 16), st.integers(2 ** 31, 2 ** 64 + 1),
                 st.sampled_from(["2", 2.0]))
_RANKS = st.lists(st.integers(0, 15), max_size=4)

# communication args as each Kineto era wrote them (record_param_comms and enriched
# kernels): 2.1 (name, dtype, sizes), 2.2+ (group name, description, ranks as a string),
# 2.4+ (sequence numbers, Comms Id), 2.6+ (global rank start / stride), p2p ranks
_ERA_KEYS: list[dict[str, st.SearchStrategy[Any]]] = [
    {"Collective name": st.sampled_from(["allreduce", "all_gather", "_allgather_base",
                                         "reduce_scatter", "all_to_all", "send", "recv",
                                         "broadcast", "barrier"]),
     "dtype": st.sampled_from(["BFloat16", "Float", "Int", "Half"]),
     "In msg nelems": _INT, "Out msg nelems": _INT, "Group size": _INT},
    {"In msg size": _INT, "Out msg size": _INT,
     "In split size": st.one_of(st.just("[]"), _RANKS.map(str), _RANKS),
     "Out split size": st.one_of(st.just("[]"), _RANKS.map(str), _RANKS)},
    {"Process Group Name": st.one_of(st.sampled_from(["0", "1", "default_pg"]),
                                     st.integers(0, 3)),
     "Process Group Description": st.one_of(st.sampled_from(["default_pg", "tp", "undefined"]),
                                            _TEXT),
     "Process Group Ranks": st.one_of(_RANKS.map(str), _RANKS, st.just("[0, 99999999999]"))},
    {"Seq": _INT, "Comms Id": st.one_of(st.integers(0, 2 ** 64 - 1), st.integers(-3, 3),
                                        st.just(2 ** 64))},
    {"Global rank start": _INT, "Global rank stride": _INT, "Process Group ID": _ID},
    {"Rank": _INT, "Src Rank": _INT, "Dst Rank": _INT},
]


@st.composite
def _comm_args(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for era in draw(st.lists(st.sampled_from(range(len(_ERA_KEYS))), max_size=4, unique=True)):
        for key, strategy in _ERA_KEYS[era].items():
            if draw(st.integers(0, 4)):  # a key of the era may be missing
                out[key] = draw(strategy)
    return out


@st.composite
def _args(draw: st.DrawFn, name: str) -> dict[str, Any] | None:
    if not draw(st.integers(0, 9)):
        return draw(st.sampled_from([None, {}]))
    out: dict[str, Any] = {}
    for key in ("External id", "correlation", "Python id", "Python parent id"):
        if draw(st.booleans()):
            out[key] = draw(_ID)
    if name in ("record_param_comms",) or draw(st.integers(0, 5)) == 0:
        out.update(draw(_comm_args()))
    if name.startswith(("c10d::", "gloo:", "_c10d_functional::")) and draw(st.booleans()):
        out["Input Dims"] = draw(st.lists(st.lists(st.integers(0, 4096), max_size=2),
                                          max_size=2))
        out["Input type"] = draw(st.lists(st.sampled_from(["BFloat16", "", "Float"]),
                                          max_size=2))
        out["Concrete Inputs"] = draw(st.lists(st.sampled_from(["", "0", "[1, 2]"]),
                                               max_size=2))
    if draw(st.integers(0, 7)) == 0:  # keys tracekit does not read, nested
        out["extra é"] = draw(st.one_of(_TEXT, st.lists(st.integers(), max_size=3),
                                        st.dictionaries(_TEXT, st.integers(), max_size=2)))
    return out


@st.composite
def _event(draw: st.DrawFn) -> str:
    """One event as JSON text (numbers written as their text, keys maybe missing)."""
    ph = draw(st.sampled_from(["X", "X", "X", "i", "M", "s", "f", "B", None]))
    name = draw(_NAMES)
    if ph == "M":
        name = draw(st.sampled_from(["thread_name", "process_name", "thread_sort_index"]))
    fields: dict[str, str] = {}
    if ph is not None:
        fields["ph"] = json.dumps(ph)
    if draw(st.integers(0, 20)):
        fields["name"] = json.dumps(name, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 10)):
        fields["cat"] = json.dumps(draw(_CATS), ensure_ascii=draw(st.booleans()))
    for key, strategy in (("pid", st.one_of(st.integers(0, 8), st.just(2 ** 40),
                                            st.sampled_from(['"1"', '"Spans"']))),
                          ("tid", st.one_of(st.integers(0, 8), st.sampled_from(['"7"'])))):
        if draw(st.integers(0, 15)):
            v = draw(strategy)
            fields[key] = v if isinstance(v, str) else str(v)
    if draw(st.integers(0, 25)):
        fields["ts"] = draw(_TIME_TEXT)
    if (ph == "X" and draw(st.integers(0, 25))) or (ph != "X" and draw(st.booleans())):
        fields["dur"] = draw(_TIME_TEXT)
    if ph == "M":
        label = draw(st.one_of(st.sampled_from(["thread 1 (python)", "stream 7 ",
                                                "thread 7 (pt_gloo_runloop)"]), _TEXT))
        fields["args"] = json.dumps({"name": label}, ensure_ascii=draw(st.booleans()))
    else:
        args = draw(_args(name))
        if args is not None or draw(st.booleans()):
            fields["args"] = json.dumps(args, ensure_ascii=draw(st.booleans()))
    items = [f'"{k}": {v}' for k, v in fields.items()]
    items = draw(st.permutations(items))
    sep = draw(st.sampled_from([", ", ",", " ,\n  "]))
    return "{" + sep.join(items) + "}"


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A Kineto document: distributedInfo, traceEvents (a few plain events first, so that
    most documents are valid), and keys after the events."""
    plain = ['{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, '
             f'"ts": {10 + i}.5, "dur": 1.25, "args": {{"External id": {i}}}}}'
             for i in range(draw(st.integers(0, 3)))]
    events = plain + draw(st.lists(_event(), min_size=1, max_size=25))
    events = draw(st.permutations(events))
    dist = {"backend": "nccl", "rank": draw(st.integers(0, 3)), "world_size": 4,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config":
                           "cuda:nccl", "pg_size": 4, "ranks": [0, 1, 2, 3]}]}
    sep = draw(st.sampled_from([",\n", ", ", ","]))
    return ('{"schemaVersion": 1, "distributedInfo": ' + json.dumps(dist)
            + ', "traceEvents": [' + sep.join(events) + '], "traceName": "t"}')


# ------------------------------------------------------------------ the two readers


def _tables(path: Path) -> Any:
    """The tables of one Kineto file, or its one-line error."""
    try:
        t = load_kineto_file(path)
    except BadInputError as exc:
        return str(exc)
    return t


def read_both(path: Path) -> tuple[Any, Any]:
    """(native reader's result, msgspec reader's result)."""
    native = _tables(path)
    with mock.patch.object(kineto_parse, "read_whole", lambda *_: None):
        alone = _tables(path)
    return native, alone


def assert_agree(path: Path) -> None:
    native, alone = read_both(path)
    if isinstance(native, str) or isinstance(alone, str):
        assert native == alone
        return
    assert native.events.schema.equals(alone.events.schema)
    assert _decoded(native.events).equals(_decoded(alone.events))
    assert native.process_groups.equals(alone.process_groups)
    assert native.rank_info.equals(alone.rank_info)
    assert alone.events.schema.metadata[b"reader"] == b"msgspec"
    assert native.events.schema.metadata[b"reader"] in (b"native", b"native+msgspec",
                                                        b"msgspec")


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as their values. A dictionary may hold values no
    row uses: names seen only on untimed events (the msgspec reader keeps them when their
    piece has a timed row, the native reader always), so only the values are compared."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
            for c in table.columns]
    return pa.table(cols, names=table.column_names)


@contextmanager
def _blocks_of(size: int) -> Iterator[None]:
    with mock.patch.object(kineto_read, "CHUNK_BYTES", size):
        yield


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=documents(), block=st.sampled_from([64, 300, 1 << 20]), gz=st.booleans())
def test_generated_documents_give_identical_tables_from_both_readers(
        doc: str, block: int, gz: bool) -> None:
    # GIVEN a generated Kineto document, read in blocks of ``block`` bytes, maybe gzipped
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("t.json.gz" if gz else "t.json")
        data = doc.encode("utf-8", "surrogatepass")
        if gz:
            import gzip

            data = gzip.compress(data, compresslevel=1)
        path.write_bytes(data)
        # WHEN read by the native reader and by msgspec alone THEN the tables (or errors)
        # are identical
        with _blocks_of(block):
            assert_agree(path)


def test_a_generated_document_really_mixes_the_readers(tmp_path: Path) -> None:
    # GIVEN a document whose middle block holds an escaped name (declined by the native
    # reader), read in small blocks
    plain = [json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1,
                         "ts": i, "dur": 1}) for i in range(40)]
    plain[20] = json.dumps({"ph": "X", "cat": "cpu_op", "name": "caf\u00e9 \"q\"", "pid": 1,
                            "tid": 1, "ts": 20, "dur": 1})
    path = tmp_path / "t.json"
    path.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": ['
                    + ",\n".join(plain) + "]}")
    # WHEN read THEN the native reader handed a block to msgspec, and both agree
    with _blocks_of(300):
        native, _ = read_both(path)
        assert native.events.schema.metadata[b"reader"] == b"native+msgspec"
        assert_agree(path)


def _kineto_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith((".json", ".json.gz"))
                  and ("trace" in p.name or p.parent.name != "flight_recorder")
                  and not p.name.endswith(("sidecar.json", "manifest.json")))


def test_every_reference_trace_gives_identical_tables_from_both_readers(
        reference_traces: Path) -> None:
    # GIVEN every Kineto reference trace (real profiler output)
    files = _kineto_files(reference_traces / "kineto")
    assert files
    # WHEN read by both readers THEN the tables (or errors) are identical
    for path in files:
        assert_agree(path)


def test_every_sample_trace_gives_identical_tables_from_both_readers(
        sample_traces: Path) -> None:
    # GIVEN every rank file of the bundled sample scenarios
    files = sorted(sample_traces.glob("*/rank*.trace.json*"))
    assert files
    # WHEN read by both readers THEN the tables are identical
    for path in files:
        assert_agree(path)
