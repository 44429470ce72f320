"""Data sets and batches, as ``mx.gluon.data``."""

from .dataloader import DataLoader, default_batchify_fn  # noqa: F401
from .dataset import ArrayDataset, Dataset, SimpleDataset  # noqa: F401
from . import vision  # noqa: F401
