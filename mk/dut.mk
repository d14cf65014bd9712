# dut: the independent C implementation of NVMe-lite (dut/nvmelite-c) and its tests.
# `builtin:c` of `qoslab nvmelite diff` is build/dut/nvmelite-c, built by `make setup`.

DUT_SRC     := dut/nvmelite-c
DUT_BUILD   := build/dut
DUT_CC      ?= cc
# -ffp-contract=off: the p95 index is 0.95*(N-1) in plain double arithmetic (no fused ops).
DUT_CFLAGS  := -std=c11 -Wall -Wextra -Werror -pedantic -ffp-contract=off -D_POSIX_C_SOURCE=200809L
DUT_SAN     := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
DUT_LIB     := $(addprefix $(DUT_SRC)/,buf.c params.c sha256.c workload.c model.c metrics.c schedule.c)
DUT_HEADERS := $(wildcard $(DUT_SRC)/*.h)
DUT_BIN     := $(DUT_BUILD)/nvmelite-c

.PHONY: dut-build lint-dut test-dut-c

dut-build: $(DUT_BIN)

$(DUT_BIN): $(DUT_LIB) $(DUT_SRC)/main.c $(DUT_HEADERS)
	@mkdir -p $(@D)
	$(DUT_CC) $(DUT_CFLAGS) -O2 -o $@ $(DUT_LIB) $(DUT_SRC)/main.c

$(DUT_BUILD)/asan/nvmelite-c: $(DUT_LIB) $(DUT_SRC)/main.c $(DUT_HEADERS)
	@mkdir -p $(@D)
	$(DUT_CC) $(DUT_CFLAGS) $(DUT_SAN) -o $@ $(DUT_LIB) $(DUT_SRC)/main.c

$(DUT_BUILD)/asan/test_nvmelite: $(DUT_LIB) $(DUT_SRC)/test_nvmelite.c $(DUT_HEADERS)
	@mkdir -p $(@D)
	$(DUT_CC) $(DUT_CFLAGS) $(DUT_SAN) -o $@ $(DUT_LIB) $(DUT_SRC)/test_nvmelite.c

# Compiler warnings are errors: building both programs is the C lint.
lint-dut: $(DUT_BIN) $(DUT_BUILD)/asan/test_nvmelite

# The C tests, under AddressSanitizer and UBSan: the spec's examples and published numbers
# (test_nvmelite), then the command line against the published expected outputs (check_cli.sh).
test-dut-c: $(DUT_BUILD)/asan/nvmelite-c $(DUT_BUILD)/asan/test_nvmelite
	$(DUT_BUILD)/asan/test_nvmelite configs/nvmelite/seeds
	$(DUT_SRC)/check_cli.sh $(DUT_BUILD)/asan/nvmelite-c tests/data/nvmelite $(DUT_BUILD)/check-cli

SETUP_TARGETS += dut-build
LINT_TARGETS  += lint-dut
# Deterministic, no root: in the lane beside pytest (the Makefile's LANE_TEST_TARGETS), not after
# the root tests, where the machine runs one thing at a time (measured: 7.4 s wall, 4.8 CPU s).
LANE_TEST_TARGETS += test-dut-c
