"""Rank from a trace file name, for traces without ``distributedInfo.rank``.

Recognised (first match wins):

* SGLang: ``{time}-TP-{tp}[-DP-{dp}][-PP-{pp}][-EP-{ep}]...trace.json.gz``. With one pipeline
  stage the TP rank is the global rank (with DP attention the TP group spans every GPU; native
  DP replicas are separate worlds). With a nonzero PP index the global rank needs the TP size,
  so the name gives None and the caller asks for --rank.
* vLLM: ``..._rank{N}...`` / ``...-rank-{N}...``.
* generic: ``rank-N``, ``rank_N``, ``rankN``, ``rank.N``.
"""

from __future__ import annotations

import re

_SGLANG = re.compile(
    r"(?:^|[-_.])TP-(?P<tp>\d+)(?:-DP-(?P<dp>\d+))?(?:-PP-(?P<pp>\d+))?(?:-EP-(?P<ep>\d+))?"
    r"(?=[-_.]|$)"
)
_RANK = re.compile(r"(?:^|[^A-Za-z0-9])rank[-_.]?(?P<r>\d+)(?=[^0-9]|$)", re.IGNORECASE)


def sglang_coords(name: str) -> dict[str, int] | None:
    """{"tp": .., "dp": .., "pp": .., "ep": ..} from an SGLang trace name, or None."""
    m = _SGLANG.search(name)
    if m is None:
        return None
    return {k: int(v) for k, v in m.groupdict().items() if v is not None}


def rank_from_name(name: str) -> int | None:
    """Global rank written in a trace file name, or None when the name does not say it."""
    m = _RANK.search(name)
    if m is not None:
        return int(m.group("r"))
    coords = sglang_coords(name)
    if coords is not None and coords.get("pp", 0) == 0:
        return coords["tp"]
    return None
