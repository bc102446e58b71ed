"""`python -m tracekit` ends without tearing the interpreter down (tracekit.cli.run): the
exit status, the output, the exit handlers and a closed pipe behave as a normal exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def _tracekit(*args: str, wrap: str = "") -> subprocess.CompletedProcess[str]:
    code = (f"import sys; sys.argv = ['tracekit', *sys.argv[1:]]\n{wrap}\n"
            "import runpy; runpy.run_module('tracekit', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=_env(), cwd=REPO, timeout=120)


def test_success_prints_everything_and_exits_zero() -> None:
    # WHEN the version is asked for
    done = _tracekit("--version")
    # THEN it is printed in full and the status is 0
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tracekit, version ")


def test_an_error_keeps_its_status_and_line(tmp_path: Path) -> None:
    # WHEN a path that does not exist is analysed
    done = _tracekit("analyze", str(tmp_path / "absent"))
    # THEN the one-line error and its non-zero status come back
    assert done.returncode != 0
    assert done.stderr.startswith("tracekit: error: ")


def test_exit_handlers_run(tmp_path: Path) -> None:
    # GIVEN an exit handler registered before the command runs
    mark = tmp_path / "ran"
    wrap = f"import atexit; atexit.register(lambda: open({str(mark)!r}, 'w').write('x'))"
    # WHEN the command ends
    done = _tracekit("--version", wrap=wrap)
    # THEN the handler ran
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "x"


def test_a_live_thread_is_waited_for(tmp_path: Path) -> None:
    # GIVEN a (non-daemon) thread still at work when the command ends
    mark = tmp_path / "thread"
    wrap = ("import threading, time\n"
            f"def late():\n    time.sleep(0.3); open({str(mark)!r}, 'w').write('done')\n"
            "threading.Thread(target=late).start()")
    # WHEN the command ends
    done = _tracekit("--version", wrap=wrap)
    # THEN the normal exit waited for it
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "done"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
def test_a_closed_pipe_is_not_an_error() -> None:
    # GIVEN a reader that stops at once (`tracekit --help | head -0`)
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "--help"], cwd=REPO,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    # THEN the command still ends normally, without a traceback
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1)
    assert "Traceback" not in err
