# Every target installs what it needs first, so a fresh clone only needs `make demo` or `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
DEPS := $(VENV)/.deps-installed
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test lint test-rust loom proptest fleet-tools test-python build-dev build-release bench \
	clean promtool chromium console-vendor console-screenshots

$(PYTHON):
	$(PY) -m venv $(VENV)

# Python tools and the package's dependencies (maturin installs the extras with the build).
$(DEPS): pyproject.toml | $(PYTHON)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "maturin>=1.7,<2"
	$(BIN)/python -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'sluicegate-repo.pth').write_text('$(CURDIR)\n')"
	touch $@

# Debug (dev-opt) build of the extension, with the dev extras installed.
build-dev: $(DEPS)
	$(BIN)/maturin develop --quiet --extras dev

build-release: $(DEPS)
	$(BIN)/maturin develop --quiet --release --extras dev

demo: build-release
	$(PYTHON) -m sluicegate.demo

# stubtest checks the hand-written `_core.pyi` against the extension just built (every name and
# signature); no allowlist: PyO3 gives every function and constructor its text signature.
lint: build-dev
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(PYTHON) -m mypy.stubtest sluicegate._core

test-rust:
	cargo test --quiet

# loom model-checks the lock-free ring of the usage hand-off (`usage/ring.rs`): push, pop, the
# bound, close and the sleeping consumer's wake-up, over every interleaving up to the bound.
LOOM_MAX_PREEMPTIONS ?= 3
loom:
	LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) cargo test --quiet --features loom --lib loom_

# The property tests (SSE tap, body peek and splice, answer meter, key parser, config compile,
# journal replay) with many more cases than `make test` gives them.
PROPTEST_CASES ?= 20000
proptest:
	PROPTEST_CASES=$(PROPTEST_CASES) cargo test --release --lib --quiet

# promtool (Debian's prometheus package) checks the /metrics exposition in the e2e suite.
promtool:
	@command -v promtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# Debian's Chromium and its matching chromedriver drive the console's browser tests (Selenium).
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		chromium chromium-driver >/dev/null; }

# The fleet suite runs a load balancer in front of its replicas (Debian's haproxy) and a Redis of
# its own (redis-server, which also runs the shared one).
fleet-tools:
	@command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null; }
	@command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends redis-server >/dev/null; }

test-python: build-dev promtool fleet-tools chromium
	$(BIN)/pytest -q

# The console's vendored htmx and uPlot, fetched again at the versions of SOURCES.json.
console-vendor: $(DEPS)
	$(PYTHON) -m control.console.vendor

# Screenshots of every console page (docs/console/), taken by the browser tests under load.
console-screenshots: build-dev chromium
	SLUICEGATE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(BIN)/pytest -q tests/console -k browser

test: lint test-rust loom test-python

bench: build-release
	$(PYTHON) -m bench.run

clean:
	rm -rf $(VENV) target python/sluicegate/*.so
