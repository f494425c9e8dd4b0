"""sparse_opt: lazy sparse optimizers for embedding tables, and their dense yardsticks.

Public names (``import sparse_opt as so``):

- sparse gradients: :class:`CooGradient` (1-D), :class:`CsrGradient` (2-D table);
- lazy sparse optimizers: :class:`SparseSgd`, :class:`SparseSgdTable`,
  :class:`SparseAdam`, :class:`SparseAdamTable`, :class:`SparseAdagrad`,
  :class:`SparseAdagradTable`, their configs, and :class:`LazyMode` (the
  semantics of dormant coordinates; :data:`LazyAdamMode` is the same enum);
- dense optimizers: :class:`DenseAdam` (the yardstick), :class:`Adafactor`
  (``torch.optim.Adafactor`` semantics) and :class:`EGDD` (lingvo's).

Only numpy is required. ``sparse_opt.demos`` (matplotlib, ipywidgets) holds the
plain functions behind the notebooks and is not imported here. The sparse
optimizers and ``DenseAdam`` also train float16 tables, and bfloat16 ones from
the optional ``ml_dtypes`` package (never imported here), with float32 or
half state and round-to-nearest or stochastic rounding (:mod:`sparse_opt._rounding`).
"""

from sparse_opt.adafactor import Adafactor
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.egdd import EGDD
from sparse_opt.modes import LazyAdamMode, LazyMode
from sparse_opt import schedules
from sparse_opt.sparse_adagrad import SparseAdagrad, SparseAdagradConfig, SparseAdagradTable
from sparse_opt.sparse_adam import SparseAdam, SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgd, SparseSgdConfig, SparseSgdTable

__all__ = [
    "Adafactor",
    "CooGradient",
    "CsrGradient",
    "DenseAdam",
    "EGDD",
    "LazyAdamMode",
    "LazyMode",
    "SparseAdagrad",
    "SparseAdagradConfig",
    "SparseAdagradTable",
    "SparseAdam",
    "SparseAdamConfig",
    "SparseAdamTable",
    "SparseSgd",
    "SparseSgdConfig",
    "SparseSgdTable",
]
__version__ = "0.2.0"
