"""Synthetic embedding lookups: Zipf-distributed row ids, as real id streams have.

Row ``k`` (a popularity rank, 0 = most frequent) is drawn with probability
``p_k = (k + 1)**(-skew) / sum_j (j + 1)**(-skew)`` over ``num_rows`` rows.
``skew = 0`` is uniform; ``skew`` around 1 is typical of words, items and users.
"""

from __future__ import annotations

import numpy as np

from sparse_opt._arrays import as_size
from sparse_opt._validation import check_scalar


def zipf_probabilities(num_rows: int, skew: float) -> np.ndarray:
    """Probability of each row rank under a Zipf law truncated to ``num_rows`` rows."""
    num_rows = as_size("num_rows", num_rows)
    if num_rows == 0:
        raise ValueError("num_rows must be positive")
    skew = check_scalar("skew", skew, low=0.0)
    weights = np.arange(1, num_rows + 1, dtype=np.float64) ** -skew
    return weights / weights.sum()


def zipf_ids(num_rows: int, size: int, skew: float, rng: np.random.Generator | int) -> np.ndarray:
    """Draw ``size`` row ids (int64, with repeats, in draw order) from :func:`zipf_probabilities`.

    ``rng`` is a ``numpy.random.Generator`` or a seed. Set-up is O(num_rows)
    (the cumulative table); each draw is a binary search.
    """
    size = as_size("size", size)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    cdf = np.cumsum(zipf_probabilities(num_rows, skew))
    ids = np.searchsorted(cdf, gen.random(size), side="right")
    return np.minimum(ids, num_rows - 1).astype(np.int64)


def zipf_id_batches(num_rows: int, batch_size: int, num_steps: int, skew: float, seed: int) -> np.ndarray:
    """``num_steps`` batches of ``batch_size`` Zipf ids: an int64 array of shape ``(num_steps, batch_size)``.

    All ids come from one ``np.random.default_rng(seed)`` in one draw
    (:func:`zipf_ids` of ``num_steps * batch_size`` ids), row ``t`` being the
    batch of step ``t + 1``, so a stream is reproducible from its seed alone.

    Examples
    --------
    >>> zipf_id_batches(5, 3, 2, 1.0, seed=0).shape
    (2, 3)
    """
    num_steps = as_size("num_steps", num_steps)
    batch_size = as_size("batch_size", batch_size)
    ids = zipf_ids(num_rows, num_steps * batch_size, skew, seed)
    return ids.reshape(num_steps, batch_size)
