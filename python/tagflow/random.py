"""The global random generator, as ``mx.random``: ``seed`` fixes the
initial parameters, the draws of ``nd.random`` / ``np.random`` without a
seed of their own, and the order a shuffling DataLoader made afterwards
takes (so that a Python script and ``tagflow train --seed S`` agree)."""

from ._core.nd.random import normal, uniform  # noqa: F401
from ._core.nd.random import seed as _seed

_last_seed = 0


def seed(seed_state, ctx="all"):
    """Seeds every generator tagflow draws from."""
    global _last_seed
    del ctx
    _last_seed = int(seed_state)
    _seed(_last_seed)


def last_seed():
    """The value of the last seed() (0 before any)."""
    return _last_seed
