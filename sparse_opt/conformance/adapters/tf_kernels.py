"""TensorFlow behind the candidate protocol (tensorflow is imported when an adapter is built).

- ``tf.raw_ops.ResourceSparseApplyMomentum`` and ``...AdagradV2``: the raw CPU
  kernels, called with the lookups as they come (ids in lookup order, repeats
  included, int64), hyper-parameters as scalars of the table's dtype.
- Keras 3 ``Adam`` (``tf.keras`` in TF 2.21) and ``tf.compat.v1.train.AdamOptimizer``,
  eager, fed ``tf.IndexedSlices`` with one slice per lookup.

All take complete rows only (``IndexedSlices`` and the kernels index rows), so
the incomplete-rows scenarios are skipped. Options a TF optimizer lacks
(``maximize`` everywhere, ``weight_decay`` outside Keras, ``lr_decay``) make the
adapter raise ``NotImplementedError``: the scenario is skipped. The AdagradV2
kernel races when a row repeats many times in one call (its lookups are
sharded across threads without locking rows); the scenarios repeat a row at
most twice.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from sparse_opt.conformance.hyper import Hyper
from sparse_opt.interop import require


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return require("tensorflow", "tensorflow-cpu", "The TensorFlow adapters")


def _refuse(hyper: Hyper, what: str, *names: str) -> None:
    for name in names:
        if getattr(hyper, name):
            raise NotImplementedError(f"{what} has no {name}")


class _TfCandidate:
    """A TF variable holding the table; subclasses apply one step in :meth:`step`."""

    family: ClassVar[str]
    name: ClassVar[str]

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        self._tf = _tf()
        self._dtype = table.dtype
        self._var = self._variable(np.array(table))

    def _variable(self, value: np.ndarray) -> Any:
        return self._tf.Variable(value)

    def _slices(self, row_ids: np.ndarray, row_grads: np.ndarray) -> Any:
        tf = self._tf
        shape = tf.constant(self._var.shape, dtype=tf.int64)
        return tf.IndexedSlices(tf.constant(row_grads), tf.constant(row_ids, dtype=tf.int64), dense_shape=shape)

    def _scalar(self, x: float) -> Any:
        return self._tf.constant(x, dtype=self._dtype)

    def table(self) -> np.ndarray:
        return np.array(self._var.numpy())


class TfSparseApplyMomentum(_TfCandidate):
    """``tf.raw_ops.ResourceSparseApplyMomentum`` (no Nesterov)."""

    family, claims, name = "sgd", "tf_momentum", "tf.raw_ops.ResourceSparseApplyMomentum"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        _refuse(hyper, self.name, "weight_decay", "maximize")
        super().__init__(table, hyper)
        self._accum = self._tf.Variable(np.zeros_like(table))
        self._lr, self._momentum = self._scalar(hyper.lr), self._scalar(hyper.momentum)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        tf = self._tf
        tf.raw_ops.ResourceSparseApplyMomentum(
            var=self._var.handle, accum=self._accum.handle, lr=self._lr, grad=tf.constant(row_grads),
            indices=tf.constant(row_ids, dtype=tf.int64), momentum=self._momentum, use_locking=False,
            use_nesterov=False,
        )


class TfSparseApplyAdagradV2(_TfCandidate):
    """``tf.raw_ops.ResourceSparseApplyAdagradV2`` (``update_slots=True``)."""

    family, claims, name = "adagrad", "tf_adagrad", "tf.raw_ops.ResourceSparseApplyAdagradV2"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        _refuse(hyper, self.name, "lr_decay", "maximize", "weight_decay")
        super().__init__(table, hyper)
        self._accum = self._tf.Variable(np.full_like(table, hyper.initial_accumulator_value))
        self._lr, self._eps = self._scalar(hyper.lr), self._scalar(hyper.eps)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        tf = self._tf
        tf.raw_ops.ResourceSparseApplyAdagradV2(
            var=self._var.handle, accum=self._accum.handle, lr=self._lr, epsilon=self._eps,
            grad=tf.constant(row_grads), indices=tf.constant(row_ids, dtype=tf.int64), use_locking=False,
            update_slots=True,
        )


class KerasAdam(_TfCandidate):
    """Keras 3 ``keras.optimizers.Adam`` on a ``keras.Variable``, fed ``tf.IndexedSlices``."""

    family, claims, name = "adam", "keras3_adam", "keras.optimizers.Adam (Keras 3, IndexedSlices)"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        _refuse(hyper, self.name, "maximize")
        _tf()
        self._keras = require("keras", "keras", "The Keras adapter")
        super().__init__(table, hyper)
        self._opt = self._keras.optimizers.Adam(
            learning_rate=hyper.lr, beta_1=hyper.beta1, beta_2=hyper.beta2, epsilon=hyper.eps,
            weight_decay=hyper.weight_decay or None,
        )

    def _variable(self, value: np.ndarray) -> Any:
        return self._keras.Variable(value)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self._opt.apply_gradients([(self._slices(row_ids, row_grads), self._var)])


class Tf1Adam(_TfCandidate):
    """``tf.compat.v1.train.AdamOptimizer`` (eager) fed ``tf.IndexedSlices``."""

    family, claims, name = "adam", "tf1_adam", "tf.compat.v1.train.AdamOptimizer (IndexedSlices)"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        _refuse(hyper, self.name, "weight_decay", "maximize")
        super().__init__(table, hyper)
        self._opt = self._tf.compat.v1.train.AdamOptimizer(
            learning_rate=hyper.lr, beta1=hyper.beta1, beta2=hyper.beta2, epsilon=hyper.eps
        )

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self._opt.apply_gradients([(self._slices(row_ids, row_grads), self._var)])


#: Every TensorFlow adapter.
CANDIDATES: tuple[type, ...] = (TfSparseApplyMomentum, TfSparseApplyAdagradV2, KerasAdam, Tf1Adam)
