"""The per-rank progress bar: on a terminal it counts ranks (batches advance by their size)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

CHILD = """
from tracekit.engine import map_per_rank
out = map_per_rank(len, [[1, 2, 3], [4], [5, 6, 7]], jobs=1, progress=True, label="ranks",
                   weights=[3, 1, 3])
print(out)
"""


def _run_on_a_terminal() -> str:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                            stderr=follower, env={**os.environ, "COLUMNS": "100"})
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=60)
    os.close(leader)
    assert proc.returncode == 0
    assert out.decode().strip() == "[3, 1, 3]"
    return b"".join(chunks).decode(errors="replace")


def test_bar_counts_ranks_not_tasks() -> None:
    # GIVEN three tasks holding 3, 1 and 3 rank files, run with a terminal on stderr
    shown = _run_on_a_terminal()
    # THEN the bar is labelled and ends at 7 of 7 ranks, never "of 3"
    assert "ranks" in shown
    assert "7/7" in shown
    assert "/3" not in shown
