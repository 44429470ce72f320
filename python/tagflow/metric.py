"""Evaluation metrics, as ``mx.metric`` (MXNet 1.x)::

    acc = mx.metric.Accuracy()
    for data, label in test_data:
        acc.update(labels=label, preds=net(data))
    print(acc.get())                 # ('accuracy', 0.87)

``update`` takes arrays or lists of them (tagflow or NumPy arrays); each
update reads the values to the host, so it waits for them. Metrics are not
for use from several threads at once.
"""

import math

import numpy as _np

__all__ = [
    "EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "MAE", "MSE", "RMSE",
    "CrossEntropy", "NegativeLogLikelihood", "Perplexity", "PearsonCorrelation", "Loss",
    "CustomMetric", "np", "create", "register", "check_label_shapes",
]

_REGISTRY = {}


def register(klass, *aliases):
    """Registers a metric class under its lower-case name and `aliases`, for
    create(); returns the class (usable as a decorator)."""
    for name in (klass.__name__.lower(),) + aliases:
        _REGISTRY[name] = klass
    return klass


def _alias(*aliases):
    return lambda klass: register(klass, *aliases)


def _host(x):
    """The values of a tagflow array (waiting for them) or anything NumPy reads."""
    return x.asnumpy() if hasattr(x, "asnumpy") else _np.asarray(x)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Checks that `labels` and `preds` hold as many arrays (with `shape`,
    that they have the same shape); with `wrap`, single arrays become lists."""
    if not shape:
        label_count, pred_count = len(labels), len(preds)
    else:
        label_count, pred_count = labels.shape, preds.shape
    if label_count != pred_count:
        raise ValueError(f"Shape of labels {label_count} does not match shape of predictions "
                         f"{pred_count}")
    if wrap:
        labels, preds = _as_list(labels), _as_list(preds)
    return labels, preds


class EvalMetric:
    """The base of every metric: a running sum over the updates since the
    last reset (get) and since the last global reset (get_global)."""

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self):
        """The metric's name and arguments, as create() takes them."""
        config = self._kwargs.copy()
        config.update({"metric": self.__class__.__name__, "name": self.name,
                       "output_names": self.output_names, "label_names": self.label_names})
        return config

    def update_dict(self, label, pred):
        """Updates from dictionaries of named labels and outputs."""
        preds = [pred[name] for name in self.output_names] if self.output_names is not None \
            else list(pred.values())
        labels = [label[name] for name in self.label_names] if self.label_names is not None \
            else list(label.values())
        self.update(labels, preds)

    def update(self, labels, preds):
        raise NotImplementedError(f"{type(self).__name__}.update")

    def _add(self, metric, instances):
        self.sum_metric += metric
        self.global_sum_metric += metric
        self.num_inst += instances
        self.global_num_inst += instances

    def reset(self):
        """Forgets every update."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Forgets the updates since the last reset, not the global sums."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """(name, value); the value is NaN before any update."""
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, self.sum_metric / self.num_inst

    def get_global(self):
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, self.global_sum_metric / self.global_num_inst

    def get_name_value(self):
        name, value = self.get()
        return list(zip(_as_list(name), _as_list(value)))

    def get_global_name_value(self):
        name, value = self.get_global()
        return list(zip(_as_list(name), _as_list(value)))


@_alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; get() gives lists of names and values."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names=output_names, label_names=label_names)

    def add(self, metric):
        self.metrics.append(create(metric))

    def get_metric(self, index):
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError(f"Metric index {index} is out of range 0 and {len(self.metrics)}") \
                from None

    def update_dict(self, labels, preds):
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self):
        for metric in self.metrics:
            metric.reset_local()

    def _gather(self, method):
        names, values = [], []
        for metric in self.metrics:
            name, value = getattr(metric, method)()
            names.extend(_as_list(name))
            values.extend(_as_list(value))
        return names, values

    def get(self):
        return self._gather("get")

    def get_global(self):
        return self._gather("get_global")


@_alias("acc")
class Accuracy(EvalMetric):
    """The fraction of predictions equal to the labels; predictions with one
    more axis than the labels are scores, their argmax along `axis` taken."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred, label = _host(pred), _host(label)
            if pred.shape != label.shape:
                pred = _np.argmax(pred, axis=self.axis)
            pred = pred.astype("int32").ravel()
            label = label.astype("int32").ravel()
            check_label_shapes(label, pred, shape=True)
            self._add(float((pred == label).sum()), len(pred))


