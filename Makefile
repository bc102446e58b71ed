# tracekit: `make demo` and `make test` work from a clean clone on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# the stamp is keyed on everything the install builds from: the package metadata and the
# native reader's C sources (an editable install compiles them in place; a change rebuilds)
NATIVE := $(wildcard tracekit/parsers/kineto/native/*.c tracekit/parsers/kineto/native/*.h)
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py $(NATIVE) | cksum | cut -d' ' -f1)
# The capture extra asks for torch>=2.1 (a user keeps their own CUDA build); here torch is pinned to
# the CPU wheel torch==2.13.0 in the same install, so no range can pull a CUDA build. /opt/wheels holds it.
WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)

.PHONY: setup demo test golden lint typecheck browser sample-traces bench bench-scale accuracy clean

$(STAMP): pyproject.toml setup.py $(NATIVE)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(WHEELS) 'torch==2.13.0' -e '.[capture,html,dist,fast,test]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

setup: $(STAMP)

# Debian's chromium + chromedriver for the HTML browser tests (root on this machine kind).
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium + chromium-driver (apt)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
	    || echo "chromium could not be installed: browser tests will skip"; \
	else echo "chromium not installable here: browser tests will skip"; fi

demo: setup
	$(BIN)/python -m tracekit.demo

# The suite on every core (pytest-xdist): tests of a module with a module-scoped fixture stay on
# one worker (tests/conftest.py), so the fixture is built once. TEST_WORKERS=0: one process.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (git ignores __pycache__): the
# suite starts many Python processes that import tracekit, and each pytest worker
# rewrites the test modules' asserts; without the caches every one compiles them again.
TEST_WORKERS ?= auto
test: setup browser
	$(BIN)/ruff check tracekit tests benchmarks
	$(BIN)/lint-imports
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# Rewrite the golden files (tests/golden/expected) from the current code; review the diff
# (docs/golden.md).
golden: setup
	$(BIN)/python -m tests.golden.regen

lint: setup
	$(BIN)/ruff check tracekit tests benchmarks

typecheck: setup
	$(BIN)/mypy tracekit

sample-traces: setup
	$(BIN)/python -m tracekit.workloads.samples --out sample_traces

bench: setup
	$(BIN)/python benchmarks/parse.py

bench-scale: setup
	$(BIN)/python benchmarks/scale.py

accuracy: setup
	$(BIN)/python benchmarks/accuracy.py sample_traces
	$(BIN)/python benchmarks/accuracy.py --config sample_traces

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info
	rm -f tracekit/parsers/kineto/native/_accum*.so
