"""How the native reader is built and what happens without it: the wheel is platform-specific
and holds the compiled extension, and a fresh venv that installs it analyses a trace with the
native reader and no compiler on PATH; without the extension one warning line says what it
costs and msgspec reads the trace."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "sample_traces" / "tp4_full_tp"

# a run in a child process: analyse TRACE, print the reader of each rank, the warnings
_ANALYSE = r"""
import shutil, sys, warnings
warnings.simplefilter("always")
import tracekit
with warnings.catch_warnings(record=True) as caught:
    analysis = tracekit.analyze(sys.argv[1])
readers = sorted({analysis.run.events.schema.metadata.get(b"reader", b"").decode()})
print("file", tracekit.__file__)
print("cc", shutil.which("cc") or shutil.which("gcc"))
print("readers", ",".join(readers))
print("measured", analysis.measured.num_rows)
for w in caught:
    print("warning", str(w.message).splitlines()[0])
"""


def _analyse(python: str, env: dict[str, str], cwd: Path) -> dict[str, list[str]]:
    done = subprocess.run([python, "-c", _ANALYSE, str(TRACE)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key, []).append(value)
    return out


pytestmark = pytest.mark.skipif(not TRACE.is_dir(), reason=f"{TRACE} not found")


def test_without_the_extension_one_warning_says_what_it_costs(tmp_path: Path) -> None:
    # GIVEN a process where the extension cannot be loaded (a build that does not exist)
    env = {**os.environ, "TRACEKIT_NATIVE_LIB": str(tmp_path / "missing.so"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # WHEN a four-rank run is analysed
    out = _analyse(sys.executable, env, tmp_path)
    # THEN msgspec read every rank, and one warning line (not one per rank) says so, with
    # the cost
    assert out["readers"] == ["msgspec"]
    native = [w for w in out.get("warning", []) if "native Kineto reader" in w]
    assert len(native) == 1, out
    assert "slower" in native[0] and "msgspec" in native[0]


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_the_wheel_holds_the_extension_and_reads_natively_without_a_compiler(
        built_wheel: Path, tmp_path: Path) -> None:
    # GIVEN the wheel built from a copy of the sources (conftest.built_wheel: the same
    # setuptools backend that python -m build runs; no build isolation)
    wheel = built_wheel
    # THEN it is platform-specific and holds the compiled extension
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"tracekit/parsers/kineto/native/_accum{suffix}" in names, names
    # AND a fresh venv (its dependencies from this interpreter's site-packages, added as a
    # plain path: no editable tracekit there) installs it
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    (Path(site.stdout.strip()) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True,
                   timeout=600)
    # WHEN it analyses a trace with only the venv on PATH (no compiler)
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    out = _analyse(str(python), env, tmp_path)
    # THEN the installed package read every rank with the native reader, without a warning
    assert out["file"][0].startswith(str(venv)), out
    assert out["cc"] == ["None"]
    assert out["readers"] == ["native"]
    assert int(out["measured"][0]) > 0
    assert not [w for w in out.get("warning", []) if "native Kineto reader" in w], out
