"""sparse_opt._coalesce.distinct: ``np.unique(values, return_inverse=True)`` without the sort where it can."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_opt._coalesce import distinct

_UNIQUE = np.unique  # the reference, unaffected by the spy below


def _same_as_unique(values: np.ndarray) -> None:
    unique, inverse = distinct(values)
    want_unique, want_inverse = _UNIQUE(values, return_inverse=True)
    assert unique.dtype == np.int64 and inverse.dtype == np.int64
    np.testing.assert_array_equal(unique, want_unique)
    np.testing.assert_array_equal(inverse, want_inverse.reshape(-1))
    np.testing.assert_array_equal(unique[inverse], values.reshape(-1))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**62 - 2**20),
    st.integers(1, 2000),
    st.sampled_from([10, 5000, 2**40]),
    st.integers(1, 40),
    st.integers(0, 2**32 - 1),
)
def test_distinct_is_np_unique_for_narrow_wide_and_repeated_steps(low, n, span, repeat, seed):
    """Narrow spans are counted, runs of equal neighbours sorted by their heads, anything else sorted: the same
    arrays as ``np.unique`` in every case (a catch-up's last steps, its pieces' starts repeated per node)."""
    rng = np.random.default_rng(seed)
    heads = low + rng.integers(0, span, size=max(n // repeat, 1), dtype=np.int64)
    _same_as_unique(np.repeat(heads, repeat))
    _same_as_unique(heads)


def test_distinct_takes_each_way(monkeypatch):
    """A narrow span is counted (no sort), runs sort their heads alone, anything else is sorted whole."""
    calls = []
    monkeypatch.setattr(np, "unique", lambda a, **kw: calls.append(a.size) or _UNIQUE(a, **kw))
    _same_as_unique(np.array([[7, 3, 3], [9, 7, 3]], dtype=np.int64))  # span 7: counted, no sort
    assert calls == []
    _same_as_unique(np.repeat(np.array([2**40, 5, 2**50], dtype=np.int64), 8))  # 3 runs of 8: the heads sorted
    assert calls[-1] == 3
    wide = np.array([2**40, 5, 2**50, 17], dtype=np.int64)
    _same_as_unique(wide)  # no runs, wide span: sorted whole
    assert calls[-1] == 4
    empty_unique, empty_inverse = distinct(np.zeros(0, dtype=np.int64))
    assert empty_unique.size == 0 and empty_inverse.size == 0
