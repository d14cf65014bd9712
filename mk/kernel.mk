# Study 5's kernel modules (kernel/: the prio and prio-advanced elevators) and its guest
# (python/qoslab/vm, docs/vm.md).
#   make kernel-modules   build both modules against the pinned guest kernel (W=1, -Werror)
# The guest kernel's packages are fetched once into the cache (~/.cache/qoslab/vm) by
# `qoslab vm fetch`; the block layer's private headers come from its source package at build
# time and are never committed.

KERNEL_SRC   := kernel
KERNEL_BUILD := build/kernel/lint

.PHONY: kernel-modules lint-kernel

kernel-modules: $(VENV)/.core
	$(QOSLAB) vm build $(KERNEL_SRC) --out $(KERNEL_BUILD) --quiet

# Kernel-style warnings are errors (W=1 -Werror), and checkpatch.pl finds no error or warning.
lint-kernel: $(VENV)/.core
	$(QOSLAB) vm build $(KERNEL_SRC) --out $(KERNEL_BUILD) --checkpatch --quiet

LINT_TARGETS += lint-kernel
