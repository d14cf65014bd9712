"""The lab's name for `qoslab.units` (sizes and durations as the command line takes them), kept
for the modules that still import it from here; new code imports `qoslab.units`."""

from qoslab.units import fio_ms, human_bytes, parse_duration, parse_size

__all__ = ["fio_ms", "human_bytes", "parse_duration", "parse_size"]
