"""Transforms of images, as ``mx.gluon.data.vision.transforms``: callables
from an array to an array. ``ToTensor`` and ``Normalize`` (alone or in a
``Compose``) are also known to the C++ data pipeline, which applies them
without Python (Note [Two data pipelines] in ../dataloader.py)."""

from .... import ndarray as _nd


class Compose:
    """The transforms one after the other."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for transform in self.transforms:
            x = transform(x)
        return x

    def native_steps(self):
        steps = []
        for transform in self.transforms:
            if not hasattr(transform, "native_steps"):
                return None
            inner = transform.native_steps()
            if inner is None:
                return None
            steps.extend(inner)
        return steps


class ToTensor:
    """An image (H, W, C) of uint8 to (C, H, W) float32 in [0, 1]; a batch
    (N, H, W, C) to (N, C, H, W)."""

    def __call__(self, x):
        axes = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
        return _nd.transpose(x.astype("float32"), axes=axes) / 255.0

    def native_steps(self):
        return [("to_tensor",)]


class Normalize:
    """(x - mean) / std per channel of a (C, H, W) image (numbers, or one per channel)."""

    def __init__(self, mean=0.0, std=1.0):
        self.mean = list(mean) if isinstance(mean, (list, tuple)) else [float(mean)]
        self.std = list(std) if isinstance(std, (list, tuple)) else [float(std)]
        if len(self.mean) != len(self.std):
            raise ValueError("Normalize: %d means but %d standard deviations" %
                             (len(self.mean), len(self.std)))
        if any(s <= 0 for s in self.std):
            raise ValueError("Normalize: standard deviations must be positive, got %s" % self.std)

    def __call__(self, x):
        channels = x.shape[-3]
        if len(self.mean) not in (1, channels):
            raise ValueError("Normalize: %d means for %d channels" % (len(self.mean), channels))
        if len(self.mean) == 1:
            return (x - self.mean[0]) / self.std[0]
        shape = (channels, 1, 1)
        mean = _nd.array(self.mean, ctx=x.context).reshape(shape)
        std = _nd.array(self.std, ctx=x.context).reshape(shape)
        return (x - mean) / std

    def native_steps(self):
        return [("normalize", [float(m) for m in self.mean], [float(s) for s in self.std])]
