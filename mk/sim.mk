# The timed simulator (crates/engine, nvme, media, sim; python/qoslab/sim).

.PHONY: sim-docs sim-test sim-bench

# Regenerates the tunables reference of docs/sim.md from the tables in the code.
sim-docs: setup
	$(PY) -m qoslab.sim.docs docs/sim.md

# The simulator's own tests only (Rust crates and tests/test_sim.py).
sim-test: setup
	$(CARGO) test $(CARGO_TEST_PROFILE) -p qoslab-engine -p qoslab-nvme -p qoslab-media -p qoslab-sim
	$(VENV)/bin/pytest -q tests/test_sim.py

sim-bench: setup
	$(PY) -c "import sys; sys.path.insert(0, 'bench'); import bench_sim; print('\n'.join(bench_sim.run()))"
