"""Golden files: tiny runs through every stage against tests/golden/expected/ (docs/golden.md)."""
