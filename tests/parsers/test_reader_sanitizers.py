"""The native reader built with AddressSanitizer and UndefinedBehaviorSanitizer runs the reader
agreement tests (test_reader_agreement.py: EXAMPLES hypothesis-generated documents, which
bounds its time, a few minutes; and the hand-written edge cases of test_native_readers.py)
without a report.

The extension is compiled from tracekit/parsers/kineto/native/accum.c into a temporary folder with
``-fsanitize=address,undefined``, and loaded there through ``TRACEKIT_NATIVE_LIB`` in a child
pytest whose process has libasan preloaded (Python itself is not built with ASan). Skips when
the compiler lacks sanitizer support.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "tracekit" / "parsers" / "kineto" / "native"
EXAMPLES = 250  # generated documents (about 40 s unsanitized on the 2-core dev machine)
_FLAGS = ["-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
          "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _runtime(cc: str) -> Path | None:
    """The ASan runtime to preload (gcc and clang both answer -print-file-name)."""
    out = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True,
                         check=False).stdout.strip()
    path = Path(out)
    return path if path.is_absolute() and path.exists() else None


def _build(cc: str, out: Path) -> Path | None:
    """The sanitized extension in ``out``, or None when the compiler cannot build it."""
    target = out / ("_accum" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cc, *_FLAGS, f"-I{sysconfig.get_paths()['include']}", f"-I{NATIVE}",
           str(NATIVE / "accum.c"), "-o", str(target)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    return target if done.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the ASan preload is set up for Linux")
def test_the_sanitized_reader_agrees_with_msgspec_without_a_report(tmp_path: Path) -> None:
    # GIVEN the extension built with AddressSanitizer and UndefinedBehaviorSanitizer
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    runtime = _runtime(cc)
    lib = _build(cc, tmp_path) if runtime is not None else None
    if runtime is None or lib is None:
        pytest.skip(f"{cc} cannot build with -fsanitize=address,undefined")
    env = {
        **os.environ,
        "LD_PRELOAD": str(runtime),
        # CPython's own allocations are never freed at exit: leaks are not the question
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
        "TRACEKIT_NATIVE_LIB": str(lib),
        "TRACEKIT_AGREEMENT_EXAMPLES": str(EXAMPLES),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    # WHEN the agreement and reader tests run against it, for a bounded time
    tests = [str(REPO / "tests" / "parsers" / n) for n in
             ("test_reader_agreement.py", "test_native_readers.py")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-x",
         "-k", "not reference_trace and not sample_trace", *tests],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500, check=False)
    report = done.stdout[-4000:] + done.stderr[-4000:]
    # THEN they pass, with no sanitizer report
    assert "ERROR: AddressSanitizer" not in report, report
    assert "runtime error:" not in report, report
    assert done.returncode == 0, report
    # AND the sanitized build was the one loaded (not the regular extension)
    probe = subprocess.run(
        [sys.executable, "-c", "from tracekit.parsers.kineto import native; "
         "print(native._module().__file__)"],
        cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert probe.stdout.strip() == str(lib), probe.stdout + probe.stderr
