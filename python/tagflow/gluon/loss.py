"""Losses, as ``mx.gluon.loss``: one value per sample. Each takes MXNet's
``sample_weight`` as a third argument: the library's losses (L1Loss, L2Loss,
SoftmaxCrossEntropyLoss) one value per sample, (batch) or (batch, 1, ...);
those written here (from_logits=True, SigmoidBinaryCrossEntropyLoss) any
weight that broadcasts to the loss's elements, as MXNet's."""

from .._core import nd as _nd
from .._core.gluon.loss import L1Loss, L2Loss  # noqa: F401
from .._core.gluon.loss import SoftmaxCrossEntropyLoss as _SoftmaxCrossEntropyLoss


def _per_sample(loss, weight, sample_weight):
    """MXNet's _apply_weighting, then the mean over every axis but the batch's."""
    if sample_weight is not None:
        loss = loss * sample_weight
    if weight is not None:
        loss = loss * weight
    while loss.ndim > 1:
        loss = loss.mean(axis=loss.ndim - 1)
    return loss


class SigmoidBinaryCrossEntropyLoss:
    """The binary cross-entropy of a label in [0, 1] and a prediction, per
    sample (the mean over the other axes than the batch's), as MXNet's: of
    the logit ``pred`` by default, computed as max(pred, 0) - pred label +
    log(1 + exp(-|pred|)) (no overflow), or of a probability with
    ``from_sigmoid=True`` (MXNet's 1e-12 inside each log). ``pos_weight`` is
    refused. A loss may be called from several threads at once."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0):
        if batch_axis != 0:
            raise ValueError(f"SigmoidBinaryCrossEntropyLoss: only batch_axis=0 is supported, "
                             f"got {batch_axis}")
        self._from_sigmoid = from_sigmoid
        self._weight = weight

    def __call__(self, pred, label, sample_weight=None, pos_weight=None):
        if pos_weight is not None:
            raise ValueError("SigmoidBinaryCrossEntropyLoss: pos_weight is not available here")
        label = label.reshape(pred.shape)
        if self._from_sigmoid:
            eps = 1e-12
            loss = -(_nd.log(pred + eps) * label + _nd.log(1 - pred + eps) * (1 - label))
        else:
            loss = _nd.relu(pred) - pred * label + _nd.log(1 + _nd.exp(-_nd.abs(pred)))
        return _per_sample(loss, self._weight, sample_weight)

    def __repr__(self):
        return f"SigmoidBinaryCrossEntropyLoss(from_sigmoid={self._from_sigmoid})"


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


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

    def __call__(self, pred, label, sample_weight=None):
        if self._sparse_label:
            label = _nd.one_hot(label.reshape(pred.shape[:-1]), pred.shape[-1],
                                dtype=pred.dtype)
        loss = -(pred * label).sum(axis=-1, keepdims=True)
        return _per_sample(loss, self._weight, sample_weight)

    def __repr__(self):
        return "SoftmaxCrossEntropyLoss(from_logits=True)"


SoftmaxCELoss = SoftmaxCrossEntropyLoss
