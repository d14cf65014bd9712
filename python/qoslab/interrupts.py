"""A command that cleans up on Ctrl-C cleans up the same on SIGTERM (`kill`, a timeout, a
service manager stopping it): inside `terminable()` SIGTERM raises KeyboardInterrupt, so the
same `finally` blocks run (fio and QEMU stopped, loop devices and schedulers put back, scratch
folders removed) and the command ends as Ctrl-C ends it."""

from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def terminable():
    def _raise(_sig, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
