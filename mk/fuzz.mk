# Parser fuzzing at length (tests/fuzzing.py, crates/*/tests/fuzz_*.rs). `make test` runs a
# few derandomized cases of every parser; `make fuzz` runs FUZZ_CASES cases of each of the 18
# command-line targets with fresh random draws (FUZZ_SEED, printed), and the Rust parsers'
# property tests with FUZZ_RUST_CASES cases, then prints the counts. A failure stops its
# target with the shrunk input and its command line; the cases' folders stay in /tmp.
FUZZ_CASES      ?= 300
FUZZ_RUST_CASES ?= 20000
FUZZ_SEED       ?= $(shell date +%s)
FUZZ_REPORT     ?= out/fuzz-report.json

.PHONY: fuzz

fuzz: setup
	@mkdir -p $(dir $(FUZZ_REPORT))
	@echo "fuzz seed: $(FUZZ_SEED)"
	PROPTEST_CASES=$(FUZZ_RUST_CASES) $(CARGO) test $(CARGO_TEST_PROFILE) -p qoslab-workload --test fuzz_inputs
	PROPTEST_CASES=$$(( $(FUZZ_RUST_CASES) / 40 )) $(CARGO) test $(CARGO_TEST_PROFILE) -p qoslab-sim --test fuzz_devices
	QOSLAB_FUZZ_CASES=$(FUZZ_CASES) QOSLAB_FUZZ_SEED=$(FUZZ_SEED) QOSLAB_FUZZ_REPORT=$(FUZZ_REPORT) \
	  $(VENV)/bin/pytest -q -p no:cacheprovider tests/test_fuzz.py
	$(PY) tests/fuzzing.py $(FUZZ_REPORT)
