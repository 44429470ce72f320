"""Splitting a batch over devices, as ``mx.gluon.utils``."""

from .._core.gluon.utils import split_and_load, split_data  # noqa: F401
