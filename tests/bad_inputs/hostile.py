"""The hostile-input corpus: every case is built on the fly into a temporary folder.

``CASES`` lists one :class:`Case` per hostile input: its family (which reader or options file
it attacks), how to build it (a function of the folder that writes the files and returns the
CLI arguments and the file the error must name), and a fragment of the one-line message. Big
cases (bombs, huge strings, gigabytes of NULs) are written only when the test runs, as sparse
files or repeated gzip members, so that nothing large is committed and the folder stays small
on disk. tests/parsers/test_hostile_corpus.py runs each case through the real CLI.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

MB = 1 << 20
EV = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}
COMM = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
        "ts": 10.0, "dur": 3.0,
        "args": {"Collective name": "allreduce", "Process Group Name": "0",
                 "Process Group Ranks": "[0, 1]", "Group size": 2, "dtype": "Float",
                 "In msg nelems": 1024, "Out msg nelems": 1024}}
DEEP = 100_000

Built = tuple[list[str], Path]


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    build: Callable[[Path], Built]
    expect: str  # a fragment of the one-line message
    slow: bool = False
    rc: int = 2  # 0: a valid (if odd) input that must be analysed without a traceback
    rss_mb: int = 600  # peak RSS ceiling of the CLI process
    wall_s: float = 30.0


def trace_text(events: list[object] | None = None, dist: object = None, **top: object) -> str:
    doc: dict[str, object] = {"distributedInfo": dist if dist is not None else {"rank": 0}}
    doc.update(top)
    doc["traceEvents"] = [EV] if events is None else events
    return json.dumps(doc)


def _write(name: str, data: bytes | str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        p = d / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return ["analyze", str(p)], p
    return build


def _raw_event(field: str, literal: str, base: dict[str, object] | None = None) -> str:
    """A trace whose first event has ``field`` set to the JSON text ``literal``."""
    ev = dict(base or EV)
    ev[field] = "@@"
    return trace_text([ev]).replace('"@@"', literal)


def _deep(open_: str = "[", close: str = "]", n: int = DEEP) -> str:
    return open_ * n + close * n


# ------------------------------------------------------------------ Kineto JSON: numbers

NUMBERS = {
    "ts_1e400": ("ts", "1e400", "ts"),
    "ts_2_pow_70": ("ts", str(2**70), "ts"),
    "dur_1000_digits": ("dur", "9" * 1000, "dur"),
    "ts_us_overflows_ns": ("ts", "9300000000000000.5", "ts"),
    "ts_int_us_overflows_ns": ("ts", "9300000000000000", "ts"),
    "dur_negative_huge": ("dur", "-1e30", "dur"),
    "pid_2_pow_70": ("pid", str(2**70), "pid"),
    "tid_1e400": ("tid", "1e400", "tid"),
}

KINETO: list[Case] = [
    Case("kineto-numbers", n, _write(f"{n}.json", _raw_event(f, lit)), word)
    for n, (f, lit, word) in NUMBERS.items()
]


def _dist(name: str, dist: str, expect: str) -> Case:
    text = trace_text(dist={"rank": 0}).replace('{"rank": 0}', dist)
    return Case("kineto-numbers", name, _write(f"{name}.json", text), expect)


KINETO += [
    _dist("rank_2_pow_70", '{"rank": ' + str(2**70) + "}", "rank"),
    _dist("rank_beyond_int32", '{"rank": 4294967296}', "rank"),
    _dist("rank_1e400", '{"rank": 1e400}', "rank"),
    _dist("world_size_1000_digits", '{"rank": 0, "world_size": ' + "7" * 1000 + "}",
          "world_size"),
    _dist("world_size_beyond_int32", '{"rank": 0, "world_size": 8589934592}', "world_size"),
    _dist("pg_ranks_beyond_int32",
          '{"rank": 0, "pg_config": [{"pg_name": "0", "ranks": [0, 99999999999]}]}',
          "ranks"),
    _dist("backend_config_list",
          '{"rank": 0, "pg_config": [{"pg_name": "0", "ranks": [0], "backend_config": [1]}]}',
          "backend_config"),
    _dist("pg_name_object",
          '{"rank": 0, "pg_config": [{"pg_name": {"a": 1}, "ranks": [0]}]}', "pg_name"),
    _dist("pg_desc_list",
          '{"rank": 0, "pg_config": [{"pg_name": "0", "pg_desc": [1], "ranks": [0]}]}',
          "pg_desc"),
    _dist("pg_config_object", '{"rank": 0, "pg_config": {"pg_name": "0"}}', "pg_config"),
    _dist("distributed_info_list", "[1, 2]", "distributedInfo"),
    Case("kineto-numbers", "base_time_2_pow_70",
         _write("base_time.json", trace_text(baseTimeNanoseconds=0).replace(
             '"baseTimeNanoseconds": 0', '"baseTimeNanoseconds": ' + str(2**70))),
         "baseTimeNanoseconds"),
    Case("kineto-numbers", "base_time_text",
         _write("base_time_text.json", trace_text(baseTimeNanoseconds="soon")),
         "baseTimeNanoseconds"),
    Case("kineto-numbers", "comm_nelems_2_pow_70",
         _write("nelems.json", trace_text([dict(COMM, args=dict(COMM["args"]))]).replace(
             '"In msg nelems": 1024', '"In msg nelems": ' + str(2**70))),
         "In msg nelems"),
    Case("kineto-numbers", "comm_group_size_1e400",
         _write("gsize.json", trace_text([COMM]).replace('"Group size": 2',
                                                          '"Group size": 1e400')),
         "Group size"),
    Case("kineto-numbers", "external_id_2_pow_70",
         _write("extid.json", trace_text([dict(EV, args={"External id": 1})]).replace(
             '"External id": 1', '"External id": ' + str(2**70))),
         "External id"),
]

# ------------------------------------------------------------------ Kineto JSON: structure

KINETO += [
    Case("kineto-structure", "only_record_param_comms",
         _write("only_comms.json", trace_text([COMM, dict(COMM, ts=20.0)])), "", rc=0),
    Case("kineto-structure", "one_kernel_no_layers", _write("one.json", trace_text()), "",
         rc=0),
    Case("kineto-structure", "deep_args",
         _write("deep_args.json", trace_text([dict(EV, args={"x": "@@"})]).replace(
             '"@@"', _deep())), "nest"),
    Case("kineto-structure", "deep_args_objects",
         _write("deep_args_obj.json", trace_text([dict(EV, args={"x": "@@"})]).replace(
             '"@@"', '{"a":' * DEEP + "1" + "}" * DEEP)), "nest"),
    Case("kineto-structure", "deep_distributed_info",
         _write("deep_dist.json", trace_text(dist={"rank": 0, "x": "@@"}).replace(
             '"@@"', _deep())), "nest"),
    Case("kineto-structure", "deep_event_list",
         _write("deep_event.json", trace_text(["@@"]).replace('"@@"', _deep())),
         "nested too deeply"),
    Case("kineto-structure", "deep_after_events",
         _write("deep_tail.json", trace_text(tail="@@").replace('"@@"', _deep())), "nest"),
]


def _fifo(d: Path) -> Built:
    p = d / "x.json"
    os.mkfifo(p)
    return ["analyze", str(p)], p


def _link_dev_zero(d: Path) -> Built:
    p = d / "zero.json"
    p.symlink_to("/dev/zero")
    return ["analyze", str(p)], p


def _link_dev_zero_gz(d: Path) -> Built:
    p = d / "zero.json.gz"
    p.symlink_to("/dev/zero")
    return ["analyze", str(p)], p


def _fifo_in_dir(d: Path) -> Built:
    run = d / "run"
    run.mkdir()
    (run / "rank0.json").write_text(trace_text())
    os.mkfifo(run / "rank1.json")
    return ["analyze", str(run), "--jobs", "1"], run / "rank1.json"


def _sparse(name: str, size: int, prefix: bytes = b"") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        p = d / name
        with p.open("wb") as f:
            f.write(prefix)
            f.truncate(size)
        return ["analyze", str(p)], p
    return build


def _huge_head_string(d: Path) -> Built:
    """A 100 MB string value before traceEvents (the head search must stay linear)."""
    p = d / "huge_head.json"
    with p.open("wb") as f:
        f.write(b'{"distributedInfo": {"rank": 0}, "junk": "')
        chunk = b"a" * (16 * MB)
        for _ in range(6):
            f.write(chunk)
        f.write(b'", "traceEvents": [' + json.dumps(EV).encode() + b"]}")
    return ["analyze", str(p)], p


def _huge_event_string(d: Path) -> Built:
    """One event whose name is a 100 MB string."""
    p = d / "huge_event.json"
    with p.open("wb") as f:
        f.write(b'{"distributedInfo": {"rank": 0}, "traceEvents": [')
        f.write(json.dumps(EV).encode() + b', {"ph": "X", "name": "')
        chunk = b"b" * (16 * MB)
        for _ in range(6):
            f.write(chunk)
        f.write(b'", "ts": 1, "dur": 1}]}')
    return ["analyze", str(p)], p


def _whitespace_in_array(d: Path) -> Built:
    """100 MB of spaces between two events (no boundary for the splitter to find)."""
    p = d / "spaces.json"
    ev = json.dumps(EV).encode()
    with p.open("wb") as f:
        f.write(b'{"distributedInfo": {"rank": 0}, "traceEvents": [' + ev + b",")
        chunk = b" " * (16 * MB)
        for _ in range(6):
            f.write(chunk)
        f.write(ev + b"]}")
    return ["analyze", str(p)], p


def _false_boundaries(d: Path) -> Built:
    """A 96 MB string made of ``},{`` (every guess of the splitter is false)."""
    p = d / "false_bounds.json"
    with p.open("wb") as f:
        f.write(b'{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "name": "')
        chunk = b'},{' * (MB * 4)
        for _ in range(8):
            f.write(chunk)
        f.write(b'", "ts": 1, "dur": 1, "pid": 0, "tid": 0}]}')
    return ["analyze", str(p)], p


KINETO += [
    Case("kineto-files", "fifo", _fifo, "not a regular file", wall_s=20),
    Case("kineto-files", "fifo_in_run_dir", _fifo_in_dir, "not a regular file", wall_s=20),
    Case("kineto-files", "symlink_to_dev_zero", _link_dev_zero, "not a regular file"),
    Case("kineto-files", "symlink_to_dev_zero_gz", _link_dev_zero_gz, "not a regular file"),
    Case("kineto-files", "nuls_2gb", _sparse("nuls.json", 2 << 30), "invalid JSON",
         slow=True, wall_s=15),
    Case("kineto-files", "object_then_nuls_2gb", _sparse("obj_nuls.json", 2 << 30, b"{"),
         "traceEvents", slow=True, wall_s=60),
    Case("kineto-files", "huge_head_string", _huge_head_string, "traceEvents",
         slow=True, wall_s=60),
    Case("kineto-files", "huge_event_string", _huge_event_string, "event", slow=True,
         wall_s=60),
    Case("kineto-files", "whitespace_in_array", _whitespace_in_array, "event", slow=True,
         wall_s=60),
    Case("kineto-files", "false_boundaries", _false_boundaries, "event", slow=True,
         wall_s=60),
]

# ------------------------------------------------------------------ gzip


def _gz_members(name: str, first: bytes, repeat: bytes, times: int,
                last: bytes = b"") -> Callable[[Path], Built]:
    """A gzip file of concatenated members (valid gzip: one stream of their texts)."""
    def build(d: Path) -> Built:
        p = d / name
        member = gzip.compress(repeat, compresslevel=9, mtime=0)
        with p.open("wb") as f:
            f.write(gzip.compress(first, mtime=0))
            for _ in range(times):
                f.write(member)
            if last:
                f.write(gzip.compress(last, mtime=0))
        return ["analyze", str(p)], p
    return build


_EV_BYTES = json.dumps(EV).encode()
_HEAD = b'{"distributedInfo": {"rank": 0}, "traceEvents": [' + _EV_BYTES

GZIP: list[Case] = [
    Case("gzip", "bomb_10gb_of_events",
         _gz_members("bomb.json.gz", _HEAD, (b", " + _EV_BYTES) * (64 * MB // 90), 160,
                     b"]}"), "decompress", slow=True, wall_s=60),
    Case("gzip", "bomb_10gb_of_spaces",
         _gz_members("spaces.json.gz", _HEAD + b",", b" " * (64 * MB), 160, b"]}"),
         "longer than 64 MiB", slow=True, wall_s=60),
    Case("gzip", "bomb_of_nuls",
         _gz_members("nuls.json.gz", b"\0", b"\0" * (64 * MB), 32), "invalid JSON",
         slow=True, wall_s=30),
    Case("gzip", "bomb_head_string",
         _gz_members("head.json.gz", b'{"x": "', b"a" * (64 * MB), 32), "traceEvents",
         slow=True, wall_s=60),
    Case("gzip", "deep_args_gz",
         _write("deep.json.gz", gzip.compress(trace_text([dict(EV, args={"x": "@@"})]).replace(
             '"@@"', _deep()).encode(), mtime=0)), "nest"),
    Case("gzip", "gzip_of_binary",
         _write("bin.json.gz", gzip.compress(bytes(range(256)) * 64, mtime=0)), "invalid JSON"),
    Case("gzip", "gzip_then_garbage",
         _write("garbage.json.gz", gzip.compress(trace_text().encode(), mtime=0) + b"xyz" * 20),
         "gzip"),
]

# ------------------------------------------------------------------ options files

GOOD_TRACE = trace_text([COMM])


def _with_trace(d: Path) -> Path:
    t = d / "trace.json"
    t.write_text(GOOD_TRACE)
    return t


def _opt(flag: str, name: str, data: bytes | str, cmd: str = "analyze") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        t = _with_trace(d)
        p = d / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return [cmd, str(t), flag, str(p)], p
    return build


def _sparse_opt(flag: str, name: str, size: int) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        t = _with_trace(d)
        p = d / name
        with p.open("wb") as f:
            f.write(b"a: ")
            f.truncate(size)
        return ["analyze", str(t), flag, str(p)], p
    return build


def _opt_fifo(flag: str, name: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        t = _with_trace(d)
        p = d / name
        os.mkfifo(p)
        return ["analyze", str(t), flag, str(p)], p
    return build


def _baseline(name: str, data: bytes | str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        t = _with_trace(d)
        p = d / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return ["check", str(t), "--baseline", str(p), "--max-regression", "10"], p
    return build


OPTIONS: list[Case] = []
for _flag, _fam in (("--hardware", "hardware"), ("--config", "config"), ("--rules", "rules")):
    OPTIONS += [
        Case(f"options-{_fam}", "deep_yaml_flow", _opt(_flag, "deep.yaml", _deep()), "nest"),
        Case(f"options-{_fam}", "deep_yaml_block",
             _opt(_flag, "block.yaml", "- " * DEEP + "x\n"), "nest"),
        Case(f"options-{_fam}", "deep_yaml_mapping",
             _opt(_flag, "map.yaml", "{a: " * DEEP + "1" + "}" * DEEP), "nest"),
        Case(f"options-{_fam}", "non_utf8_yaml",
             _opt(_flag, "latin1.yaml", "name: caf\xe9\n".encode("latin-1")), "UTF-8"),
        Case(f"options-{_fam}", "binary_yaml", _opt(_flag, "bin.yaml", bytes(range(256))), ""),
        Case(f"options-{_fam}", "yaml_alias_bomb",
             _opt(_flag, "alias.yaml", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
                 f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, "
                 f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                 f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))),
             ""),
        Case(f"options-{_fam}", "yaml_fifo", _opt_fifo(_flag, "fifo.yaml"),
             "not a regular file", wall_s=20),
        Case(f"options-{_fam}", "top_level_list", _opt(_flag, "list.yaml", "[1, 2]"), ""),
        Case(f"options-{_fam}", "huge_yaml", _sparse_opt(_flag, "huge.yaml", 300 * MB),
             "too large", slow=True),
    ]
OPTIONS += [
    Case("options-config", "deep_json", _opt("--config", "deep.json", _deep()), "nest"),
    Case("options-config", "non_utf8_json",
         _opt("--config", "latin1.json", '{"tp": "caf\xe9"}'.encode("latin-1")), "UTF-8"),
    Case("options-config", "tp_2_pow_70",
         _opt("--config", "big.json", '{"tp_size": ' + str(2**70) + "}"), "tp"),
    Case("options-config", "tp_1e400", _opt("--config", "inf.json", '{"tp_size": 1e400}'), "tp"),
    Case("options-hardware", "bandwidth_1e400",
         _opt("--hardware", "inf.yaml", "name: x\nlinks:\n  nvlink: {bandwidth_gbps: 1e400}\n"),
         ""),
    Case("options-baseline", "deep_baseline", _baseline("deep.json", _deep()), "nest"),
    Case("options-baseline", "deep_baseline_objects",
         _baseline("deepo.json", '{"a":' * DEEP + "1" + "}" * DEEP), "nest"),
    Case("options-baseline", "non_utf8_baseline",
         _baseline("latin1.json", b'{"report_version": "caf\xe9"}'), "UTF-8"),
    Case("options-baseline", "baseline_list", _baseline("list.json", "[1]"), ""),
    Case("options-baseline", "baseline_version_huge",
         _baseline("ver.json", '{"format": "tracekit-report", "report_version": 1e400}'), ""),
]


# ------------------------------------------------------------------ Ascend exports


def _ascend(breaker: Callable[[Path], Path], export: str = "text") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        import fixtures.make_ascend as mk

        root = d / "export"
        truth = mk.write_export(root, world=2, export=export)
        named = breaker(truth.rank_dirs[0])
        return ["analyze", str(root), "--jobs", "1"], named
    return build


OUT = "ASCEND_PROFILER_OUTPUT"


def _replace_json(rel: str, text: str) -> Callable[[Path], Path]:
    def br(r: Path) -> Path:
        p = r / rel
        p.write_text(text)
        return p
    return br


def _edit_json(rel: str, edit: Callable[[object], object]) -> Callable[[Path], Path]:
    def br(r: Path) -> Path:
        p = r / rel
        p.write_text(json.dumps(edit(json.loads(p.read_text()))))
        return p
    return br


def _tv_set(field: str, value: object) -> Callable[[object], object]:
    def edit(doc: object) -> object:
        assert isinstance(doc, list)
        for ev in doc:
            if ev.get("ph") == "X":
                ev[field] = value
                break
        return doc
    return edit


def _prepend_list(doc: object) -> object:
    assert isinstance(doc, list)
    return [[1], *doc]


def _csv_edit(edit: Callable[[list[list[str]]], list[list[str]]]) -> Callable[[Path], Path]:
    def br(r: Path) -> Path:
        import csv

        for name in ("trace_view.json", "communication.json", "communication_matrix.json"):
            (r / OUT / name).unlink()
        p = r / OUT / "kernel_details.csv"
        with p.open(newline="") as f:
            rows = list(csv.reader(f))
        with p.open("w", newline="") as f:
            csv.writer(f).writerows(edit(rows))
        return p
    return br


def _csv_text_in(column_word: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        col = next(i for i, c in enumerate(rows[0]) if column_word in c)
        rows[1][col] = "soon"
        return rows
    return edit


def _csv_drop(column_word: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        col = next(i for i, c in enumerate(rows[0]) if column_word in c)
        return [r[:col] + r[col + 1:] for r in rows]
    return edit


def _csv_huge(column_word: str, value: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        col = next(i for i, c in enumerate(rows[0]) if column_word in c)
        rows[1][col] = value
        return rows
    return edit


def _db(sql: str, kineto_free: bool = True) -> Callable[[Path], Path]:
    def br(r: Path) -> Path:
        for name in ("trace_view.json", "communication.json", "communication_matrix.json",
                     "kernel_details.csv"):
            p = r / OUT / name
            if p.exists():
                p.unlink()
        db = next((r / OUT).glob("ascend_pytorch_profiler_*.db"))
        con = sqlite3.connect(db)
        try:
            con.executescript(sql)
            con.commit()
        finally:
            con.close()
        return db
    return br


def _fifo_at(rel: str) -> Callable[[Path], Path]:
    def br(r: Path) -> Path:
        p = r / rel
        p.unlink()
        os.mkfifo(p)
        return p
    return br


ASCEND: list[Case] = [
    Case("ascend-text", "communication_fifo", _ascend(_fifo_at(f"{OUT}/communication.json")),
         "not a regular file", wall_s=20),
    Case("ascend-text", "trace_view_deep",
         _ascend(_replace_json(f"{OUT}/trace_view.json", _deep())), "not an Ascend trace_view"),
    Case("ascend-text", "communication_deep",
         _ascend(_replace_json(f"{OUT}/communication.json",
                               '{"a":' * DEEP + "1" + "}" * DEEP)), "nest"),
    Case("ascend-text", "metadata_deep",
         _ascend(_replace_json("profiler_metadata.json", _deep("[", "]"))), "nest"),
    Case("ascend-text", "profiler_info_deep",
         _ascend(_replace_json("profiler_info_0.json", '{"a":' * DEEP + "1" + "}" * DEEP)),
         "nest"),
    Case("ascend-text", "trace_view_ts_1e400",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _tv_set("ts", "1e400"))), "ts"),
    Case("ascend-text", "trace_view_ts_2_pow_70",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _tv_set("ts", str(2**70)))), "ts"),
    Case("ascend-text", "trace_view_dur_huge",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _tv_set("dur", 10**30))), "dur"),
    Case("ascend-text", "trace_view_pid_list",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _tv_set("pid", [1]))), "pid"),
    Case("ascend-text", "trace_view_args_list",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _tv_set("args", [1]))), "args"),
    Case("ascend-text", "trace_view_event_list",
         _ascend(_edit_json(f"{OUT}/trace_view.json", _prepend_list)),
         "not an Ascend trace_view"),
    Case("ascend-text", "communication_list_for_object",
         _ascend(_edit_json(f"{OUT}/communication.json",
                            lambda d: {k: [1] for k in d})),  # type: ignore[union-attr]
         "communication.json"),
    Case("ascend-text", "group_info_rank_huge",
         _ascend(_edit_json("profiler_metadata.json", lambda d: {
             **d, "parallel_group_info": {  # type: ignore[dict-item]
                 c: {**g, "global_ranks": [0, 2**70]}
                 for c, g in d["parallel_group_info"].items()}})),  # type: ignore[index]
         "global_ranks"),
    Case("ascend-text", "profiler_info_rank_huge",
         _ascend(_edit_json("profiler_info_0.json", lambda d: {**d, "rank_id": 2**70})),
         "rank"),
    Case("ascend-text", "kernel_details_text_in_start",
         _ascend(_csv_edit(_csv_text_in("Start Time"))), "Start Time"),
    Case("ascend-text", "kernel_details_text_in_duration",
         _ascend(_csv_edit(_csv_text_in("Duration"))), "Duration"),
    Case("ascend-text", "kernel_details_missing_start",
         _ascend(_csv_edit(_csv_drop("Start Time"))), "Start Time"),
    Case("ascend-text", "kernel_details_start_huge",
         _ascend(_csv_edit(_csv_huge("Start Time", "9" * 400))), "Start Time"),
    Case("ascend-text", "trace_view_fifo",
         _ascend(lambda r: _mkfifo(r / OUT / "trace_view.json")), "not a regular file",
         wall_s=20),
    Case("ascend-db", "db_text_in_start",
         _ascend(_db("UPDATE COMMUNICATION_OP SET startNs = 'soon';"), export="db"), "startNs"),
    Case("ascend-db", "db_start_huge",
         _ascend(_db("UPDATE TASK SET startNs = 1e300;"), export="db"), "startNs"),
    Case("ascend-db", "db_missing_column",
         _ascend(_db("ALTER TABLE COMMUNICATION_OP DROP COLUMN startNs;"), export="db"),
         "startNs"),
    Case("ascend-db", "db_dangling_string_id",
         _ascend(_db("UPDATE COMMUNICATION_OP SET opName = 987654321;"), export="db"),
         "opName"),
    Case("ascend-db", "db_string_id_text",
         _ascend(_db("UPDATE COMMUNICATION_OP SET opName = 'x';"), export="db"), "opName"),
    Case("ascend-db", "db_group_info_deep",
         _ascend(_db("UPDATE META_DATA SET value = '" + _deep() + "' "
                     "WHERE name = 'parallel_group_info';"), export="db"), "not JSON"),
]


def _mkfifo(p: Path) -> Path:
    p.unlink()
    os.mkfifo(p)
    return p


# values the schema lets be null: read as null (unreadable), the run is analysed (rc 0);
# tests/parsers/test_hostile_corpus.py checks that they are null.
NULL_OK = {"pid_2_pow_70", "pg_ranks_beyond_int32", "base_time_text", "comm_nelems_2_pow_70",
           "comm_group_size_1e400", "external_id_2_pow_70", "db_dangling_string_id",
           "db_string_id_text"}
CASES: list[Case] = [replace(c, rc=0) if c.name in NULL_OK else c
                     for c in KINETO + GZIP + OPTIONS + ASCEND]
