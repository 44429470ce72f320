"""The library's networks (``nn/models/``), as ``tagflow train --model``
builds them: ``model_zoo.lenet()``, ``mlp()``, ``resnet18()``. Each is a
``gluon.nn.Sequential`` of the library's layers, not yet initialized."""

from .._core.gluon.model_zoo import lenet, mlp, resnet18  # noqa: F401
