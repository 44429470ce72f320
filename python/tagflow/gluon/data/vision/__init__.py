"""Image data sets and transforms, as ``mx.gluon.data.vision``."""

from . import datasets, transforms  # noqa: F401
from .datasets import FashionMNIST  # noqa: F401
