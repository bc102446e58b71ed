"""Ground truth: every c10d collective a rank issues, in issue order, with its meaning.

The layer code says which path it is on (``on_path``) and which SGLang function issues the
call (``issued_by``); the group methods call :func:`record` right before each
``torch.distributed`` call. The entries become the rank's sidecar (see ``sidecar.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tracekit.rules.labels import PathLabel


@dataclass
class _State:
    entries: list[dict[str, Any]] = field(default_factory=list)
    path: str = PathLabel.OTHER
    call: str | None = None
    layer: int | None = None


_STATE = _State()


def reset() -> None:
    """Forget everything recorded so far (one log per process)."""
    global _STATE
    _STATE = _State()


def entries() -> list[dict[str, Any]]:
    return list(_STATE.entries)


@contextlib.contextmanager
def on_path(path: str) -> Iterator[None]:
    """Collectives issued inside belong to ``path`` (a PathLabel)."""
    saved = _STATE.path
    _STATE.path = path
    try:
        yield
    finally:
        _STATE.path = saved


@contextlib.contextmanager
def issued_by(call: str) -> Iterator[None]:
    """Collectives issued inside are attributed to the SGLang function ``call``.

    The outermost named function wins, so ``tensor_model_parallel_all_reduce`` stays the
    caller even though GroupCoordinator helpers run underneath it.
    """
    saved = _STATE.call
    if saved is None:
        _STATE.call = call
    try:
        yield
    finally:
        _STATE.call = saved


def current_layer() -> int | None:
    return _STATE.layer


@contextlib.contextmanager
def in_layer(layer: int | None) -> Iterator[None]:
    saved = _STATE.layer
    _STATE.layer = layer
    try:
        yield
    finally:
        _STATE.layer = saved


def record(op: str, group: Any, nbytes: int, desc: str | None = None) -> None:
    """Append one entry; ``group`` is the GroupCoordinator whose device group runs it
    (``desc`` names its cpu group instead when the call runs there)."""
    path = _STATE.path
    _STATE.entries.append({
        "index": len(_STATE.entries),
        "op": op,
        "group": group.label,
        "group_desc": desc or group.desc,
        "members": list(group.ranks),
        "path": path,
        "phase": PathLabel.PHASE_OF[path],
        "layer": _STATE.layer,
        "bytes": int(nbytes),
        "call": _STATE.call or "unknown",
    })
