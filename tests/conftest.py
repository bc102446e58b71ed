"""Shared fixtures: where the real reference traces and the bundled sample traces live."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class RecordingLibc:
    """Stands in for the C library of tracekit.parsers.kineto.heap: records each call."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture()
def libc(monkeypatch: pytest.MonkeyPatch) -> RecordingLibc:
    """heap's C library replaced by a recorder (no policy in force when the test starts)."""
    from tracekit.parsers.kineto import heap

    fake = RecordingLibc()
    monkeypatch.setattr(heap, "c_library", lambda: fake)
    assert heap._depth[0] == 0
    return fake


# The longest single tests (or groups), started first so that no worker is left running one
# of them alone at the end of `make test`; then every other `slow` test, then the rest.
LONGEST = (
    "tests/parsers/test_reader_sanitizers.py",
    "tests/workloads/test_samples.py::test_regenerating",
    "tests/capture/test_capture_torch.py",
    "tests/reports/test_browser.py",
    "tests/workloads/test_workload_runs.py",
)


def _start_order(item: pytest.Item) -> int:
    for i, prefix in enumerate(LONGEST):
        if item.nodeid.startswith(prefix):
            return i
    return len(LONGEST) + (0 if item.get_closest_marker("slow") else 1)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracekit wheel, built once from a copy of the checkout's sources (what git tracks
    or would track under tracekit/ and the packaging files) with pip's setuptools backend,
    without build isolation (nothing is downloaded). Its users share the xdist group "wheel"."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if name.startswith(("tracekit/", "pyproject.toml", "setup.py", "MANIFEST.in",
                            "README.md", "LICENSE")) and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((REPO / name).read_bytes())
    dist = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(dist), str(src)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = dist.glob("tracekit-*.whl")
    return wheel


class _GroupedNodeIds:
    """pytest-xdist 3.8 puts an item's xdist_group into its node id by assigning
    ``item._nodeid``, which pytest 9 no longer reads (``nodeid`` is ``str(item._id)``), so
    ``--dist loadgroup`` silently ran every group's tests on every worker and built each
    module-scoped fixture once per worker. After xdist's hook, give the item the id xdist
    wanted; a no-op where xdist's own assignment works."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            wanted = item.__dict__.get("_nodeid")
            if isinstance(wanted, str) and wanted != item.nodeid:
                item._id = type(item._id).parse(wanted)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupedNodeIds(), "tracekit-grouped-node-ids")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist ``--dist loadgroup`` (``make test``), the tests of a module that
    defines a module-scoped fixture run on one worker, so that the fixture (a captured run, a
    Dask cluster, an analysed reference trace) is built once rather than once per worker.
    The longest tests run first (a stable sort: a module's tests keep their order)."""
    items.sort(key=_start_order)
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        module = item.nodeid.split("::", 1)[0]
        for defs in info.name2fixturedefs.values():
            if any(d.scope == "module" and d.baseid == module for d in defs):
                item.add_marker(pytest.mark.xdist_group(module))
                break
