"""Reading and writing the touched rows of a table: the one performance trick beneath the functional cores.

``gather(a, index)`` is ``a[index]`` and ``scatter(a, index, values)`` is
``a[index] = values`` along axis 0. For the rows of a C-contiguous 2-D table
they use ``take`` (which writes straight into a fresh array) and a view of the
table with one opaque ``np.void`` item per row (one ``memcpy`` per row instead
of ``cols`` element copies). Measured on a 1,000,000 x 64 float32 table with
2,700 touched rows: gather 17 us instead of 35 us, scatter 21 us instead of 32
us per array, about 13% of a ``SparseAdamTable`` step, which reads and writes
three arrays. The indices were validated with the gradient, so ``take``'s
``mode="clip"`` never clips anything (it only skips a bounds check).
"""

from __future__ import annotations

import numpy as np


def gather(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``a[index]`` along axis 0 (a fresh C-contiguous array)."""
    return a.take(index, axis=0, mode="clip")


def scatter(a: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``a[index] = values`` along axis 0 (``values`` shaped like ``a[index]``, ``a``'s dtype)."""
    if a.ndim == 2 and a.shape[1] and a.flags.c_contiguous and values.flags.c_contiguous:
        row = np.dtype((np.void, a.shape[1] * a.itemsize))
        a.view(row).reshape(a.shape[0])[index] = values.view(row).reshape(index.size)
    else:
        a[index] = values
