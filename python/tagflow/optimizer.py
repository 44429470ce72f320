"""Optimizers, as ``mx.optimizer`` (MXNet 1.x), for ``gluon.Trainer``::

    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4,
                           lr_scheduler=mx.lr_scheduler.FactorScheduler(500, 0.5))
    trainer = gluon.Trainer(net.collect_params(), opt)

An optimizer here holds its settings; the C++ trainer applies the update
(to every device's copy, after summing the gradients), so the objects are
what a Trainer is made from, not something to call ``update`` on. An
optimizer belongs to one trainer; it is not for use from several threads at
once.
"""

from .base import MXNetError as _MXNetError

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "create", "register"]

_REGISTRY = {}


def register(klass):
    """Registers an optimizer class under its lower-case name, for create()."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


class Optimizer:
    """What every optimizer takes: the rate (or a schedule of it, MXNet's
    lr_scheduler), weight decay `wd`, `clip_gradient` (each gradient element
    clipped to ±clip_gradient) and `rescale_grad` (set by the trainer)."""

    _name = None  # the C++ trainer's name for the update rule

    def __init__(self, rescale_grad=1.0, param_idx2name=None, wd=0.0, clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        del param_idx2name, sym, param_dict
        if multi_precision:
            raise ValueError(f"{type(self).__name__}: multi_precision is not available here: "
                             "train 16-bit networks with float32 master weights through "
                             "tagflow's mixed precision (`tagflow train --dtype float16`, nn::amp)")
        self.rescale_grad = rescale_grad
        self.lr = learning_rate
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            self.lr = 0.01
        if lr_scheduler is not None and learning_rate is not None \
                and lr_scheduler.base_lr != learning_rate:
            print(UserWarning("learning rate from ``lr_scheduler`` has been overwritten by "
                              "``learning_rate`` in optimizer."))
            lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.clip_gradient = clip_gradient
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update

    @staticmethod
    def create_optimizer(name, **kwargs):
        return create(name, **kwargs)

    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of the "
                              "optimizer only when the LRScheduler of the optimizer is undefined.")
        self.lr = lr

    def _trainer_settings(self):
        """(update rule, the C++ trainer's parameters) for gluon.Trainer."""
        params = {"learning_rate": self.lr if self.lr is not None else self.lr_scheduler.base_lr,
                  "wd": self.wd}
        if self.clip_gradient is not None:
            params["clip_gradient"] = self.clip_gradient
        params.update(self._rule_settings())
        return self._name, params

    def _rule_settings(self):
        return {}

    def update(self, index, weight, grad, state):
        raise NotImplementedError(
            f"{type(self).__name__}.update: the trainer applies the update here; make a "
            "gluon.Trainer with this optimizer")


@register
class SGD(Optimizer):
    """Stochastic gradient descent, with momentum."""

    _name = "sgd"

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        del lazy_update  # dense gradients only: lazy and eager updates are the same
        super().__init__(**kwargs)
        self.momentum = momentum

    def _rule_settings(self):
        return {"momentum": self.momentum}


@register
class NAG(SGD):
    """SGD with Nesterov's momentum."""

    _name = "nag"


@register
class Adam(Optimizer):
    """Adam (Kingma and Ba)."""

    _name = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        del lazy_update
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def _rule_settings(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}


def _parameters(klass):
    """The keyword arguments `klass` and its bases take."""
    names = set()
    for base in klass.__mro__[:-1]:  # not object's
        init = base.__dict__.get("__init__")
        if init is not None:
            code = init.__code__
            names.update(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount])
    names.discard("kwargs")
    return names


def create(name, **kwargs):
    """An optimizer by name ('sgd', 'nag', 'adam'), or the object itself.
    Throws MXNetError for another name, ValueError for a parameter the
    optimizer does not take."""
    if isinstance(name, Optimizer):
        return name
    klass = _REGISTRY.get(str(name).lower())
    if klass is None:
        raise _MXNetError(f"Cannot find optimizer {name!r}: the optimizers here are "
                          f"{', '.join(sorted(_REGISTRY))}")
    known = _parameters(klass)
    for key in kwargs:
        if key not in known:
            raise ValueError(f"optimizer {name!r}: unknown parameter {key!r} (known: "
                             f"{', '.join(sorted(known))})")
    return klass(**kwargs)
