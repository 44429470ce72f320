"""Data sets: anything with ``__getitem__`` and ``__len__``, as
``mx.gluon.data.Dataset``, and the transforms applied to their samples."""


class Dataset:
    """The base of data sets: sample ``i`` is ``self[i]``."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def transform(self, fn, lazy=True):
        """The data set of ``fn(*sample)`` (``fn(sample)`` for a sample that is
        not a tuple), computed when a sample is read."""
        del lazy
        return _TransformedDataset(self, fn)

    def transform_first(self, fn, lazy=True):
        """The data set whose samples have their first element transformed by
        ``fn`` (the data, not the label)."""
        del lazy
        return _TransformedDataset(self, _First(fn))


class _First:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, first, *rest):
        return (self.fn(first),) + rest if rest else self.fn(first)


class _TransformedDataset(Dataset):
    def __init__(self, base, fn):
        self.base = base
        self.fn = fn

    def __getitem__(self, index):
        sample = self.base[index]
        return self.fn(*sample) if isinstance(sample, tuple) else self.fn(sample)

    def __len__(self):
        return len(self.base)


class SimpleDataset(Dataset):
    """A data set of the items of a list (or any sequence)."""

    def __init__(self, data):
        self._data = data

    def __getitem__(self, index):
        return self._data[index]

    def __len__(self):
        return len(self._data)


class ArrayDataset(Dataset):
    """Sample ``i`` is ``(a[i], b[i], ...)`` of arrays (or sequences) of one length."""

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("ArrayDataset: expected at least one array")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError("ArrayDataset: the arrays have different lengths: %s" %
                             [len(a) for a in arrays])
        self._arrays = arrays
        self._length = lengths.pop()

    def __getitem__(self, index):
        if len(self._arrays) == 1:
            return self._arrays[0][index]
        return tuple(a[index] for a in self._arrays)

    def __len__(self):
        return self._length
