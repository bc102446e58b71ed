"""Fixtures of the pipeline-stage tests: the sample run they analyse."""

from __future__ import annotations

from pathlib import Path

import pytest

RUN = "tp4_full_tp"  # full TP on 4 ranks: every stage has work


@pytest.fixture()
def run_dir(sample_traces: Path) -> Path:
    """The bundled sample run RUN; the test skips where it is absent."""
    path = sample_traces / RUN
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path
