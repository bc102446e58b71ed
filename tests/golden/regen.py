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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
