"""Batches of a data set, as ``mx.gluon.data.DataLoader``::

    train_data = gluon.data.DataLoader(
        gluon.data.vision.FashionMNIST(train=True).transform_first(transformer),
        batch_size=256, shuffle=True, num_workers=4)
    for data, label in train_data:
        ...

Note [Two data pipelines]
Fashion-MNIST transformed (``transform_first``) by ``ToTensor`` and
``Normalize`` (alone or in a ``Compose``), batched the default way, runs in
C++ alone: the C++ DataLoader's threads read, transform and batch, and
Python only receives each batch, so the tutorials' training loop is not held
up by the interpreter. Any other data set, transform or batchify function
runs in Python: with ``num_workers`` threads building the next batches ahead,
in order (every tagflow call they make releases the GIL while C++ works, as
NumPy's do). Threads rather than processes: the engine's threads exist in
this process, and a forked child could not use them. Both shuffle in an order
drawn from ``tagflow.random.seed``'s value and the epoch's number, so a run
is repeatable, and the C++ pipeline's order is ``tagflow train --seed``'s.
"""

import concurrent.futures

import numpy as _numpy

from ... import _core
from ... import numpy_extension as _npx
from ... import random as _random
from ...ndarray import NDArray
from .dataset import _First, _TransformedDataset


def default_batchify_fn(samples):
    """Stacks a list of samples into a batch: tuples element by element,
    arrays along a new first axis, numbers and NumPy values into one array."""
    first = samples[0]
    if isinstance(first, tuple):
        return tuple(default_batchify_fn(list(items)) for items in zip(*samples))
    np_style = _npx.is_np_array()
    if isinstance(first, NDArray):
        batch = _core.nd.stack(samples)
    else:
        values = _numpy.asarray(samples)
        if values.dtype == _numpy.float64:
            values = values.astype(_numpy.float32)
        elif values.dtype == _numpy.bool_:
            values = values.astype(_numpy.uint8)
        batch = _core.nd.array(values)
    return batch.as_np_ndarray() if np_style else batch


def _native_plan(dataset):
    """(FashionMNIST set, transform steps) when the C++ pipeline can run
    `dataset` (Note [Two data pipelines]), else None."""
    from .vision.datasets import FashionMNIST

    if isinstance(dataset, FashionMNIST) and dataset._transform is None:
        return dataset, []
    if (isinstance(dataset, _TransformedDataset) and isinstance(dataset.fn, _First) and
            isinstance(dataset.base, FashionMNIST) and dataset.base._transform is None):
        native_steps = getattr(dataset.fn.fn, "native_steps", None)
        steps = native_steps() if native_steps else None
        if steps is not None:
            return dataset.base, steps
    return None


class DataLoader:
    """Batches of ``batch_size`` samples; a new order each epoch with
    ``shuffle``; ``last_batch`` 'keep' (default), 'discard' or 'rollover';
    ``num_workers`` threads building batches ahead; ``pin_memory`` puts the
    C++ pipeline's batches in pinned host memory (cpu_pinned(0)), whose
    copies to GPUs start at once (the Python pipeline's stay in cpu(0))."""

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, thread_pool=False, timeout=120):
        del pin_device_id, thread_pool, timeout
        if batch_sampler is not None or sampler is not None:
            raise ValueError("DataLoader: samplers are not offered; use batch_size and shuffle")
        if batch_size is None or int(batch_size) < 1:
            raise ValueError("DataLoader: expected a batch_size of at least 1, got %r" % (batch_size,))
        last_batch = last_batch or "keep"
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError("DataLoader: last_batch must be 'keep', 'discard' or 'rollover', got %r"
                             % (last_batch,))
        if int(num_workers) < 0:
            raise ValueError("DataLoader: num_workers must be 0 or more, got %r" % (num_workers,))
        self._dataset = dataset
        self._batch_size = int(batch_size)
        self._shuffle = bool(shuffle)
        self._last_batch = last_batch
        self._batchify = batchify_fn or default_batchify_fn
        self._num_workers = int(num_workers)
        self._prefetch = int(prefetch) if prefetch is not None else 2 * self._num_workers
        self._seed = _random.last_seed()
        self._epoch = 0
        self._carried = []
        self._native = None
        plan = _native_plan(dataset) if batchify_fn is None else None
        if plan is not None:
            base, steps = plan
            self._native = _core.gluon.data.NativeLoader(
                base.root, base.train, steps, self._batch_size, self._shuffle, self._seed,
                last_batch, self._num_workers, bool(pin_memory), _npx.is_np_array())

    @property
    def runs_natively(self):
        """True when the C++ pipeline makes the batches (Note [Two data pipelines])."""
        return self._native is not None

    def __len__(self):
        if self._native is not None:
            return len(self._native)
        n = len(self._dataset) + (len(self._carried) if self._last_batch == "rollover" else 0)
        if self._last_batch == "keep":
            return (n + self._batch_size - 1) // self._batch_size
        return n // self._batch_size

    def __iter__(self):
        if self._native is not None:
            self._native.start_epoch()
            while True:
                try:
                    batch = self._native.next()
                except StopIteration:
                    return
                yield batch
            return
        yield from self._python_batches()

    def _epoch_order(self):
        n = len(self._dataset)
        if not self._shuffle:
            order = list(range(n))
        else:
            rng = _numpy.random.default_rng([self._seed, self._epoch])
            order = rng.permutation(n).tolist()
        self._epoch += 1
        order = self._carried + order
        self._carried = []
        full = len(order) // self._batch_size * self._batch_size
        batches = [order[i:i + self._batch_size] for i in range(0, full, self._batch_size)]
        rest = order[full:]
        if rest:
            if self._last_batch == "keep":
                batches.append(rest)
            elif self._last_batch == "rollover":
                self._carried = rest
        return batches

    def _make_batch(self, indices):
        return self._batchify([self._dataset[i] for i in indices])

    def _python_batches(self):
        batches = self._epoch_order()
        if self._num_workers == 0:
            for indices in batches:
                yield self._make_batch(indices)
            return
        with concurrent.futures.ThreadPoolExecutor(self._num_workers,
                                                   thread_name_prefix="tagflow-data") as pool:
            ahead = max(self._prefetch, 1)
            pending = [pool.submit(self._make_batch, b) for b in batches[:ahead]]
            next_batch = len(pending)
            try:
                while pending:
                    batch = pending.pop(0).result()
                    if next_batch < len(batches):
                        pending.append(pool.submit(self._make_batch, batches[next_batch]))
                        next_batch += 1
                    yield batch
            finally:
                for future in pending:
                    future.cancel()
