# qoslab: the only entry points a newcomer needs.
#   make demo    set everything up and run the main study on the embedded defaults
#   make test    set everything up, lint, and run every test (Rust, Python, C)
#   make bench   time the hot paths and write docs/benchmarks.md
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
QOSLAB  := $(VENV)/bin/qoslab
CARGO   ?= cargo
# The Rust tests build in the nolto profile: the release profile's optimisation without its LTO
# (Cargo.toml says why); `make fuzz`, `make sim-test` and `make media-test` build in it too.
CARGO_TEST_PROFILE := --profile nolto
CARGO_TEST_FLAGS := $(CARGO_TEST_PROFILE) --workspace

RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml Cargo.lock

# The extension is built in the release profile (LTO: `make demo` and `make bench` run and time
# this build) unless CORE_PROFILE says otherwise: `make test` builds it in the nolto profile, the
# one its Rust tests build in (Cargo.toml: the release profile less LTO), so the crates both
# link are compiled once, and no test waits for an LTO build (about 9 of make test's 35 minutes
# on two cores). The results are the same bits (Cargo.toml says why). One stamp per profile,
# and only the installed one exists: a `make bench` after `make test` builds the release again.
CORE_PROFILE ?= release
CORE := $(VENV)/.core-$(CORE_PROFILE)

# Each part of the project adds its own targets to these lists in mk/<part>.mk. TEST_TARGETS
# run after the root tests, alone; LANE_TEST_TARGETS (tests that judge no timing and need
# neither root nor a guest) run in the lane beside pytest, after the Rust tests.
LINT_TARGETS  :=
TEST_TARGETS  :=
LANE_TEST_TARGETS :=
BENCH_TARGETS :=
DEMO_TARGETS  :=
SETUP_TARGETS :=

