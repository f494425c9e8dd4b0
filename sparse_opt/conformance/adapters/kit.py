"""sparse_opt's own optimizers behind the candidate protocol.

Each adapter drives a table optimizer with :class:`~sparse_opt.CsrGradient`
gradients built from the lookups (``from_rows`` sums repeated ids; incomplete
rows go through ``CooGradient.from_unsorted``), and claims the reference its
documentation promises. A DENSE_EQUIVALENT optimizer catches every row up
before the table is read; its ``...OnRead`` twin is run as a training loop
(``read(rows)``, see :mod:`..candidate`): it catches up only the rows each step
looks up, before the step, and the whole table at the end. Every adapter takes
learning-rate schedules (``schedules = True``): the scenario's ``hyper.rate`` is
the optimizer's schedule ``t -> lr_t``, a float when the rate is constant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from sparse_opt import (
    CooGradient,
    CsrGradient,
    DenseAdam,
    LazyMode,
    SparseAdagradConfig,
    SparseAdagradTable,
    SparseAdamConfig,
    SparseAdamTable,
    SparseSgdConfig,
    SparseSgdTable,
)
from sparse_opt.conformance.hyper import Hyper


class _KitTable:
    """A sparse_opt table optimizer as a candidate; subclasses build it in :meth:`_build`."""

    family: ClassVar[str]
    claims: ClassVar[str]
    name: ClassVar[str]
    #: DENSE_EQUIVALENT: catch every row up before the table is read.
    catches_up: ClassVar[bool] = False
    schedules: ClassVar[bool] = True

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        self._params = np.array(table)
        self._opt = self._build(self._params, hyper)

    def _build(self, params: np.ndarray, hyper: Hyper) -> Any:
        raise NotImplementedError

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self._opt.step(CsrGradient.from_rows(row_ids, row_grads, self._params.shape[0]))

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        shape = self._params.shape
        coo = CooGradient.from_unsorted(rows * shape[1] + cols, values, shape[0] * shape[1])
        self._opt.step(CsrGradient.from_coo(coo, shape))

    def table(self) -> np.ndarray:
        if self.catches_up:
            self._opt.catch_up()
        return self._params.copy()


class _CatchUpOnRead(_KitTable):
    """A DENSE_EQUIVALENT adapter whose ``read(rows)`` catches up only ``rows`` (``catch_up(rows)``)."""

    def read(self, rows: np.ndarray) -> np.ndarray:
        self._opt.catch_up(rows)
        return self._params[rows].copy()


def _lr(hyper: Hyper) -> float | Callable[[int], float]:
    """The optimizer's ``lr``: the scenario's schedule ``t -> lr_t``, or its constant rate."""
    return hyper.rate if hyper.schedule else hyper.lr


def _adam_config(hyper: Hyper, mode: LazyMode) -> SparseAdamConfig:
    return SparseAdamConfig(
        lr=_lr(hyper), beta1=hyper.beta1, beta2=hyper.beta2, eps=hyper.eps,
        mode=mode, maximize=hyper.maximize, weight_decay=hyper.weight_decay,
    )


class KitAdamLazy(_KitTable):
    """``SparseAdamTable`` in ``LazyMode.LAZY``."""

    family, claims, name = "adam", "lazy", "sparse_opt SparseAdamTable(LAZY)"

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseAdamTable:
        return SparseAdamTable(params, _adam_config(hyper, LazyMode.LAZY))


class KitAdamDormancyDecay(_KitTable):
    """``SparseAdamTable`` in ``LazyMode.DORMANCY_DECAY``."""

    family, claims, name = "adam", "dormancy_decay", "sparse_opt SparseAdamTable(DORMANCY_DECAY)"

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseAdamTable:
        return SparseAdamTable(params, _adam_config(hyper, LazyMode.DORMANCY_DECAY))


class KitAdamDenseEquivalent(_KitTable):
    """``SparseAdamTable`` in ``LazyMode.DENSE_EQUIVALENT`` (caught up before every read)."""

    family, claims, name = "adam", "dense_adamw", "sparse_opt SparseAdamTable(DENSE_EQUIVALENT)"
    catches_up = True

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseAdamTable:
        return SparseAdamTable(params, _adam_config(hyper, LazyMode.DENSE_EQUIVALENT))


class KitAdamDenseEquivalentOnRead(_CatchUpOnRead, KitAdamDenseEquivalent):
    """``SparseAdamTable`` in ``LazyMode.DENSE_EQUIVALENT`` in a training loop: rows caught up when read."""

    name = "sparse_opt SparseAdamTable(DENSE_EQUIVALENT), caught up on read"


class KitDenseAdam(_KitTable):
    """``DenseAdam`` fed the dense gradient (zero on rows not looked up). No ``maximize``."""

    family, claims, name = "adam", "dense_adamw", "sparse_opt DenseAdam"

    def _build(self, params: np.ndarray, hyper: Hyper) -> DenseAdam:
        if hyper.maximize:
            raise NotImplementedError("DenseAdam has no maximize")
        return DenseAdam(params, lr=_lr(hyper), beta1=hyper.beta1, beta2=hyper.beta2, eps=hyper.eps,
                         weight_decay=hyper.weight_decay)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        self._opt.step(CsrGradient.from_rows(row_ids, row_grads, self._params.shape[0]).to_dense())

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        grad = np.zeros_like(self._params)
        np.add.at(grad, (rows, cols), values)
        self._opt.step(grad)


def _adagrad_config(hyper: Hyper, rowwise: bool) -> SparseAdagradConfig:
    if hyper.weight_decay:
        raise NotImplementedError("SparseAdagradTable has no weight_decay")
    return SparseAdagradConfig(
        lr=_lr(hyper), lr_decay=hyper.lr_decay, eps=hyper.eps,
        initial_accumulator_value=hyper.initial_accumulator_value, maximize=hyper.maximize, rowwise=rowwise,
    )


class KitAdagrad(_KitTable):
    """``SparseAdagradTable``, element-wise."""

    family, claims, name = "adagrad", "adagrad", "sparse_opt SparseAdagradTable"

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseAdagradTable:
        return SparseAdagradTable(params, _adagrad_config(hyper, rowwise=False))


class KitAdagradRowwise(_KitTable):
    """``SparseAdagradTable(rowwise=True)``."""

    family, claims, name = "adagrad", "rowwise_adagrad", "sparse_opt SparseAdagradTable(rowwise)"

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseAdagradTable:
        return SparseAdagradTable(params, _adagrad_config(hyper, rowwise=True))


def _sgd_config(hyper: Hyper, mode: LazyMode) -> SparseSgdConfig:
    return SparseSgdConfig(lr=_lr(hyper), weight_decay=hyper.weight_decay, momentum=hyper.momentum,
                           maximize=hyper.maximize, mode=mode)


class KitSgdLazy(_KitTable):
    """``SparseSgdTable`` in ``LazyMode.LAZY``."""

    family, claims, name = "sgd", "sgd_lazy", "sparse_opt SparseSgdTable(LAZY)"

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseSgdTable:
        return SparseSgdTable(params, _sgd_config(hyper, LazyMode.LAZY))


class KitSgdDenseEquivalent(_KitTable):
    """``SparseSgdTable`` in ``LazyMode.DENSE_EQUIVALENT`` (caught up before every read)."""

    family, claims, name = "sgd", "sgd_dense", "sparse_opt SparseSgdTable(DENSE_EQUIVALENT)"
    catches_up = True

    def _build(self, params: np.ndarray, hyper: Hyper) -> SparseSgdTable:
        return SparseSgdTable(params, _sgd_config(hyper, LazyMode.DENSE_EQUIVALENT))


class KitSgdDenseEquivalentOnRead(_CatchUpOnRead, KitSgdDenseEquivalent):
    """``SparseSgdTable`` in ``LazyMode.DENSE_EQUIVALENT`` in a training loop: rows caught up when read."""

    name = "sparse_opt SparseSgdTable(DENSE_EQUIVALENT), caught up on read"


#: Every kit adapter.
CANDIDATES: tuple[type, ...] = (
    KitAdamLazy,
    KitAdamDormancyDecay,
    KitAdamDenseEquivalent,
    KitAdamDenseEquivalentOnRead,
    KitDenseAdam,
    KitAdagrad,
    KitAdagradRowwise,
    KitSgdLazy,
    KitSgdDenseEquivalent,
    KitSgdDenseEquivalentOnRead,
)
