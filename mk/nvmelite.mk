# NVMe-lite (study 1): `make demo` runs the paper's matrix and prints the report's path.
NVMELITE_CONFIG ?= configs/nvmelite/main.yaml
NVMELITE_OUT    ?= out/nvmelite

.PHONY: nvmelite-demo

# Depends only on the extension's stamp: a second `make demo` rebuilds nothing.
nvmelite-demo: $(CORE)
	$(QOSLAB) nvmelite matrix $(NVMELITE_CONFIG) --out $(NVMELITE_OUT)

DEMO_TARGETS += nvmelite-demo
