# Study 5's kernel modules (kernel/: the prio and prio-advanced elevators) and its guest
# (python/qoslab/vm, docs/vm.md).
#   make kernel-modules   build both modules against the pinned guest kernel (W=1, -Werror)
# The guest kernel's packages are fetched once into the cache (~/.cache/qoslab/vm) by
# `qoslab vm fetch`; the block layer's private headers come from its source package at build
# time and are never committed.

KERNEL_SRC   := kernel
KERNEL_BUILD := build/kernel/lint

.PHONY: kernel-modules lint-kernel

kernel-modules: $(CORE)
	$(QOSLAB) vm build $(KERNEL_SRC) --out $(KERNEL_BUILD) --quiet

# Kernel-style warnings are errors (W=1 -Werror), and checkpatch.pl finds no error or warning.
lint-kernel: $(CORE)
	$(QOSLAB) vm build $(KERNEL_SRC) --out $(KERNEL_BUILD) --checkpatch --quiet

LINT_TARGETS += lint-kernel

# The guest kernel test (docs/vm.md): one TCG boot of about a minute and a half that loads both
# modules, switches every scheduler under load, checks priority separation and that the low
# class is never starved, unloads them and reads dmesg. Where no guest can run (no QEMU, no
# guest kernel packages) it says why in one line and counts itself skipped.
.PHONY: test-vm

test-vm: $(CORE) tools
	$(QOSLAB) vm check --skip-if-unavailable

TEST_TARGETS += test-vm
