# Every target installs what it needs first, so a fresh clone only needs `make demo` or `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
DEPS := $(VENV)/.deps-installed
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test ci lint test-rust loom proptest fleet-tools test-python test-fleet test-browser test-package \
	build-dev build-release bench \
	clean promtool chromium console-vendor console-screenshots lock manifests image image-check

# uv installs what uv.lock pins; its own version is pinned here (and in the Dockerfile).
UV_VERSION := 0.13.8
UV := $(BIN)/uv
export UV_PYTHON_DOWNLOADS := never

$(PYTHON):
	$(PY) -m venv $(VENV)

# Every Python dependency at the version uv.lock pins: the package's, all its extras and the dev
# group (maturin included). `--locked` fails when uv.lock does not match pyproject.toml (run
# `make lock`); `--inexact` keeps pip and the package maturin installs.
$(DEPS): pyproject.toml uv.lock | $(PYTHON)
	$(BIN)/pip install --quiet "uv==$(UV_VERSION)"
	$(UV) sync --quiet --locked --inexact --no-install-project --all-extras
	$(BIN)/python -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'sluicegate-repo.pth').write_text('$(CURDIR)\n')"
	touch $@

# The one command that updates uv.lock: the newest versions pyproject.toml allows.
lock: | $(PYTHON)
	$(BIN)/pip install --quiet "uv==$(UV_VERSION)"
	$(UV) lock --upgrade

# Debug (dev-opt) build of the extension (its dependencies are already installed from the lock).
build-dev: $(DEPS)
	$(BIN)/maturin develop --quiet --uv

build-release: $(DEPS)
	$(BIN)/maturin develop --quiet --uv --release

demo: build-release
	$(PYTHON) -m sluicegate.demo

# stubtest checks the hand-written `_core.pyi` against the extension just built (every name and
# signature); no allowlist: PyO3 gives every function and constructor its text signature.
lint: build-dev
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python,bench -- -D warnings
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

# Debian's prometheus package: promtool checks the /metrics exposition and the alert rules (and
# runs their unit tests); its server evaluates every dashboard panel in the e2e suite.
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

# `make test` is the suite a change must keep green (the goal: under 25 minutes on a clean
# clone); the fleet (three replicas, a load balancer, Redis stopped for 20 s), the browser and
# the packaging checks are their own targets, which `make ci` (what `.ci/run` runs) adds.
SPLIT_SUITES := tests/fleet tests/package tests/image tests/console/test_browser.py
# On two workers (pytest-xdist): most tests wait on the real processes they start. Each worker
# is a test session of its own (its own PostgreSQL schema, temp dirs and port-0 listeners); the
# split suites, which take fixed ports and the machine's whole CPU, stay on one.
PYTEST_WORKERS ?= 2
test-python: build-dev promtool
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) $(addprefix --ignore=,$(SPLIT_SUITES))

test-fleet: build-dev fleet-tools
	$(BIN)/pytest -q tests/fleet

test-browser: build-dev chromium
	$(BIN)/pytest -q tests/console/test_browser.py

# The wheel built, installed into a fresh venv and run from outside the repository (and the
# image, when SLUICEGATE_IMAGE names one: `make image-check`).
test-package: build-dev
	$(BIN)/pytest -q tests/package tests/image

ci: test test-fleet test-browser test-package

# The console's vendored htmx and uPlot, fetched again at the versions of SOURCES.json.
console-vendor: $(DEPS)
	$(PYTHON) -m control.console.vendor

# Screenshots of every console page (docs/console/), taken by the browser tests under load.
console-screenshots: build-dev chromium
	SLUICEGATE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(BIN)/pytest -q tests/console -k browser

test: lint test-rust loom test-python

# Each overlay of deploy/kubernetes/ rendered to plain manifests (committed; tests/deploy/ checks
# them, and that they are what kustomize makes, where kubectl is installed). Needs kubectl 1.21+.
manifests:
	deploy/kubernetes/render.sh

# The container image (Dockerfile). Without an image registry its bases are made from Debian's
# packages (deploy/image/bases.sh); BUILDER_IMAGE= and PYTHON_IMAGE= name others (the official
# images, say). A Docker daemon is started for it if none runs (deploy/image/with-docker.sh).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE ?= sluicegate:$(VERSION)
image:
	IMAGE=$(IMAGE) deploy/image/with-docker.sh deploy/image/build.sh

# The image run as a container (--network host, on loopback): a streamed request through it,
# SIGTERM drains an open stream, the usage is on its volume after a restart; prints the image's
# size and its start-to-ready time.
image-check: build-dev
	IMAGE=$(IMAGE) deploy/image/with-docker.sh bash -c 'deploy/image/build.sh && \
		SLUICEGATE_IMAGE=$(IMAGE) $(BIN)/pytest -q -s -p no:cacheprovider tests/image'

bench: build-release fleet-tools
	$(PYTHON) -m bench.run

clean:
	rm -rf $(VENV) target python/sluicegate/*.so
