"""The work of one optimizer step on an embedding table: the table and its batches of lookups.

Every contender (:mod:`sparse_opt.demos.contenders`) timed or measured in
notebook 07 and in ``benchmarks/`` does the same work on every step: a batch of
``batch`` row ids drawn from a Zipf law over the table's rows (repeats
included, as an embedding lookup produces them) and one gradient row per id. A
:class:`Workload` describes that work and makes its seeded data; the same
workload gives every contender the same table and the same batches.

Needs numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from sparse_opt._arrays import as_size
from sparse_opt.demos.data import zipf_ids


@dataclass(frozen=True)
class Workload:
    """The work of one step: a ``rows x cols`` table and a batch of Zipf-distributed lookups.

    Attributes
    ----------
    rows, cols : int
        Shape of the embedding table.
    batch : int
        Row ids looked up per step (with repeats).
    skew : float
        Zipf exponent of the ids (:func:`~sparse_opt.demos.data.zipf_ids`); row
        ``k`` is the ``k``-th most popular.
    dtype : str
        ``"float32"`` or ``"float64"``: table, gradients and state.
    seed : int
        Seeds the table and the batches.

    Examples
    --------
    >>> w = Workload(rows=1000, cols=8, batch=32)
    >>> w.table().shape, w.table_bytes
    ((1000, 8), 32000)
    >>> ids, grads = w.batches(2)[0]
    >>> ids.shape, grads.shape, str(grads.dtype)
    ((32,), (32, 8), 'float32')
    """

    rows: int
    cols: int = 64
    batch: int = 4096
    skew: float = 1.0
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "batch", "seed"):
            as_size(name, getattr(self, name))
        if self.rows == 0:
            raise ValueError("rows must be positive")
        if np.dtype(self.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def itemsize(self) -> int:
        """Bytes per parameter value."""
        return np.dtype(self.dtype).itemsize

    @property
    def table_bytes(self) -> int:
        """Bytes of the parameter table."""
        return self.rows * self.cols * self.itemsize

    def table(self) -> np.ndarray:
        """A fresh table of small normal values (C-contiguous, ``dtype``), seeded by ``seed``."""
        table = np.random.default_rng([self.seed, 0]).standard_normal((self.rows, self.cols), dtype=self.dtype)
        table *= 0.01
        return table

    def batches(self, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``count`` lookups ``(ids, row_grads)``: int64 ids of shape ``(batch,)``, gradients ``(batch, cols)``.

        The same ``seed`` gives the same batches, whatever the contender.
        """
        count = as_size("count", count)
        rng = np.random.default_rng([self.seed, 1])
        ids = zipf_ids(self.rows, count * self.batch, self.skew, rng).reshape(count, self.batch)
        grads = rng.standard_normal((count, self.batch, self.cols), dtype=self.dtype)
        return [(ids[k], grads[k]) for k in range(count)]


def nnz_of(workload: Workload, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean number of entries of the coalesced gradients: distinct rows times ``cols`` (0 for no batch).

    Examples
    --------
    >>> nnz_of(Workload(rows=10, cols=4), [(np.array([3, 1, 3]), None), (np.array([0, 1, 2, 3]), None)])
    12.0
    """
    counts = [np.unique(ids).size * workload.cols for ids, _ in batches]
    return float(np.mean(counts)) if counts else 0.0


def rows_workloads(base: Workload, rows: Iterable[int]) -> list[Workload]:
    """``base`` with each of the table sizes ``rows`` (same batch, cols, skew, seed)."""
    return [replace(base, rows=r) for r in rows]


def batch_workloads(base: Workload, batches: Iterable[int]) -> list[Workload]:
    """``base`` with each of the batch sizes ``batches`` (same table)."""
    return [replace(base, batch=b) for b in batches]
