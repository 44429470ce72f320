"""Random draws of the NumPy-style interface, as ``mx.np.random``."""

from .._core.np.random import normal, seed, uniform  # noqa: F401
