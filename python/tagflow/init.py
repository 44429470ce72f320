"""Initializers for ``initialize(init=...)``, as ``mx.init``."""

from ._core.gluon.init import Constant, Normal, One, Uniform, Xavier, Zero  # noqa: F401
