"""The optimizers timed and measured in notebook 07 and ``benchmarks/``, each reduced to "build the gradient, step".

A :class:`Contender` is a named set-up: ``make(table)`` returns a
:class:`Stepper` that updates ``table`` in place. Its unit of work is
:meth:`Stepper.step`: turn one lookup ``(ids, row_grads)`` into the gradient
that library takes, then step. Every contender pays for its own coalescing:
``sparse_opt`` builds a :class:`~sparse_opt.CsrGradient` with
:meth:`~sparse_opt.CsrGradient.from_rows` (summing repeated ids), the dense
optimizers a dense scatter-add. The torch contenders (``torch.optim.SparseAdam``
and ``torch.optim.Adam``) are in ``benchmarks/torch_contenders.py``: nothing here
imports torch.

The ``SparseAdamTable`` contenders run Adam's defaults (lr 1e-3, betas 0.9 /
0.999, eps 1e-8), as ``DenseAdam`` and the torch contenders do. The
``DENSE_EQUIVALENT`` one brings every touched row current (its catch-up of the
dormant steps) inside ``step``, so its timed step includes that catch-up; rows
it did not touch lag until touched (``optimizer.catch_up`` brings them current).

Needs numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from sparse_opt.csr import CsrGradient
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgdConfig, SparseSgdTable

#: Names of the ``sparse_opt`` contenders, in the order :func:`sparse_opt_contenders` lists them.
LAZY_ADAM = "SparseAdamTable LAZY"
DORMANCY_ADAM = "SparseAdamTable DORMANCY_DECAY"
DENSE_EQUIVALENT_ADAM = "SparseAdamTable DENSE_EQUIVALENT"
MOMENTUM_SGD = "SparseSgdTable momentum"
DENSE_ADAM = "DenseAdam"


@dataclass
class Stepper:
    """One optimizer over one table, reduced to what a step needs.

    Attributes
    ----------
    gradient : callable
        ``gradient(ids, row_grads)`` builds the gradient object the optimizer
        takes (coalesced or not, as that library does it).
    apply : callable
        ``apply(gradient)`` takes one optimizer step with it.
    state_arrays : callable
        ``state_arrays()`` lists the per-parameter state (ndarrays or torch tensors).
    optimizer : object
        The optimizer itself (for a closer look, e.g. ``catch_up``).
    """

    gradient: Callable[[np.ndarray, np.ndarray], Any]
    apply: Callable[[Any], None]
    state_arrays: Callable[[], list[Any]]
    optimizer: Any = None

    def step(self, ids: np.ndarray, row_grads: np.ndarray) -> None:
        """Build the gradient of one lookup and step: the unit every contender is timed on."""
        self.apply(self.gradient(ids, row_grads))


@dataclass(frozen=True)
class Contender:
    """A named optimizer set-up: ``make(table)`` returns a :class:`Stepper` updating ``table`` in place.

    Attributes
    ----------
    name : str
    library : str
        ``"sparse_opt"`` or ``"torch"``.
    dense : bool
        Whether a step costs O(table) (dense gradient and update).
    make : callable
    """

    name: str
    library: str
    dense: bool
    make: Callable[[np.ndarray], Stepper]


def map_pages(arrays: Iterable[np.ndarray]) -> None:
    """Write every writable array once, so the OS maps all its pages now.

    ``np.zeros`` returns lazily mapped memory: the first write to each page
    faults. Writing zeros over the zero state changes no value; it moves those
    page faults out of the timed steps, as torch's explicitly zero-filled state
    does, so the timings are those of a long run, where every page has been
    touched. Read-only arrays are views the optimizer derives from smaller
    storage (``SparseAdamTable.last_step``: one int64 per row, broadcast over
    the columns); their pages are mapped by the warm-up steps.
    """
    for a in arrays:
        if a.flags.writeable:
            a.fill(0)


def _sparse_opt_stepper(optimizer: Any, state: Callable[[], list[np.ndarray]]) -> Stepper:
    map_pages(state())
    rows = optimizer.params.shape[0]
    return Stepper(lambda ids, g: CsrGradient.from_rows(ids, g, rows), optimizer.step, state, optimizer)


def _adam(mode: LazyMode, table: np.ndarray) -> Stepper:
    opt = SparseAdamTable(table, SparseAdamConfig(mode=mode))
    return _sparse_opt_stepper(opt, lambda: [opt.m, opt.v, opt.last_step])


def _sgd(table: np.ndarray) -> Stepper:
    opt = SparseSgdTable(table, SparseSgdConfig(lr=0.01, momentum=0.9))
    return _sparse_opt_stepper(opt, lambda: [opt.momentum_buffer])


def _dense_adam(table: np.ndarray) -> Stepper:
    opt = DenseAdam(table)
    map_pages([opt.m, opt.v])
    rows = table.shape[0]
    return Stepper(
        lambda ids, g: CsrGradient.from_rows(ids, g, rows).to_dense(), opt.step, lambda: [opt.m, opt.v], opt
    )


def sparse_opt_contenders(dense: bool = True) -> list[Contender]:
    """``SparseAdamTable`` in its three modes, ``SparseSgdTable`` (momentum 0.9) and, if ``dense``, ``DenseAdam``.

    They pickle (their ``make`` is a module-level function or a partial of
    one), so :func:`sparse_opt.demos.memory.in_fresh_process` can send them to
    another interpreter.

    Examples
    --------
    >>> [c.name for c in sparse_opt_contenders()]  # doctest: +NORMALIZE_WHITESPACE
    ['SparseAdamTable LAZY', 'SparseAdamTable DORMANCY_DECAY', 'SparseAdamTable DENSE_EQUIVALENT',
     'SparseSgdTable momentum', 'DenseAdam']
    """
    out = [
        Contender(LAZY_ADAM, "sparse_opt", False, partial(_adam, LazyMode.LAZY)),
        Contender(DORMANCY_ADAM, "sparse_opt", False, partial(_adam, LazyMode.DORMANCY_DECAY)),
        Contender(DENSE_EQUIVALENT_ADAM, "sparse_opt", False, partial(_adam, LazyMode.DENSE_EQUIVALENT)),
        Contender(MOMENTUM_SGD, "sparse_opt", False, _sgd),
    ]
    if dense:
        out.append(Contender(DENSE_ADAM, "sparse_opt", True, _dense_adam))
    return out


def select(contenders: Sequence[Contender], *names: str) -> list[Contender]:
    """The contenders called ``names``, in that order; ``KeyError`` naming the choices for an unknown one.

    Examples
    --------
    >>> [c.name for c in select(sparse_opt_contenders(), DENSE_ADAM, LAZY_ADAM)]
    ['DenseAdam', 'SparseAdamTable LAZY']
    """
    by_name = {c.name: c for c in contenders}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise KeyError(f"no contender {missing[0]!r}; the choices are {sorted(by_name)}")
    return [by_name[n] for n in names]
