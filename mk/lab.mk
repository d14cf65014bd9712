# The real-device fio lab (study 3 and the kernel half of study 5).
#   make lab-demo   a 512 MiB loop device, a qd-sweep and a scheduler run on it, then cleanup
#                   (not part of `make demo`, which touches no block device)
# Needs root (loop devices, sysfs); without root it says so and does nothing.
LAB_OUT  ?= out/lab
LAB_SIZE ?= 512M

.PHONY: lab-demo

lab-demo: $(CORE) tools
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "lab-demo: skipped (loop devices and I/O schedulers need root)"; exit 0; \
	fi; \
	dev=$$($(QOSLAB) lab device create --size $(LAB_SIZE) --quiet); \
	trap '$(QOSLAB) lab device remove "$$dev" >/dev/null' EXIT; \
	$(QOSLAB) lab study qd-sweep --target "$$dev" --runtime 1s --ramp 500ms \
	  --out $(LAB_OUT)/qd-sweep; \
	$(QOSLAB) lab sched --target "$$dev" --schedulers none,mq-deadline,kyber,bfq --reps 2 \
	  --runtime 2s --ramp 500ms --out $(LAB_OUT)/sched
