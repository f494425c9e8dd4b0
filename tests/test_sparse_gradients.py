"""CooGradient and CsrGradient: validation, conversions, coalescing (hand-made and hypothesis cases)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparse_opt as so

# ---------------------------------------------------------------- COO: construction


def test_coo_stores_readonly_int64_copies():
    idx = np.array([1, 4], dtype=np.int32)
    vals = np.array([0.5, -1.0])
    g = so.CooGradient(idx, vals, 6)
    assert g.indices.dtype == np.int64 and g.nnz == 2 and g.dim == 6
    idx[0] = 5  # the caller's arrays are not shared
    vals[0] = 9.0
    assert g.indices[0] == 1 and g.values[0] == 0.5
    with pytest.raises(ValueError):
        g.indices[0] = 3
    with pytest.raises(ValueError):
        g.values[0] = 3.0
    with pytest.raises(AttributeError):
        g.dim = 7
    np.testing.assert_array_equal(g.to_dense(), [0, 0.5, 0, 0, -1.0, 0])


def test_coo_empty_is_valid():
    g = so.CooGradient([], [], 4)
    assert g.nnz == 0 and g.indices.dtype == np.int64
    np.testing.assert_array_equal(g.to_dense(), np.zeros(4))
    assert so.CooGradient([], [], 0).to_dense().shape == (0,)


@pytest.mark.parametrize(
    ("indices", "values", "dim", "exc", "match"),
    [
        ([2, 1], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 1 follows indices\[0\] = 2 \(not sorted"),
        ([1, 1], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 1 follows indices\[0\] = 1 \(duplicate"),
        ([0, 5], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 5 is out of range \[0, dim = 5\)"),
        ([-1, 2], [1.0, 1.0], 5, ValueError, r"indices\[0\] = -1 is out of range"),
        ([0, 1], [1.0], 5, ValueError, "indices has 2 entries but values has 1"),
        ([[0, 1]], [[1.0, 1.0]], 5, ValueError, "indices must be 1-D"),
        ([0.0, 1.0], [1.0, 1.0], 5, TypeError, "indices must be an integer array, got dtype float64"),
        ([True, False], [1.0, 1.0], 5, TypeError, "indices must be an integer array, got dtype bool"),
        ([0, 1], [1, 2], 5, TypeError, "values must be a floating point array, got dtype int64"),
        ([0, 1], [1j, 2j], 5, TypeError, "values must be a floating point array"),
        ([0], [1.0], -3, ValueError, "dim must be non-negative, got -3"),
        ([0], [1.0], 2.5, TypeError, "dim must be a non-negative int"),
        ([0], [1.0], True, TypeError, "dim must be a non-negative int"),
    ],
)
def test_coo_rejects_malformed_input(indices, values, dim, exc, match):
    with pytest.raises(exc, match=match):
        so.CooGradient(indices, values, dim)


def test_coo_from_unsorted_sums_duplicates_in_order():
    g = so.CooGradient.from_unsorted([3, 1, 3, 0], [1.0, 2.0, 5.0, -1.0], 4)
    np.testing.assert_array_equal(g.indices, [0, 1, 3])
    np.testing.assert_array_equal(g.values, [-1.0, 2.0, 6.0])
    with pytest.raises(ValueError, match=r"indices\[1\] = 4 is out of range"):
        so.CooGradient.from_unsorted([0, 4], [1.0, 1.0], 4)


def test_coo_from_dense_keeps_nonzeros_and_dtype():
    x = np.array([0.0, 1.5, 0.0, -2.0], dtype=np.float32)
    g = so.CooGradient.from_dense(x)
    np.testing.assert_array_equal(g.indices, [1, 3])
    assert g.values.dtype == np.float32 and g.dim == 4
    with pytest.raises(ValueError, match="x must be 1-D"):
        so.CooGradient.from_dense(np.zeros((2, 2)))


@given(
    dim=st.integers(1, 50),
    data=st.data(),
)
def test_from_unsorted_equals_dense_sum(dim, data):
    n = data.draw(st.integers(0, 60))
    idx = data.draw(st.lists(st.integers(0, dim - 1), min_size=n, max_size=n))
    vals = data.draw(st.lists(st.integers(-8, 8).map(float), min_size=n, max_size=n))
    g = so.CooGradient.from_unsorted(np.array(idx, dtype=np.int64), np.array(vals), dim)
    dense = np.zeros(dim)
    np.add.at(dense, np.array(idx, dtype=np.int64), np.array(vals))
    np.testing.assert_array_equal(g.to_dense(), dense)  # small integers: sums are exact
    assert np.all(np.diff(g.indices) > 0)
    assert g.nnz == len(set(idx))


# ---------------------------------------------------------------- CSR: construction


def test_csr_from_arrays_and_lazy_views():
    g = so.CsrGradient([0, 1, 1, 3], [2, 0, 1], [1.0, 2.0, 3.0], (3, 3))
    np.testing.assert_array_equal(g.to_dense(), [[0, 0, 1], [0, 0, 0], [2, 3, 0]])
    np.testing.assert_array_equal(g.row_offsets, [0, 1, 1, 3])
    np.testing.assert_array_equal(g.col_indices, [2, 0, 1])
    np.testing.assert_array_equal(g.touched_rows, [0, 2])
    assert g.nnz == 3 and g.shape == (3, 3) and not g.full_rows
    assert g.row_offsets.dtype == np.int64 and g.col_indices.dtype == np.int64
    np.testing.assert_array_equal(g.to_coo().indices, [2, 6, 7])


@pytest.mark.parametrize(
    ("offsets", "cols", "values", "shape", "exc", "match"),
    [
        ([0, 1, 2], [0, 1], [1.0, 1.0], (3, 2), ValueError, r"row_offsets must have rows \+ 1 = 4 entries, got 3"),
        ([1, 1, 2], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[0\] must be 0, got 1"),
        ([0, 2, 1], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[2\] = 1 < row_offsets\[1\] = 2"),
        ([0, 1, 1], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[-1\] = 1 must equal nnz = 2"),
        ([0, 2, 2], [1, 0], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = 0 follows col_indices\[0\] = 1"),
        ([0, 2, 2], [1, 1], [1.0, 1.0], (2, 2), ValueError, r"\(duplicate"),
        ([0, 1, 2], [0, 2], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = 2 is out of range \[0, cols = 2\)"),
        ([0, 1, 2], [0, -1], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = -1 is out of range"),
        ([0, 1, 2], [0, 1], [1.0], (2, 2), ValueError, "col_indices has 2 entries but values has 1"),
        ([0, 1, 2], [0, 1], [1.0, 1.0], (2,), ValueError, r"shape must be a \(rows, cols\) pair"),
        ([0, 1, 2], [0, 1], [1.0, 1.0], (2, -2), ValueError, r"shape\[1\] must be non-negative"),
        ([0.0, 1.0, 2.0], [0, 1], [1.0, 1.0], (2, 2), TypeError, "row_offsets must be an integer array"),
        ([0, 1, 2], [0.0, 1.0], [1.0, 1.0], (2, 2), TypeError, "col_indices must be an integer array"),
        ([0, 1, 2], [0, 1], [1, 1], (2, 2), TypeError, "values must be a floating point array"),
    ],
)
def test_csr_rejects_malformed_input(offsets, cols, values, shape, exc, match):
    with pytest.raises(exc, match=match):
        so.CsrGradient(offsets, cols, values, shape)


def test_csr_columns_may_restart_at_a_row_boundary():
    g = so.CsrGradient([0, 2, 3], [0, 1, 0], [1.0, 2.0, 3.0], (2, 2))
    np.testing.assert_array_equal(g.to_dense(), [[1, 2], [3, 0]])
    assert g.full_rows is False
    assert so.CsrGradient([0, 2, 4], [0, 1, 0, 1], [1.0] * 4, (2, 2)).full_rows


def test_from_coo_checks_kind_and_dim():
    with pytest.raises(TypeError, match="coo must be a CooGradient"):
        so.CsrGradient.from_coo(np.zeros(4), (2, 2))
    with pytest.raises(ValueError, match=r"coo.dim = 5 does not equal rows \* cols = 2 \* 2 = 4"):
        so.CsrGradient.from_coo(so.CooGradient([0], [1.0], 5), (2, 2))


def test_from_rows_sums_repeats_and_keeps_zero_rows():
    g = so.CsrGradient.from_rows([2, 0, 2], [[1.0, 1.0], [0.0, 0.0], [3.0, -1.0]], 4)
    np.testing.assert_array_equal(g.to_dense(), [[0, 0], [0, 0], [4, 0], [0, 0]])
    np.testing.assert_array_equal(g.touched_rows, [0, 2])  # row 0's zero gradient is an explicit entry
    np.testing.assert_array_equal(g.row_offsets, [0, 2, 2, 4, 4])
    np.testing.assert_array_equal(g.col_indices, [0, 1, 0, 1])
    assert g.full_rows and g.nnz == 4
    with pytest.raises(ValueError, match=r"row_ids\[1\] = 4 is out of range \[0, num_rows = 4\)"):
        so.CsrGradient.from_rows([0, 4], np.ones((2, 2)), 4)
    with pytest.raises(ValueError, match=r"row_grads must have shape \(len\(row_ids\), cols\) = \(2, cols\)"):
        so.CsrGradient.from_rows([0, 1], np.ones((3, 2)), 4)


def test_from_rows_empty_and_zero_columns():
    g = so.CsrGradient.from_rows(np.zeros(0, dtype=np.int64), np.zeros((0, 3)), 5)
    assert g.nnz == 0 and g.shape == (5, 3)
    np.testing.assert_array_equal(g.row_offsets, np.zeros(6))
    h = so.CsrGradient.from_rows([1, 1], np.zeros((2, 0)), 3)
    assert h.nnz == 0 and h.shape == (3, 0)


def test_csr_from_dense():
    x = np.array([[0.0, 1.0], [0.0, 0.0], [2.0, 3.0]], dtype=np.float32)
    g = so.CsrGradient.from_dense(x)
    np.testing.assert_array_equal(g.row_offsets, [0, 1, 1, 3])
    np.testing.assert_array_equal(g.col_indices, [1, 0, 1])
    assert g.values.dtype == np.float32
    np.testing.assert_array_equal(g.to_dense(), x)


def test_round_trip_beyond_2_pow_32_coordinates():
    rows = cols = 100_000
    lin = np.array([0, 2**32 - 1, 2**32, 2**32 + 5, rows * cols - 1], dtype=np.int64)
    coo = so.CooGradient(lin, np.arange(1.0, 6.0), rows * cols)
    csr = so.CsrGradient.from_coo(coo, (rows, cols))
    np.testing.assert_array_equal(csr.touched_rows, np.unique(lin // cols))
    np.testing.assert_array_equal(csr.row_of_entries(), lin // cols)
    np.testing.assert_array_equal(csr.col_indices, lin % cols)
    back = csr.to_coo()
    assert back.dim == rows * cols
    np.testing.assert_array_equal(back.indices, lin)
    np.testing.assert_array_equal(back.values, coo.values)
    offsets = csr.row_offsets
    assert offsets.shape == (rows + 1,) and offsets[-1] == 5


@st.composite
def csr_gradients(draw, max_rows=12, max_cols=12):
    rows = draw(st.integers(0, max_rows))
    cols = draw(st.integers(0, max_cols))
    mask = np.array(draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols)), dtype=bool)
    lin = np.flatnonzero(mask)
    vals = np.array(draw(st.lists(st.floats(-1e3, 1e3), min_size=lin.size, max_size=lin.size)))
    return so.CsrGradient.from_coo(so.CooGradient(lin, vals, rows * cols), (rows, cols))


@given(csr_gradients())
def test_csr_coo_round_trip(csr):
    coo = csr.to_coo()
    again = so.CsrGradient.from_coo(coo, csr.shape)
    rebuilt = so.CsrGradient(csr.row_offsets, csr.col_indices, csr.values, csr.shape)
    for other in (again, rebuilt):
        np.testing.assert_array_equal(other.row_offsets, csr.row_offsets)
        np.testing.assert_array_equal(other.col_indices, csr.col_indices)
        np.testing.assert_array_equal(other.values, csr.values)
    np.testing.assert_array_equal(coo.to_dense().reshape(csr.shape), csr.to_dense())
    np.testing.assert_array_equal(so.CsrGradient.from_dense(csr.to_dense()).to_dense(), csr.to_dense())


@given(
    rows=st.integers(1, 30),
    cols=st.integers(1, 6),
    data=st.data(),
)
def test_from_rows_equals_dense_sum(rows, cols, data):
    n = data.draw(st.integers(0, 40))
    ids = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n)), dtype=np.int64)
    grads = np.array(
        data.draw(st.lists(st.integers(-5, 5).map(float), min_size=n * cols, max_size=n * cols))
    ).reshape(n, cols)
    g = so.CsrGradient.from_rows(ids, grads, rows)
    dense = np.zeros((rows, cols))
    np.add.at(dense, ids, grads)
    np.testing.assert_array_equal(g.to_dense(), dense)
    np.testing.assert_array_equal(g.touched_rows, np.unique(ids))
    assert g.full_rows
    # the lazily built views agree with a CSR validated from scratch
    checked = so.CsrGradient(g.row_offsets, g.col_indices, g.values, g.shape)
    np.testing.assert_array_equal(checked.to_coo().indices, g.to_coo().indices)


@pytest.mark.parametrize("cols", [1, 2, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_repeats_are_summed_left_to_right_like_add_at(cols, dtype):
    """Coalescing adds repeated entries in the order given, bit for bit as ``np.add.at`` does.

    Long runs (300 repeats), runs of every length class, and values spanning many
    magnitudes, so any other summation order (pairwise, reversed) changes bits.
    """
    rng = np.random.default_rng(cols)
    ids = np.concatenate([np.full(300, 3), np.repeat(np.arange(10, 40), np.arange(1, 31)), rng.integers(0, 50, 200)])
    rng.shuffle(ids)
    grads = (rng.standard_normal((ids.size, cols)) * 10.0 ** rng.integers(-6, 6, (ids.size, 1))).astype(dtype)
    expected = np.zeros((50, cols), dtype=dtype)
    np.add.at(expected, ids, grads)
    got = so.CsrGradient.from_rows(ids, grads, 50)
    assert np.array_equal(got.to_dense(), expected)
    flat = so.CooGradient.from_unsorted(ids * cols, grads[:, 0], 50 * cols)
    expected_flat = np.zeros(50 * cols, dtype=dtype)
    np.add.at(expected_flat, ids * cols, grads[:, 0])
    assert np.array_equal(flat.to_dense(), expected_flat)


@given(
    rows=st.integers(2**16, 2**20),
    cols=st.integers(2**16 + 1, 2**20),
    data=st.data(),
)
def test_round_trip_huge_tables(rows, cols, data):
    """Tables with more than 2**32 coordinates: linear indices stay exact in int64 both ways."""
    dim = rows * cols
    assert dim > 2**32
    lin = np.unique(np.array(data.draw(st.lists(st.integers(0, dim - 1), max_size=20)), dtype=np.int64))
    lin = np.union1d(lin, [dim - 1])
    coo = so.CooGradient(lin, np.arange(1.0, lin.size + 1.0), dim)
    csr = so.CsrGradient.from_coo(coo, (rows, cols))
    np.testing.assert_array_equal(csr.row_of_entries(), lin // cols)
    np.testing.assert_array_equal(csr.col_indices, lin % cols)
    back = csr.to_coo()
    assert back.dim == dim
    np.testing.assert_array_equal(back.indices, lin)
    np.testing.assert_array_equal(back.values, coo.values)
