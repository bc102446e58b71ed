"""Rewrite tests/golden/expected/ from the current code: ``make golden``.

    python -m tests.golden.regen [CASE ...]

Each case's folder is replaced whole (a file no longer produced disappears). Review the
change with ``git diff --stat tests/golden/expected`` and ``git diff tests/golden/expected``
before committing it (docs/golden.md).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # fixtures.make_ascend, as under pytest's pythonpath
    sys.path.insert(0, str(TESTS))

from golden.cases import CASES, EXPECTED  # noqa: E402
from golden.render import render  # noqa: E402


def main(argv: list[str]) -> int:
    names = set(argv)
    unknown = names - {c.name for c in CASES}
    if unknown:
        print(f"unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for case in CASES:
        if names and case.name not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
            files = render(case, Path(tmp))
        folder = EXPECTED / case.name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        print(f"{case.name}: {len(files)} files in {folder.relative_to(TESTS.parent)}")
    if not names:
        json_report()
    return 0


def json_report() -> None:
    """tests/outputs/golden/tp4_full_tp.h200.json (tests/outputs/test_golden_report.py): the
    JSON report of the smallest sample, the packaged profile's path written as TRACEKIT/."""
    import subprocess

    root = TESTS.parent
    target = TESTS / "outputs" / "golden" / "tp4_full_tp.h200.json"
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        out = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "tracekit", "analyze",
                        str(root / "sample_traces" / "tp4_full_tp"), "--hardware", "h200",
                        "--json", str(out)], check=True, cwd=root, capture_output=True)
        text = out.read_text().replace(f'"{root}/tracekit/', '"TRACEKIT/')
    target.write_text(text)
    print(f"json report: {target.relative_to(root)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
