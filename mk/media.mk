# The SSD and HDD device models (crates/media/src/ssd, crates/media/src/hdd).

.PHONY: media-test media-bench media-figures

# The device models' own tests only (their Rust unit tests and tests/test_media.py).
media-test: setup
	$(CARGO) test $(CARGO_TEST_PROFILE) -p qoslab-media
	$(VENV)/bin/pytest -q tests/test_media.py

media-bench: setup
	$(PY) -c "import sys; sys.path.insert(0, 'bench'); import bench_media; print('\n'.join(bench_media.run()))"

# Regenerates the figures and measured tables of docs/media.md.
media-figures: setup
	$(PY) docs/media_figures.py
