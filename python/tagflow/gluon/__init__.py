"""Networks, losses and training, as ``mx.gluon``::

    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(10))
    net.initialize(ctx=[tagflow.gpu(0), tagflow.gpu(1)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

Blocks, parameters, losses and the trainer are the C++ library's; a block
written in Python (a subclass of ``gluon.Block`` with ``forward``) is called
by them like any other.
"""

from .._core.gluon import Parameter, ParameterDict  # noqa: F401
from .trainer import Trainer  # noqa: F401
from .block import Block, HybridBlock  # noqa: F401
from . import data, loss, model_zoo, nn, utils  # noqa: F401
