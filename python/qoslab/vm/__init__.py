"""Study 5 in a guest kernel: packages, initramfs, QEMU, devices and their simulator twins."""