include $(sort $(wildcard mk/*.mk))

.PHONY: help setup demo test lint lint-cargo lint-tree test-rust test-python test-python-workers \
	test-python-root test-lint-rust bench clean tools

help:
	@echo "make demo   - install into .venv, build the Rust core, run the NVMe-lite study"
	@echo "make test   - install, lint, run all tests (cargo test, pytest, C tests)"
	@echo "make bench  - time the hot paths, write docs/benchmarks.md"
	@echo "make fuzz   - fuzz every parser at length (FUZZ_CASES per target), print the counts"
	@echo "make clean  - remove .venv, target/ and out/"

# ---- set-up -------------------------------------------------------------------------------

# --no-compile: pip would byte-compile every module of every package (6,353 files: scipy, pandas,
# pyarrow, dask, ... most of which nothing here imports), about half of the install's CPU; a
# module is compiled at its first import instead (the suite's imports: 1,653 modules, 8 CPU s,
# written once, PYTEST_ENV below). `make test` starts the extension's build when this and clippy
# are done, and this was the later of the two (venv and pip: 81-101 s -> 41-43 s wall, 59-62 ->
# 25-26 CPU s, measured alone).
$(VENV)/.deps: requirements.txt
	@command -v $(CARGO) >/dev/null || { echo "qoslab: error: cargo not found; install Rust with rustup (https://rustup.rs)" >&2; exit 2; }
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --no-compile --upgrade pip
	$(VENV)/bin/pip install --quiet --no-compile -r requirements.txt
	touch $@

# Rebuilt only when a Rust source changes, so a second `make demo` skips the build.
$(CORE): $(VENV)/.deps $(RUST_SOURCES) pyproject.toml
	rm -f $(VENV)/.core $(VENV)/.core-*
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
	  $(VENV)/bin/maturin develop --profile $(CORE_PROFILE) --quiet
	touch $@

setup: $(CORE) $(SETUP_TARGETS)

# System tools from Debian's packages, installed only when missing. Without chromium only the
# test that opens the HTML report in a browser is skipped (it says why); without qemu, the
# guest kernel's (docs/vm.md); without strace, the count of real fio's syncs. The guest kernel's own packages go to a cache, not the system
# (`qoslab vm fetch`).
tools:
	@if ! command -v fio >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null; \
	  else \
	    echo "qoslab: error: fio is not installed and installing it needs root: sudo apt-get install fio" >&2; exit 2; \
	  fi; \
	fi
	@if ! command -v strace >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null \
	      || echo "qoslab: warning: could not install strace; real fio's sync counts will not be checked" >&2; \
	  else \
	    echo "qoslab: warning: strace is not installed (sudo apt-get install strace); real fio's sync counts will not be checked" >&2; \
	  fi; \
	fi
	@if ! command -v qemu-system-x86_64 >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null \
	      || echo "qoslab: warning: could not install qemu-system-x86; the guest kernel's tests will be skipped" >&2; \
	  else \
	    echo "qoslab: warning: qemu-system-x86 is not installed (sudo apt-get install qemu-system-x86); the guest kernel's tests will be skipped" >&2; \
	  fi; \
	fi
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "qoslab: warning: could not install chromium; the report's browser test will be skipped" >&2; \
	  else \
	    echo "qoslab: warning: chromium is not installed (sudo apt-get install chromium); the report's browser test will be skipped" >&2; \
	  fi; \
	fi

# ---- the two commands of the README ---------------------------------------------------------

demo: setup $(DEMO_TARGETS)

lint: lint-cargo lint-tree

# fmt and clippy need nothing from .venv: `make test` runs them beside pip's install.
lint-cargo:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --quiet --profile $(CORE_PROFILE) --workspace --all-targets -- -D warnings

# ruff, and each part's own lint (C and the kernel modules: warnings are errors).
lint-tree: $(VENV)/.deps $(LINT_TARGETS)
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench

# `cargo test` and pytest both pass with zero tests; a suite that silently lost its tests must fail.
test-rust:
	$(CARGO) test $(CARGO_TEST_FLAGS) 2>&1 | tee $(VENV)/cargo-test.log
	@n=$$(awk '/^test result: ok\./ {s += $$4} END {print s+0}' $(VENV)/cargo-test.log); \
	  echo "cargo test: $$n tests passed"; [ "$$n" -gt 0 ] || { echo "cargo test ran no tests" >&2; exit 1; }

# pytest exits 5 when it collects nothing, which fails this target. Tests that measure a real
# device (marked root: loop devices, sysfs) run alone afterwards (test-python-root), so that no
# other test's load moves the latencies they check; the rest run on two workers, each test file
# on one of them but each document of tests/test_docs_commands.py on its own, the longest units
# first (tests/conftest.py says why). Each run lists its slowest tests: `make test` has a
# 25-minute budget, and the list says where it goes. The tests see the extension's profile
# (CORE_PROFILE: a `make demo` in a document reuses the build; tests/test_wheel.py builds its
# wheel in it), and not the jobserver of the make that runs them. Python writes its bytecode
# even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on the machines this is
# built on): otherwise each `qoslab` process the suite starts compiles every module it imports
# again (tests/test_sim.py: 30.7 -> 27.5 CPU s), and each pytest run rewrites every
# test file's asserts again (collecting: 8.4 -> 4.7 CPU s when the workers have written them).
PYTEST_ENV := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PYTHONDONTWRITEBYTECODE \
	CORE_PROFILE=$(CORE_PROFILE)

test-python-workers: setup tools
	$(PYTEST_ENV) $(VENV)/bin/pytest -q -n 2 --dist loadfile -m "not root" --durations=15

test-python-root: setup tools
	$(PYTEST_ENV) $(VENV)/bin/pytest -q -m root --durations=5

test-python: test-python-workers test-python-root

# `make test`: the set-up with the extension in the nolto profile (CORE_PROFILE above), with
# fmt and clippy beside it (pip's install of .venv keeps one core busy for a minute or more;
# cargo's lock on target/ puts clippy and the extension's build one after the other). Then two
# lanes at once on the two cores: pytest's workers, and the rest of lint followed by the Rust
# tests (their build shares the extension's crates; at nice 5, so pytest's timed tests keep
# the cores they had when the lanes ran one after the other). A failure in either lane fails
# `make test` once the other has finished (the lane ends with the C tests: LANE_TEST_TARGETS).
# Then the root tests alone, then the guest kernel's test (TEST_TARGETS).
TEST_MAKE := $(MAKE) --no-print-directory CORE_PROFILE=nolto

test:
	+$(TEST_MAKE) -j2 lint-cargo setup tools
	+$(TEST_MAKE) -j2 test-python-workers test-lint-rust
	+$(TEST_MAKE) test-python-root $(TEST_TARGETS)

# The lane's targets one after the other: -j1 and out of the jobserver (its flags dropped from
# MAKEFLAGS, -n and the variables kept), so cargo may use both cores whenever pytest leaves
# one idle. Its output goes to a file of its own (a `make -n test` run meanwhile, as the
# README's test does, writes another), printed when the lane ends, so that pytest's progress
# shows as it goes.
LANE_MAKEFLAGS = $(filter-out --jobserver-auth=% -j%,$(MAKEFLAGS))

test-lint-rust: setup
	@echo "lint, the Rust and the C tests run beside pytest; their output follows when they end"
	+@log=$$(mktemp); rc=0; MAKEFLAGS='$(LANE_MAKEFLAGS)' nice -n 5 $(MAKE) --no-print-directory \
	  -j1 lint-tree test-rust $(LANE_TEST_TARGETS) >$$log 2>&1 || rc=$$?; cat $$log; rm -f $$log; exit $$rc

bench: setup $(BENCH_TARGETS)
	$(PY) bench/run.py $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf $(VENV) target out build
