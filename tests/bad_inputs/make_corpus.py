"""Regenerate the bad-input corpus beside this file: `python tests/bad_inputs/make_corpus.py`.

Each case is a small file and the one-line problem `tracekit analyze FILE` must report
(cases.json: file -> expected message fragment). Gzip files are written with mtime 0 so that
the bytes are reproducible.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
EV = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2.0}'
GOOD = '{"distributedInfo": {"rank": 0}, "traceEvents": [' + EV + "]}"


def trace(*events: str) -> str:
    return '{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}"


def ev(**override: object) -> str:
    base = json.loads(EV)
    for k, v in override.items():
        if v is ...:
            base.pop(k)
        else:
            base[k] = v
    return json.dumps(base)


CASES: dict[str, tuple[bytes, str]] = {
    "truncated.json.gz": (gzip.compress((GOOD * 50).encode(), mtime=0)[:60],
                          "truncated gzip file"),
    "corrupt.json.gz": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 40,
                        "corrupt gzip data"),
    "invalid.json": (b'{"traceEvents": [{"ph": "X",, "ts": 1}]}', "invalid JSON"),
    "truncated_text.json": (GOOD[:-30].encode(), "invalid JSON"),
    "binary.json": (bytes(range(256)), "invalid JSON"),
    "empty_file.json": (b"", "empty file"),
    "whitespace_only.json": (b"  \n\t ", "empty file"),
    "not_a_trace.json": (b'{"hello": 1, "world": [1, 2]}', "no traceEvents"),
    "top_level_string.json": (b'"traceEvents"', "is not a Kineto trace"),
    "top_level_number.json": (b"42", "is not a Kineto trace"),
    "ascend_trace_view.json": (b'[{"name": "HcclAllreduce", "ph": "X", "ts": "1.5", "dur": 2}]',
                               "Ascend trace_view.json"),
    "events_not_a_list.json": (b'{"traceEvents": {"ph": "X"}}', "expected a list"),
    "empty_events.json": (trace().encode(), "traceEvents is empty"),
    "only_metadata.json": (trace('{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, '
                                 '"ts": 0, "args": {"name": "main"}}').encode(),
                           "no timed (X or i) events"),
    "missing_ts.json": (trace(EV, ev(ts=...)).encode(), "event 1 ('aten::mm', ph X) has no ts"),
    "missing_dur.json": (trace(ev(dur=...)).encode(), "event 0 ('aten::mm', ph X) has no dur"),
    "missing_ph.json": (trace(EV, EV, ev(ph=...)).encode(), "event 2 has no ph"),
    "nan_ts.json": (trace(EV).replace('"ts": 1.5', '"ts": NaN').encode(),
                    "NaN or Infinity is not a JSON number"),
    "infinite_dur.json": (trace(EV).replace('"dur": 2.0', '"dur": Infinity').encode(),
                          "NaN or Infinity is not a JSON number"),
    "ts_is_text.json": (trace(EV, ev(ts="soon")).encode(),
                        "event 1: ts is a str ('soon'), expected a number"),
    "dur_is_list.json": (trace(ev(dur=[1])).encode(), "event 0: dur"),
    "pid_is_object.json": (trace(ev(pid={"a": 1})).encode(), "event 0: pid"),
    "name_is_number.json": (trace(EV, ev(name=5)).encode(), "event 1: name"),
    "args_not_object.json": (trace(ev(args=7)).encode(), "event 0: args"),
    "external_id_text.json": (trace(ev(args={"External id": "x"})).encode(),
                              "event 0: args External id"),
    "event_not_object.json": (trace(EV, "3").encode(), "event 1"),
    "no_rank.json": (b'{"traceEvents": [' + EV.encode() + b"]}", "pass it with --rank N"),
}


def main() -> None:
    expected = {}
    for name, (data, message) in CASES.items():
        (HERE / name).write_bytes(data)
        expected[name] = message
    (HERE / "cases.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
