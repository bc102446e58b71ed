"""The CLI run in this process, for tests that read what a successful command printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.cli import main


def analyze(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """``tracekit analyze ARGS``'s standard output; fails the test on a non-zero exit."""
    with pytest.raises(SystemExit) as exc:
        main(["analyze", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return out
