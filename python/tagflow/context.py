"""Devices: ``cpu(i)``, ``gpu(i)``, ``cpu_pinned(i)``, as ``mx.context``."""

from ._core import Context, cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus"]
