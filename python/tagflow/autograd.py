"""Recording operators and computing gradients, as ``mx.autograd``::

    x = nd.array([1, 2, 3])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    x.grad          # [2. 4. 6.]
"""

from ._core.autograd import (  # noqa: F401
    backward, is_recording, is_training, pause, predict_mode, record, train_mode,
)
