"""The rule YAML files are package data: a built wheel contains them."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tracekit.rules.loader import packaged_files


@pytest.mark.xdist_group("wheel")
def test_wheel_contains_rule_files(built_wheel: Path) -> None:
    # GIVEN the source tree WHEN a wheel is built (conftest.built_wheel: no network, no build
    # isolation)
    wheel = built_wheel
    # THEN every packaged rule file is inside it, under tracekit/rules/data/
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in packaged_files():
        assert f"tracekit/rules/data/{name}" in names
