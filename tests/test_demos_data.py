"""Zipf-distributed embedding ids (sparse_opt.demos.data)."""

import numpy as np
import pytest

from sparse_opt.demos.data import zipf_id_batches, zipf_ids, zipf_probabilities


def test_probabilities_follow_the_zipf_law():
    p = zipf_probabilities(4, 1.0)
    h4 = 1 + 1 / 2 + 1 / 3 + 1 / 4
    np.testing.assert_allclose(p, [1 / h4, 1 / (2 * h4), 1 / (3 * h4), 1 / (4 * h4)], rtol=1e-15)
    np.testing.assert_allclose(zipf_probabilities(5, 0.0), np.full(5, 0.2), rtol=1e-15)
    assert zipf_probabilities(1000, 2.0).sum() == pytest.approx(1.0, rel=1e-12)


def test_ids_are_seeded_in_range_and_match_the_law():
    a = zipf_ids(50, 200_000, 1.2, 3)
    b = zipf_ids(50, 200_000, 1.2, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.int64 and a.min() >= 0 and a.max() <= 49
    freq = np.bincount(a, minlength=50) / a.size
    expected = zipf_probabilities(50, 1.2)
    # binomial standard error of each frequency, times 5
    np.testing.assert_array_less(np.abs(freq - expected), 5 * np.sqrt(expected * (1 - expected) / a.size) + 1e-12)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [((0, 1.0), ValueError, "num_rows must be positive"), ((5, -1.0), ValueError, "Invalid skew"), ((2.5, 1.0), TypeError, "num_rows")],
)
def test_bad_arguments(args, exc, match):
    with pytest.raises(exc, match=match):
        zipf_probabilities(*args)


def test_id_batches_are_one_seeded_draw_reshaped():
    b = zipf_id_batches(30, 4, 5, 1.0, seed=2)
    assert b.shape == (5, 4) and b.dtype == np.int64
    np.testing.assert_array_equal(b.ravel(), zipf_ids(30, 20, 1.0, 2))
    np.testing.assert_array_equal(b, zipf_id_batches(30, 4, 5, 1.0, seed=2))
    assert not np.array_equal(b, zipf_id_batches(30, 4, 5, 1.0, seed=3))
    assert zipf_id_batches(30, 4, 0, 1.0, seed=2).shape == (0, 4)
    with pytest.raises(TypeError, match="num_steps"):
        zipf_id_batches(30, 4, 2.5, 1.0, seed=2)
