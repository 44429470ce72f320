"""Random draws of the classic interface, as ``mx.nd.random``."""

from .._core.nd.random import normal, seed, uniform  # noqa: F401
