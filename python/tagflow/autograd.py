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


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """The gradients of `heads` with respect to `variables` (arrays that
    attach_grad() marked), returned instead of accumulated: each variable's
    ``.grad`` is left as it was. A list, even for one variable, as MXNet's.
    Unlike MXNet's, the other marked arrays the heads depend on get their
    ``.grad`` written, as by backward()."""
    del train_mode  # the recording chose the mode
    if create_graph:
        raise ValueError("autograd.grad: create_graph=True (gradients of gradients) is not "
                         "available here")
    variables = list(variables) if isinstance(variables, (list, tuple)) else [variables]
    kept = []
    for v in variables:
        if v.grad is None:
            raise ValueError("autograd.grad: every variable needs attach_grad() before the "
                             "recording")
        kept.append(v.grad.copy())
    backward(heads, head_grads, retain_graph=bool(retain_graph))
    grads = [v.grad.copy() for v in variables]
    for v, before in zip(variables, kept):
        before.copyto(v.grad)
    return grads
