"""Image data sets, as ``mx.gluon.data.vision.datasets``."""

import os

from .... import _core
from .... import ndarray as _nd
from ..dataset import Dataset


class FashionMNIST(Dataset):
    """Fashion-MNIST: 60,000 training (``train=True``) or 10,000 test images of
    clothing, 28x28x1 uint8, with int32 labels 0..9. Read from the files of
    Debian's ``dataset-fashion-mnist`` (or ``TAGFLOW_FASHION_MNIST_DIR``, or
    ``root`` when it holds them); nothing is downloaded.

    Sample ``i`` is ``(image, label)``: an NDArray (28, 28, 1) of uint8 and a
    NumPy int32, as MXNet's."""

    def __init__(self, root=None, train=True, transform=None):
        root = os.path.expanduser(root) if root else None
        if not root or not os.path.isdir(root):
            root = _core.gluon.data.fashion_mnist_dir()
        self.root = root
        self.train = bool(train)
        self._transform = transform
        images, labels = _core.gluon.data.fashion_mnist_arrays(root, self.train)
        self._images = images.asnumpy()
        self._labels = labels.asnumpy()

    def __getitem__(self, index):
        image, label = _nd.array(self._images[index], dtype="uint8"), self._labels[index]
        if self._transform is not None:
            return self._transform(image, label)
        return image, label

    def __len__(self):
        return len(self._labels)
