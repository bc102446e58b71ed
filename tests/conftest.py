"""Shared fixtures: where the real reference traces and the bundled sample traces live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
REFERENCE_TRACES = SHARED / "reference_traces"
SAMPLE_TRACES = REPO / "sample_traces"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def reference_traces() -> Path:
    """../shared/reference_traces beside the checkout; tests skip when it is absent."""
    if not REFERENCE_TRACES.is_dir():
        pytest.skip(f"reference traces not found at {REFERENCE_TRACES} (only on project machines)")
    return REFERENCE_TRACES


@pytest.fixture(scope="session")
def kineto_hta(reference_traces: Path) -> Path:
    return reference_traces / "kineto" / "hta"


@pytest.fixture(scope="session")
def ascend_msinsight(reference_traces: Path) -> Path:
    return reference_traces / "ascend" / "msinsight"


@pytest.fixture(scope="session")
def sample_traces() -> Path:
    if not any(SAMPLE_TRACES.glob("*/manifest.json")):
        pytest.skip("sample_traces/ has no scenarios yet (make sample-traces)")
    return SAMPLE_TRACES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist ``--dist loadgroup`` (``make test``), the tests of a module that
    defines a module-scoped fixture run on one worker, so that the fixture (a captured run, a
    Dask cluster, an analysed reference trace) is built once rather than once per worker."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        module = item.nodeid.split("::", 1)[0]
        for defs in info.name2fixturedefs.values():
            if any(d.scope == "module" and d.baseid == module for d in defs):
                item.add_marker(pytest.mark.xdist_group(module))
                break
