"""Random draws of the classic interface, as ``mx.nd.random``."""

from .._core.nd import minimum as _minimum
from .._core.nd.random import normal, seed, uniform  # noqa: F401


def randint(low, high, shape=(1,), dtype="int32", ctx=None, out=None):
    """Integers drawn uniformly from [low, high), from tagflow's seeded
    generator (seed())."""
    if out is not None:
        raise ValueError("randint: out= is not available here; assign the result instead")
    if not high > low:
        raise ValueError(f"randint: expected low < high, got low {low} and high {high}")
    if str(dtype) not in ("int32", "int64"):
        raise ValueError(f"randint: expected dtype int32 or int64, got {dtype}")
    span = int(high) - int(low)
    # Non-negative draws truncate to their floor; the clamp keeps a draw that
    # rounded up to `span` inside the range.
    draws = _minimum(uniform(0, span, shape=shape, ctx=ctx), span - 1)
    return draws.astype(dtype) + int(low)