@_alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """The fraction of labels among the `top_k` highest scores."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super().__init__(name, top_k=top_k, output_names=output_names, label_names=label_names)
        self.top_k = top_k
        if self.top_k <= 1:
            raise ValueError("Please use Accuracy if top_k is no more than 1")
        self.name += f"_{self.top_k}"

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred, label = _host(pred).astype("float32"), _host(label).astype("int32")
            if pred.ndim > 2:
                raise ValueError(f"Predictions should be no more than 2 dims, got {pred.ndim}")
            order = _np.argpartition(pred, -self.top_k)
            check_label_shapes(label, pred)
            samples = pred.shape[0]
            if pred.ndim == 1:
                correct = float((order.ravel() == label.ravel()).sum())
            else:
                classes = pred.shape[1]
                top_k = min(classes, self.top_k)
                correct = 0.0
                for j in range(top_k):
                    correct += float((order[:, classes - 1 - j].ravel() == label.ravel()).sum())
            self._add(correct, samples)


@_alias("f1")
class F1(EvalMetric):
    """F1 score of a binary classification: 'macro' averages the score of each
    update, 'micro' scores every sample seen together."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        if average not in ("macro", "micro"):
            raise ValueError(f"F1: average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        self._counts = _np.zeros(4)  # true positives, false positives, false negatives, true negatives
        super().__init__(name, output_names=output_names, label_names=label_names)

    def _fscore(self):
        tp, fp, fn, _ = self._counts
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred, label = _host(pred), _host(label).astype("int32").ravel()
            predicted = _np.argmax(pred, axis=1) if pred.ndim > 1 else (pred > 0.5).astype("int32")
            check_label_shapes(label, predicted, shape=True)
            if len(_np.unique(label)) > 2:
                raise ValueError(f"{type(self).__name__} currently only supports binary "
                                 "classification.")
            positive, truth = predicted == 1, label == 1
            self._counts += [(positive & truth).sum(), (positive & ~truth).sum(),
                             (~positive & truth).sum(), (~positive & ~truth).sum()]
        if self.average == "macro":
            self._add(self._fscore(), 1)
            self._counts[:] = 0
        else:
            samples = self._counts.sum()
            self.sum_metric = self._fscore() * samples
            self.global_sum_metric = self.sum_metric
            self.num_inst = self.global_num_inst = int(samples)

    def reset(self):
        super().reset()
        self._counts = _np.zeros(4)


def _regression_pairs(labels, preds):
    labels, preds = check_label_shapes(labels, preds, True)
    for label, pred in zip(labels, preds):
        label, pred = _host(label), _host(pred)
        if label.ndim == 1:
            label = label.reshape(label.shape[0], 1)
        if pred.ndim == 1:
            pred = pred.reshape(pred.shape[0], 1)
        yield label, pred


@_alias("mae")
class MAE(EvalMetric):
    """Mean absolute error, averaged over the updates."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    def update(self, labels, preds):
        for label, pred in _regression_pairs(labels, preds):
            self._add(float(_np.abs(label - pred).mean()), 1)


@_alias("mse")
class MSE(EvalMetric):
    """Mean squared error, averaged over the updates."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    def update(self, labels, preds):
        for label, pred in _regression_pairs(labels, preds):
            self._add(float(((label - pred) ** 2.0).mean()), 1)


@_alias("rmse")
class RMSE(EvalMetric):
    """Root mean squared error of each update, averaged over the updates."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    def update(self, labels, preds):
        for label, pred in _regression_pairs(labels, preds):
            self._add(float(_np.sqrt(((label - pred) ** 2.0).mean())), 1)


@_alias("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean of -log(probability of the label) over the samples; `eps` keeps a
    zero probability finite."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label).ravel(), _host(pred)
            if label.shape[0] != pred.shape[0]:
                raise ValueError(f"{self.name}: {label.shape[0]} labels for {pred.shape[0]} "
                                 "predictions")
            prob = pred[_np.arange(label.shape[0]), _np.int64(label)]
            self._add(float((-_np.log(prob + self.eps)).sum()), label.shape[0])


@_alias("nll_loss")
class NegativeLogLikelihood(CrossEntropy):
    """CrossEntropy under the name 'nll-loss'."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(eps=eps, name=name, output_names=output_names, label_names=label_names)


@_alias("perplexity")
class Perplexity(EvalMetric):
    """exp of the mean negative log-probability of the labels along `axis`,
    samples whose label is `ignore_label` left out."""

    def __init__(self, ignore_label, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        super().__init__(name, ignore_label=ignore_label, output_names=output_names,
                         label_names=label_names)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        if len(_as_list(labels)) != len(_as_list(preds)):
            raise ValueError(f"{self.name}: {len(_as_list(labels))} labels for "
                             f"{len(_as_list(preds))} predictions")
        loss, count = 0.0, 0
        for label, pred in zip(_as_list(labels), _as_list(preds)):
            label, pred = _host(label), _host(pred).astype("float64")
            label = label.reshape(label.size).astype("int64")
            picked = _np.take_along_axis(_np.moveaxis(pred, self.axis, -1).reshape(-1, pred.shape[
                self.axis]), label[:, None], axis=1).ravel()
            if self.ignore_label is not None:
                ignore = label == self.ignore_label
                count -= int(ignore.sum())
                picked = _np.where(ignore, 1.0, picked)
            loss -= float(_np.log(_np.maximum(1e-10, picked)).sum())
            count += picked.size
        self._add(loss, count)

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.sum_metric / self.num_inst)

    def get_global(self):
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.global_sum_metric / self.global_num_inst)


