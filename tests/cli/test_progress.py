"""Stage progress of `tracekit analyze` (tracekit.progress): on a terminal, quiet otherwise.

The command runs in a child process whose stderr is a pseudo-terminal (the ``pty`` module) or a
pipe; its stdout is a pipe in both cases, so only stderr decides.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

STAGES = ("parse", "attribute", "cross-rank", "measure", "reports")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _command(run: Path, out: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "tracekit", "analyze", str(run), "--json", str(out), *more]


@pytest.fixture()
def run_dir(sample_traces: Path) -> Path:
    path = sample_traces / "tp4_full_tp"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


def _on_pty(cmd: list[str]) -> tuple[int, str]:
    """Run ``cmd`` with stderr on a pseudo-terminal; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                            env=_env())
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    proc.communicate(timeout=300)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


def test_every_stage_is_named_on_a_terminal(run_dir: Path, tmp_path: Path) -> None:
    code, err = _on_pty(_command(run_dir, tmp_path / "a.json"))
    assert code == 0, err
    for stage in STAGES:
        assert stage in err, (stage, err)
    assert " s" in err  # each stage says how long it took


def test_a_cache_hit_is_said_on_a_terminal(run_dir: Path, tmp_path: Path) -> None:
    cmd = _command(run_dir, tmp_path / "a.json", "--cache-dir", str(tmp_path / "cache"))
    assert _on_pty(cmd)[0] == 0
    code, err = _on_pty(cmd)
    assert code == 0, err
    assert "from the cache" in err
    assert "attribute" not in err  # nothing was recomputed
    assert "reports" in err


def test_nothing_extra_without_a_terminal(run_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.run(_command(run_dir, tmp_path / "a.json", "--cache-dir",
                                   str(tmp_path / "cache")),
                          capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert not any(f"{stage} ..." in proc.stdout for stage in STAGES)
