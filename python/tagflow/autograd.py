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
from ._core.autograd import _grad


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """The gradients of `heads` (an array or a list) with respect to
    `variables` (arrays that attach_grad() marked before the recording),
    returned instead of written: no array's ``.grad`` changes. A list, even
    for one variable, as MXNet's. The graph is freed unless `retain_graph`.
    ``create_graph=True`` (gradients of gradients) is refused."""
    del train_mode  # the recording chose the mode
    if create_graph:
        raise ValueError("autograd.grad: create_graph=True (gradients of gradients) is not "
                         "available here")
    return _grad(heads, variables, head_grads, retain_graph=bool(retain_graph))
