"""Losses, as ``mx.gluon.loss``: one value per sample."""

from .._core import nd as _nd
from .._core.gluon.loss import L1Loss, L2Loss  # noqa: F401
from .._core.gluon.loss import SoftmaxCrossEntropyLoss as _SoftmaxCrossEntropyLoss


class SoftmaxCrossEntropyLoss:
    """-log softmax(pred)[label] per sample (the mean over the other axes
    than the batch's), as MXNet's; with ``from_logits=True`` `pred` already
    holds log-probabilities, and the loss is -pred[label]. ``sparse_label=
    False`` takes a distribution over the classes as the label. A loss may be
    called from several threads at once."""

    def __new__(cls, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0):
        if not from_logits:
            return _SoftmaxCrossEntropyLoss(axis=axis, sparse_label=sparse_label,
                                            from_logits=False, weight=weight,
                                            batch_axis=batch_axis)
        return super().__new__(cls)

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0):
        if axis != -1:
            raise ValueError(f"SoftmaxCrossEntropyLoss: only axis=-1 (the classes last) is "
                             f"supported, got {axis}")
        if batch_axis != 0:
            raise ValueError(f"SoftmaxCrossEntropyLoss: only batch_axis=0 is supported, got "
                             f"{batch_axis}")
        self._sparse_label = sparse_label
        self._weight = weight
        self._from_logits = from_logits

    def __call__(self, pred, label):
        if self._sparse_label:
            label = _nd.one_hot(label.reshape(pred.shape[:-1]), pred.shape[-1],
                                dtype=pred.dtype)
        loss = -(pred * label).sum(axis=-1)
        if self._weight is not None:
            loss = loss * self._weight
        while loss.ndim > 1:
            loss = loss.mean(axis=loss.ndim - 1)
        return loss

    def __repr__(self):
        return "SoftmaxCrossEntropyLoss(from_logits=True)"


SoftmaxCELoss = SoftmaxCrossEntropyLoss