@_alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson's correlation of predictions and labels, averaged over the
    updates ('macro')."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        if average != "macro":
            raise ValueError("PearsonCorrelation: only average='macro' is available here, got "
                             f"{average!r}")
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label), _host(pred)
            check_label_shapes(label, pred, False, True)
            self._add(float(_np.corrcoef(pred.ravel(), label.ravel())[0, 1]), 1)


@_alias("loss")
class Loss(EvalMetric):
    """The mean of loss values (the predictions; the labels are not read)."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    def update(self, _, preds):
        for pred in _as_list(preds):
            values = _host(pred)
            self._add(float(values.sum()), values.size)


@_alias("custom")
class CustomMetric(EvalMetric):
    """A metric computed by ``feval(label, pred)`` on NumPy arrays: a value, or
    a (sum, count) pair."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if name.find("<") != -1:
                name = f"custom({name})"
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(_as_list(preds), _as_list(labels)):
            value = self._feval(_host(label), _host(pred))
            if isinstance(value, tuple):
                self._add(value[0], value[1])
            else:
                self._add(value, 1)


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """A CustomMetric from a function of NumPy arrays."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)


def create(metric, *args, **kwargs):
    """A metric from a name ('acc', 'ce', 'top_k_accuracy', ...), a function of
    (label, pred), a metric (returned as it is) or a list of any of these (a
    CompositeEvalMetric)."""
    if callable(metric) and not isinstance(metric, EvalMetric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, str):
        klass = _REGISTRY.get(metric.lower())
        if klass is None:
            raise ValueError(f"Metric must be one of {sorted(_REGISTRY)}, got {metric!r}")
        return klass(*args, **kwargs)
    raise TypeError(f"metric must be a name, a function, an EvalMetric or a list of them, got "
                    f"{type(metric).__name__}")
