"""gluon.Trainer: the C++ trainer, made from an optimizer's name and
parameters or from an ``mx.optimizer`` object, with MXNet's learning-rate
schedules (``lr_scheduler``) applied at each step."""

from .._core.gluon import Trainer as _CoreTrainer
from .. import optimizer as _optimizer


class Trainer(_CoreTrainer):
    """Applies an optimizer ('sgd', 'nag', 'adam', or an ``mx.optimizer``
    object) to a network's parameters, summing the gradients of the copies on
    several devices first::

        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.1, "momentum": 0.9,
                                 "lr_scheduler": mx.lr_scheduler.FactorScheduler(500, 0.5)})

    With a schedule, update n (1 at the first step) runs at schedule(n), as
    MXNet's optimizers count. Not for use from several threads at once."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device",
                 compression_params=None, update_on_kvstore=None):
        if isinstance(optimizer, _optimizer.Optimizer):
            if optimizer_params:
                raise ValueError("optimizer_params must be None if optimizer is an instance of "
                                 "Optimizer instead of str")
            self._optimizer = optimizer
        else:
            self._optimizer = _optimizer.create(optimizer, **dict(optimizer_params or {}))
        name, settings = self._optimizer._trainer_settings()
        _CoreTrainer.__init__(self, params, name, settings, kvstore, compression_params,
                              update_on_kvstore)
        self._schedule = self._optimizer.lr_scheduler

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def learning_rate(self):
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)
        _CoreTrainer.set_learning_rate(self, lr)

    def _next_update(self):
        self._optimizer.num_update += 1
        if self._schedule is not None:
            _CoreTrainer.set_learning_rate(self, self._schedule(self._optimizer.num_update))

    def step(self, batch_size, ignore_stale_grad=False):
        """Sums the gradients over the devices, then updates every parameter
        (rescaled by 1/batch_size)."""
        self._next_update()
        _CoreTrainer.step(self, batch_size, ignore_stale_grad)

    def update(self, batch_size, ignore_stale_grad=False):
        """Updates every parameter from gradients already summed
        (allreduce_grads)."""
        del ignore_stale_grad
        self._next_update()
        _CoreTrainer.update(self, batch_size)
