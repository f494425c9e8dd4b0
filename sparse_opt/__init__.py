"""sparse_opt: lazy sparse optimizers for embedding tables, and their dense yardsticks.

Public names (``import sparse_opt as so``):

- sparse gradients: :class:`CooGradient` (1-D), :class:`CsrGradient` (2-D table);
- lazy sparse optimizers: :class:`SparseSgd`, :class:`SparseSgdTable`,
  :class:`SparseAdam`, :class:`SparseAdamTable`, their configs and
  :class:`LazyAdamMode`;
- dense optimizers: :class:`DenseAdam` (the yardstick), :class:`Adafactor`
  (``torch.optim.Adafactor`` semantics) and :class:`EGDD` (lingvo's).

Only numpy is required. ``sparse_opt.demos`` (matplotlib, ipywidgets) holds the
plain functions behind the notebooks and is not imported here.
"""

from sparse_opt.adafactor import Adafactor
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.egdd import EGDD
from sparse_opt.sparse_adam import LazyAdamMode, SparseAdam, SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgd, SparseSgdConfig, SparseSgdTable

__all__ = [
    "Adafactor",
    "CooGradient",
    "CsrGradient",
    "DenseAdam",
    "EGDD",
    "LazyAdamMode",
    "SparseAdam",
    "SparseAdamConfig",
    "SparseAdamTable",
    "SparseSgd",
    "SparseSgdConfig",
    "SparseSgdTable",
]
__version__ = "0.1.0"
