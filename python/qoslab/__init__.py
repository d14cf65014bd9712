"""qoslab: NVMe and Linux block-layer quality of service, simulated and measured."""

from qoslab._core import __version__

__all__ = ["__version__"]
