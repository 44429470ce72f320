"""Losses, as ``mx.gluon.loss``: one value per sample."""

from .._core.gluon.loss import L1Loss, L2Loss, SoftmaxCrossEntropyLoss  # noqa: F401

SoftmaxCELoss = SoftmaxCrossEntropyLoss
