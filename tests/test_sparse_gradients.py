"""CooGradient and CsrGradient: validation, exact integers, conversions, coalescing, immutability, pickling.

Hand-made cases pin the messages (field and position named); hypothesis checks
the properties: any integer dtype converts exactly or is refused (never
wrapped), coalescing equals ``np.add.at``, COO <-> CSR round trips are lossless
(beyond 2**32 coordinates too), and pickles of every protocol give back equal
gradients.
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import re
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparse_opt as so

INT64_MAX = 2**63 - 1
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def message_ids(cases):
    """Test ids from each case's message pattern (its last item), regex escapes removed."""
    return [re.sub(r"\\(.)", r"\1", case[-1]).replace(" - ", "-")[:70] for case in cases]


def same(a: so.CooGradient | so.CsrGradient, b: so.CooGradient | so.CsrGradient) -> bool:
    """Equal contents, bit for bit (values compared as bytes, so -0.0 and NaN payloads count)."""
    if type(a) is not type(b) or a.nnz != b.nnz:
        return False
    if isinstance(a, so.CooGradient):
        return (
            a.dim == b.dim
            and np.array_equal(a.indices, b.indices)
            and a.values.dtype == b.values.dtype
            and a.values.tobytes() == b.values.tobytes()
        )
    return (
        a.shape == b.shape
        and np.array_equal(a.touched_rows, b.touched_rows)
        and np.array_equal(a.col_indices, b.col_indices)
        and a.values.dtype == b.values.dtype
        and a.values.tobytes() == b.values.tobytes()
    )


# ---------------------------------------------------------------- COO: construction


def test_coo_stores_readonly_int64_copies():
    """Indices become int64; the caller's arrays are copied; the stored arrays and attributes are immutable."""
    idx = np.array([1, 4], dtype=np.int32)
    vals = np.array([0.5, -1.0])
    g = so.CooGradient(idx, vals, 6)
    assert g.indices.dtype == np.int64 and g.nnz == 2 and g.dim == 6 and type(g.dim) is int
    idx[0] = 5  # the caller's arrays are not shared
    vals[0] = 9.0
    assert g.indices[0] == 1 and g.values[0] == 0.5
    with pytest.raises(ValueError):
        g.indices[0] = 3
    with pytest.raises(ValueError):
        g.values[0] = 3.0
    with pytest.raises(AttributeError, match="CooGradient is immutable; cannot set 'dim'"):
        g.dim = 7
    with pytest.raises(AttributeError, match="immutable"):
        g.indices = np.array([0, 1])
    np.testing.assert_array_equal(g.to_dense(), [0, 0.5, 0, 0, -1.0, 0])


def test_coo_empty_is_valid():
    """``CooGradient([], [], dim)`` has nnz 0 (dim 0 too)."""
    g = so.CooGradient([], [], 4)
    assert g.nnz == 0 and g.indices.dtype == np.int64
    np.testing.assert_array_equal(g.to_dense(), np.zeros(4))
    assert so.CooGradient([], [], 0).to_dense().shape == (0,)
    assert so.CooGradient(np.zeros(0, np.uint64), np.zeros(0, np.float32), 3).values.dtype == np.float32


MALFORMED_COO = [
    ([2, 1], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 1 follows indices\[0\] = 2 \(not sorted"),
    ([1, 1], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 1 follows indices\[0\] = 1 \(duplicate"),
    ([0, 5], [1.0, 1.0], 5, ValueError, r"indices\[1\] = 5 is out of range \[0, dim = 5\)"),
    ([-1, 2], [1.0, 1.0], 5, ValueError, r"indices\[0\] = -1 is out of range"),
    ([0, 1], [1.0], 5, ValueError, "indices has 2 entries but values has 1"),
    ([[0, 1]], [[1.0, 1.0]], 5, ValueError, "indices must be 1-D"),
    ([0, 1], [[1.0, 1.0]], 5, ValueError, "values must be 1-D"),
    ([0.0, 1.0], [1.0, 1.0], 5, TypeError, "indices must be an integer array, got dtype float64"),
    ([True, False], [1.0, 1.0], 5, TypeError, "indices must be an integer array, got dtype bool"),
    (["0", "1"], [1.0, 1.0], 5, TypeError, "indices must be an integer array"),
    ([0, 1], [1, 2], 5, TypeError, "values must be a floating point array, got dtype int64"),
    ([0, 1], [1j, 2j], 5, TypeError, "values must be a floating point array"),
    ([0], [1.0], -3, ValueError, "dim must be non-negative, got -3"),
    ([0], [1.0], 2.5, TypeError, "dim must be a non-negative int"),
    ([0], [1.0], True, TypeError, "dim must be a non-negative int"),
    ([0], [1.0], None, TypeError, "dim must be a non-negative int, got None"),
    ([0], [1.0], "5", TypeError, "dim must be a non-negative int"),
]


@pytest.mark.parametrize(("indices", "values", "dim", "exc", "match"), MALFORMED_COO, ids=message_ids(MALFORMED_COO))
def test_coo_rejects_malformed_input(indices, values, dim, exc, match):
    """Order, range, lengths, dimensions and dtypes: each refusal names the field and position."""
    with pytest.raises(exc, match=match):
        so.CooGradient(indices, values, dim)


@pytest.mark.parametrize(
    ("indices", "values", "field", "kind"),
    [
        (None, [1.0], "indices", "NoneType"),
        ({0: 1}, [1.0], "indices", "dict"),
        ({0}, [1.0], "indices", "set"),
        ((i for i in [0]), [1.0], "indices", "generator"),
        (iter([0]), [1.0], "indices", "list_iterator"),
        ("0", [1.0], "indices", "str"),
        ([0], None, "values", "NoneType"),
        ([0], {0: 1.0}, "values", "dict"),
        ([0], (v for v in [1.0]), "values", "generator"),
    ],
)
def test_wrong_kind_of_object_is_a_type_error(indices, values, field, kind):
    """None, a mapping, a set, a string or a generator is not an array: ``TypeError`` naming the field and the kind.

    (Before, numpy turned them into 0-d object arrays and the error said "must be 1-D".)
    """
    for build in (so.CooGradient, so.CooGradient.from_unsorted):
        with pytest.raises(TypeError, match=rf"{field} must be an array of numbers, got {kind}"):
            build(indices, values, 5)


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
    x[1] = 7.0  # not shared
    assert g.values[0] == 1.5
    with pytest.raises(ValueError, match="x must be 1-D"):
        so.CooGradient.from_dense(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="x must be an array of numbers, got NoneType"):
        so.CooGradient.from_dense(None)


@given(dim=st.integers(1, 50), data=st.data())
def test_from_unsorted_equals_dense_sum(dim, data):
    """Coalescing equals ``np.add.at`` into zeros; the result is strictly ascending with one entry per distinct index."""
    n = data.draw(st.integers(0, 60))
    idx = data.draw(st.lists(st.integers(0, dim - 1), min_size=n, max_size=n))
    vals = data.draw(st.lists(st.integers(-8, 8).map(float), min_size=n, max_size=n))
    g = so.CooGradient.from_unsorted(np.array(idx, dtype=np.int64), np.array(vals), dim)
    dense = np.zeros(dim)
    np.add.at(dense, np.array(idx, dtype=np.int64), np.array(vals))
    np.testing.assert_array_equal(g.to_dense(), dense)  # small integers: sums are exact
    assert np.all(np.diff(g.indices) > 0)
    assert g.nnz == len(set(idx))


# ---------------------------------------------------------------- exact integers, never wrapped


@pytest.mark.parametrize("dtype", [np.uint64, np.int8, np.int16, np.uint32, np.uint8, np.int64])
def test_sizes_of_any_integer_type_are_exact(dtype):
    """``dim``, ``shape`` and ``num_rows`` given as numpy integers of any width become the exact Python int."""
    size = dtype(100)
    g = so.CooGradient(np.array([3, 99], dtype), [1.0, 2.0], size)
    assert g.dim == 100 and type(g.dim) is int
    np.testing.assert_array_equal(g.indices, [3, 99])
    c = so.CsrGradient(np.array([0, 1, 1], dtype), np.array([2], dtype), [1.0], (dtype(2), dtype(3)))
    assert c.shape == (2, 3) and all(type(s) is int for s in c.shape)
    r = so.CsrGradient.from_rows(np.array([1, 1], dtype), np.ones((2, 4)), size)
    assert r.shape == (100, 4) and r.to_coo().indices.tolist() == [4, 5, 6, 7]


def test_large_unsigned_sizes_are_exact_not_rounded():
    """``np.uint64(2**63 - 1)`` is that exact dim (no float rounding); an index at its end converts exactly."""
    dim = np.uint64(INT64_MAX)
    g = so.CooGradient(np.array([0, INT64_MAX - 1], np.uint64), [1.0, 2.0], dim)
    assert g.dim == INT64_MAX
    assert g.indices.tolist() == [0, INT64_MAX - 1]
    c = so.CsrGradient([0, 1], [INT64_MAX - 1], [1.0], (1, np.uint64(INT64_MAX)))
    assert c.shape == (1, INT64_MAX) and c.to_coo().indices.tolist() == [INT64_MAX - 1]


TOO_LARGE = [
    (
        lambda: so.CooGradient(np.array([2**63], np.uint64), [1.0], 2**64),
        r"dim = 18446744073709551616 is too large \(at most 2\*\*63 - 1\)",
    ),
    (lambda: so.CooGradient([0], [1.0], np.uint64(2**63)), r"dim = 9223372036854775808 is too large"),
    (
        lambda: so.CooGradient(np.array([2**63], np.uint64), [1.0], INT64_MAX),
        r"indices\[0\] = 9223372036854775808 does not fit in int64 \(at most 2\*\*63 - 1\)",
    ),
    (
        lambda: so.CooGradient(np.array([1, 2**64 - 1], np.uint64), [1.0, 1.0], 10),
        r"indices\[1\] = 18446744073709551615 does not fit in int64",
    ),
    (
        lambda: so.CooGradient.from_unsorted(np.array([5, 2**63 + 1], np.uint64), [1.0, 1.0], 10),
        r"indices\[1\] = 9223372036854775809 does not fit in int64",
    ),
    (lambda: so.CooGradient([2**64], [1.0], 5), r"indices\[0\] = 18446744073709551616 does not fit in int64"),
    (
        lambda: so.CooGradient([0, -(2**64)], [1.0, 1.0], 5),
        r"indices\[1\] = -18446744073709551616 does not fit in int64",
    ),
    (
        lambda: so.CooGradient(np.array([1, 2**70], dtype=object), [1.0, 1.0], 5),
        r"indices\[1\] = 1180591620717411303424 does not fit in int64",
    ),
    (
        lambda: so.CsrGradient.from_rows([2**62 - 1], np.ones((1, 8)), 2**62),
        r"shape \(4611686018427387904, 8\) has rows \* cols = 36893488147419103232 coordinates; .* must fit in int64",
    ),
    (lambda: so.CsrGradient([0, 1], [0], [1.0], (2**62, 2)), r"rows \* cols = 9223372036854775808 coordinates"),
    (lambda: so.CsrGradient([0, 1], [0], [1.0], (1, 2**63)), r"shape\[1\] = 9223372036854775808 is too large"),
    (
        lambda: so.CsrGradient.from_rows([0], np.ones((1, 2)), np.uint64(2**64 - 1)),
        r"num_rows = 18446744073709551615 is too large",
    ),
    (
        lambda: so.CsrGradient.from_rows(np.array([2**63], np.uint64), np.ones((1, 2)), 4),
        r"row_ids\[0\] = 9223372036854775808 does not fit in int64",
    ),
    (
        lambda: so.CsrGradient.from_rows([1, 4], np.ones((2, 2)), 4),
        r"row_ids\[1\] = 4 is out of range \[0, num_rows = 4\)",
    ),
    (lambda: so.CsrGradient.from_rows([1, -1], np.ones((2, 2)), 4), r"row_ids\[1\] = -1 is out of range"),
    (
        lambda: so.CsrGradient.from_coo(so.CooGradient([0], [1.0], 2**63 - 1), (2**62, 2)),
        r"rows \* cols = 9223372036854775808",
    ),
]


@pytest.mark.parametrize(("build", "match"), TOO_LARGE, ids=message_ids(TOO_LARGE))
def test_too_large_sizes_and_indices_are_refused_never_wrapped(build, match):
    """A size of 2**63 or more, an index that does not fit int64, rows * cols >= 2**63: ``ValueError`` naming it.

    (Before: uint64 indices and dims wrapped or were accepted, and
    ``from_rows([2**62 - 1], ..., 2**62)`` built a table whose linear indices wrap.)
    """
    with pytest.raises(ValueError, match=match):
        build()


BAD_OFFSETS = [
    (
        np.array([0, 6, 3, 9], np.uint64),
        9,
        r"row_offsets must not decrease: row_offsets\[2\] = 3 < row_offsets\[1\] = 6",
    ),
    (np.array([0, 6, 3, 9], np.uint8), 9, r"row_offsets\[2\] = 3 < row_offsets\[1\] = 6"),
    (np.array([0, 2**64 - 1, 1], np.uint64), 1, r"row_offsets\[1\] = 18446744073709551615 does not fit in int64"),
    (np.array([0, 1, 2**64 - 1], np.uint64), 1, r"row_offsets\[2\] = 18446744073709551615 does not fit in int64"),
    (np.array([0, INT64_MAX, -5, 1]), 1, r"row_offsets\[1\] = 9223372036854775807 is out of range \[0, nnz \+ 1 = 2\)"),
    (np.array([0, -1, 1]), 1, r"row_offsets\[1\] = -1 is out of range \[0, nnz \+ 1 = 2\)"),
    (np.array([0, -128, 1], np.int8), 1, r"row_offsets\[1\] = -128 is out of range"),
    (np.array([0, 5, 1]), 1, r"row_offsets\[1\] = 5 is out of range \[0, nnz \+ 1 = 2\)"),
    (np.array([0, 2**64, 1], dtype=object), 1, r"row_offsets\[1\] = 18446744073709551616 does not fit in int64"),
    ([0, 2**64, 1], 1, r"row_offsets\[1\] = 18446744073709551616 does not fit in int64"),
]


@pytest.mark.parametrize(("offsets", "nnz", "match"), BAD_OFFSETS, ids=message_ids(BAD_OFFSETS))
def test_offsets_are_checked_exactly(offsets, nnz, match):
    """Decreasing, negative, out-of-range or too-large offsets of any dtype are refused with the position.

    An unsigned or wrapping ``diff`` would see ``[0, 6, 3, 9]`` as non-decreasing
    and ``[0, INT64_MAX, -5, 1]`` as steps of ``INT64_MAX``, ``2**63 - 4``, ``6``.
    """
    rows = len(offsets) - 1
    cols = np.arange(nnz) % 4 if nnz != 9 else np.array([0, 1, 2, 3, 4, 5, 0, 1, 2])
    with pytest.raises(ValueError, match=match):
        so.CsrGradient(offsets, cols, np.ones(nnz), (rows, 10))


def integers_of(dtype, *near):
    """Python ints representable in ``dtype``, biased to its extremes, to int64's edges and to ``near``."""
    info = np.iinfo(dtype)
    edges = [int(info.min), int(info.max), 0, 1, -1, INT64_MAX, INT64_MAX + 1, *near]
    edges = sorted({v for v in edges if info.min <= v <= info.max})
    return st.one_of(st.sampled_from(edges), st.integers(int(info.min), int(info.max)))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@given(data=st.data())
def test_indices_of_any_integer_dtype_convert_exactly_or_are_refused(dtype, data):
    """Any integer dtype: accepted iff every index is in ``[0, dim)``, with exactly those values; else the first bad one named.

    ``uint64`` values above ``2**63 - 1`` are named as not fitting int64 (checked
    first), others as out of range; nothing is ever wrapped.
    """
    dim = data.draw(st.one_of(st.integers(0, 300), st.sampled_from([2**31, 2**32 + 1, 2**63 - 1])))
    exact = data.draw(st.lists(integers_of(dtype, dim - 1, dim), max_size=6))
    idx = np.array(exact, dtype=dtype)
    dim_as = data.draw(st.sampled_from([int, np.uint64, np.int64]))
    too_big = [k for k, i in enumerate(exact) if i > INT64_MAX]
    outside = [k for k, i in enumerate(exact) if not 0 <= i < dim]
    values = np.ones(idx.size)
    if too_big:
        with pytest.raises(ValueError, match=rf"indices\[{too_big[0]}\] = {exact[too_big[0]]} does not fit in int64"):
            so.CooGradient.from_unsorted(idx, values, dim_as(dim))
    elif outside:
        with pytest.raises(
            ValueError, match=rf"indices\[{outside[0]}\] = {exact[outside[0]]} is out of range \[0, dim = {dim}\)"
        ):
            so.CooGradient.from_unsorted(idx, values, dim_as(dim))
    else:
        g = so.CooGradient.from_unsorted(idx, values, dim_as(dim))
        assert g.dim == dim and g.indices.dtype == np.int64
        assert g.indices.tolist() == sorted(set(exact))
        assert g.values.tolist() == [float(exact.count(i)) for i in sorted(set(exact))]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@given(data=st.data())
def test_offsets_of_any_integer_dtype_are_accepted_iff_valid(dtype, data):
    """Valid offsets, or ones with one defect (a decrease, an extreme value, a wrong end), in any dtype.

    Accepted iff valid in exact arithmetic (then read back exactly), else
    refused with a ``ValueError`` naming ``row_offsets``: an unsigned or
    wrapping ``diff`` never lets a decrease through.
    """
    nnz = data.draw(st.integers(0, 6))
    rows = data.draw(st.integers(1, 5))
    inner = sorted(data.draw(st.lists(st.integers(0, nnz), min_size=rows - 1, max_size=rows - 1)))
    offsets = [0, *inner, nnz]
    defect = data.draw(st.sampled_from(["none", "decrease", "extreme", "end"]))
    if defect == "decrease" and rows >= 2:
        k = data.draw(st.integers(1, rows - 1))  # an inner offset above its successor
        offsets[k] = data.draw(integers_of(dtype, offsets[k + 1] + 1).filter(lambda v: v > offsets[k + 1]))
    elif defect == "extreme":
        k = data.draw(st.integers(0, rows))
        offsets[k] = data.draw(integers_of(dtype, nnz + 1))
    elif defect == "end":
        offsets[-1] = data.draw(integers_of(dtype, nnz - 1, nnz + 1))
    valid = (
        offsets[0] == 0
        and offsets[-1] == nnz
        and all(0 <= o <= nnz for o in offsets)
        and all(a <= b for a, b in zip(offsets, offsets[1:]))
    )
    cols = np.zeros(nnz, np.int64)
    if valid:
        for a, b in zip(offsets, offsets[1:]):
            cols[a:b] = np.arange(b - a)
    arr = np.array(offsets, dtype=dtype)
    if valid:
        g = so.CsrGradient(arr, cols, np.arange(nnz, dtype=np.float64), (rows, 8))
        assert g.row_offsets.tolist() == offsets and g.row_offsets.dtype == np.int64
    else:
        with pytest.raises(ValueError, match="row_offsets"):
            so.CsrGradient(arr, cols, np.arange(nnz, dtype=np.float64), (rows, 8))


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


def test_csr_copies_the_callers_arrays():
    offsets, cols, vals = np.array([0, 1, 2]), np.array([1, 0]), np.array([1.0, 2.0])
    g = so.CsrGradient(offsets, cols, vals, (2, 2))
    offsets[1], cols[0], vals[0] = 2, 0, 9.0
    np.testing.assert_array_equal(g.to_dense(), [[0, 1], [2, 0]])
    with pytest.raises(AttributeError, match="CsrGradient is immutable; cannot set 'shape'"):
        g.shape = (4, 1)


MALFORMED_CSR = [
    ([0, 1, 2], [0, 1], [1.0, 1.0], (3, 2), ValueError, r"row_offsets must have rows \+ 1 = 4 entries, got 3"),
    ([1, 1, 2], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[0\] must be 0, got 1"),
    ([0, 2, 1], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[2\] = 1 < row_offsets\[1\] = 2"),
    ([0, 1, 1], [0, 1], [1.0, 1.0], (2, 2), ValueError, r"row_offsets\[-1\] = 1 must equal nnz = 2"),
    ([0, 2, 2], [1, 0], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = 0 follows col_indices\[0\] = 1"),
    ([0, 2, 2], [1, 1], [1.0, 1.0], (2, 2), ValueError, r"\(duplicate"),
    ([0, 1, 2], [0, 2], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = 2 is out of range \[0, cols = 2\)"),
    ([0, 1, 2], [0, -1], [1.0, 1.0], (2, 2), ValueError, r"col_indices\[1\] = -1 is out of range"),
    (
        [0, 1, 2],
        np.array([0, 2**64 - 1], np.uint64),
        [1.0, 1.0],
        (2, 2),
        ValueError,
        r"col_indices\[1\] = 18446744073709551615 does not fit in int64",
    ),
    ([0, 1, 2], [0, 1], [1.0], (2, 2), ValueError, "col_indices has 2 entries but values has 1"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], (2,), ValueError, r"shape must be a \(rows, cols\) pair, got \(2,\)"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], (2, 2, 1), ValueError, r"shape must be a \(rows, cols\) pair"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], (2, -2), ValueError, r"shape\[1\] must be non-negative"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], None, TypeError, r"shape must be a \(rows, cols\) tuple, got NoneType"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], {2: 2}, TypeError, "shape must be a .* got dict"),
    ([0, 1, 2], [0, 1], [1.0, 1.0], (2.0, 2), TypeError, r"shape\[0\] must be a non-negative int"),
    ([0.0, 1.0, 2.0], [0, 1], [1.0, 1.0], (2, 2), TypeError, "row_offsets must be an integer array"),
    ([0, 1, 2], [0.0, 1.0], [1.0, 1.0], (2, 2), TypeError, "col_indices must be an integer array"),
    ([0, 1, 2], [0, 1], [1, 1], (2, 2), TypeError, "values must be a floating point array"),
    (None, [0, 1], [1.0, 1.0], (2, 2), TypeError, "row_offsets must be an array of numbers, got NoneType"),
    (
        [0, 1, 2],
        (c for c in [0, 1]),
        [1.0, 1.0],
        (2, 2),
        TypeError,
        "col_indices must be an array of numbers, got generator",
    ),
    ([0, 1, 2], [0, 1], {0: 1.0}, (2, 2), TypeError, "values must be an array of numbers, got dict"),
]


@pytest.mark.parametrize(
    ("offsets", "cols", "values", "shape", "exc", "match"), MALFORMED_CSR, ids=message_ids(MALFORMED_CSR)
)
def test_csr_rejects_malformed_input(offsets, cols, values, shape, exc, match):
    """Structure, order, range, dtype and kind of object: each refusal names the field and position."""
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
    with pytest.raises(TypeError, match="coo must be a CooGradient, got NoneType"):
        so.CsrGradient.from_coo(None, (2, 2))
    with pytest.raises(ValueError, match=r"coo.dim = 5 does not equal rows \* cols = 2 \* 2 = 4"):
        so.CsrGradient.from_coo(so.CooGradient([0], [1.0], 5), (2, 2))
    with pytest.raises(TypeError, match=r"shape must be a \(rows, cols\) tuple"):
        so.CsrGradient.from_coo(so.CooGradient([0], [1.0], 4), None)


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
    with pytest.raises(ValueError, match="row_grads must be 2-D"):
        so.CsrGradient.from_rows([0, 1], np.ones(2), 4)
    with pytest.raises(TypeError, match="row_ids must be an array of numbers, got NoneType"):
        so.CsrGradient.from_rows(None, np.ones((1, 2)), 4)
    with pytest.raises(TypeError, match="num_rows must be a non-negative int"):
        so.CsrGradient.from_rows([0], np.ones((1, 2)), 4.0)


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
    with pytest.raises(TypeError, match="x must be an array of numbers, got NoneType"):
        so.CsrGradient.from_dense(None)


def test_round_trip_beyond_2_pow_32_coordinates():
    """A 100000 x 100000 table (10**10 coordinates): linear indices are exact int64 both ways."""
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
    """CSR -> COO -> CSR, CSR -> its own arrays -> CSR, and dense round trips are lossless."""
    coo = csr.to_coo()
    again = so.CsrGradient.from_coo(coo, csr.shape)
    rebuilt = so.CsrGradient(csr.row_offsets, csr.col_indices, csr.values, csr.shape)
    for other in (again, rebuilt):
        np.testing.assert_array_equal(other.row_offsets, csr.row_offsets)
        np.testing.assert_array_equal(other.col_indices, csr.col_indices)
        np.testing.assert_array_equal(other.values, csr.values)
    np.testing.assert_array_equal(coo.to_dense().reshape(csr.shape), csr.to_dense())
    np.testing.assert_array_equal(so.CsrGradient.from_dense(csr.to_dense()).to_dense(), csr.to_dense())


@given(rows=st.integers(1, 30), cols=st.integers(1, 6), data=st.data())
def test_from_rows_equals_dense_sum(rows, cols, data):
    """``from_rows`` equals ``np.add.at`` of the rows; its lazily built views validate as a CSR from scratch."""
    n = data.draw(st.integers(0, 40))
    ids = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n)), dtype=np.int64)
    grads = np.array(data.draw(st.lists(st.integers(-5, 5).map(float), min_size=n * cols, max_size=n * cols))).reshape(
        n, cols
    )
    g = so.CsrGradient.from_rows(ids, grads, rows)
    dense = np.zeros((rows, cols))
    np.add.at(dense, ids, grads)
    np.testing.assert_array_equal(g.to_dense(), dense)
    np.testing.assert_array_equal(g.touched_rows, np.unique(ids))
    assert g.full_rows
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


@pytest.mark.parametrize("repeats", [1, 2, 3, 5, 17])
@pytest.mark.parametrize("cols", [1, 3])
def test_coalescing_keeps_negative_zero(repeats, cols):
    """A run of ``-0.0`` sums to ``-0.0`` (``np.add.at`` into zeros would give +0.0); ``-0.0 + 0.0`` is ``+0.0``.

    Pinned for runs of every length class, 1-D values and table rows alike.
    """
    ids = np.array([4] * repeats + [1])
    g = so.CooGradient.from_unsorted(ids, np.full(ids.size, -0.0), 6)
    assert g.indices.tolist() == [1, 4]
    assert np.signbit(g.values).all() and (g.values == 0).all()
    r = so.CsrGradient.from_rows(ids, np.full((ids.size, cols), -0.0), 6)
    assert np.signbit(r.values).all()
    mixed = so.CooGradient.from_unsorted([2, 2], [-0.0, 0.0], 3)
    assert mixed.values.tolist() == [0.0] and not np.signbit(mixed.values[0])


@pytest.mark.parametrize("cols", [1, 3])
@pytest.mark.parametrize("lengths", [(3, 4), (5, 8, 6), (9, 16)])
def test_padded_runs_of_negative_zero_stay_negative(lengths, cols):
    """Runs of different lengths in one power-of-two class are padded to the longest: the pad must be ``-0.0``.

    A ``+0.0`` pad would turn the shorter runs' ``-0.0`` sums into ``+0.0``
    (``-0.0 + 0.0 == +0.0``); the test above has one run per class, which is never padded.
    """
    ids = np.concatenate([np.full(n, row) for row, n in enumerate(lengths)])
    g = so.CooGradient.from_unsorted(ids, np.full(ids.size, -0.0), len(lengths))
    assert np.signbit(g.values).all() and (g.values == 0).all()
    r = so.CsrGradient.from_rows(ids, np.full((ids.size, cols), -0.0), len(lengths))
    assert np.signbit(r.values).all()


@given(rows=st.integers(2**16, 2**20), cols=st.integers(2**16 + 1, 2**20), data=st.data())
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


# ---------------------------------------------------------------- immutability for good


def every_gradient():
    """One gradient from each constructor (COO and CSR), incomplete and whole rows."""
    return {
        "coo": so.CooGradient([1, 3], [1.0, -2.0], 5),
        "coo-from_unsorted": so.CooGradient.from_unsorted([3, 1, 3], [1.0, 2.0, 3.0], 5),
        "coo-from_dense": so.CooGradient.from_dense(np.array([0.0, 1.0, 0.0, 2.0])),
        "coo-to_coo": so.CsrGradient([0, 1, 3], [1, 0, 1], [1.0, 2.0, 3.0], (2, 2)).to_coo(),
        "csr": so.CsrGradient([0, 1, 1, 3], [2, 0, 1], [1.0, 2.0, 3.0], (3, 3)),
        "csr-from_rows": so.CsrGradient.from_rows([2, 0, 2], np.ones((3, 2), np.float32), 4),
        "csr-from_coo": so.CsrGradient.from_coo(so.CooGradient([1, 6, 7], [1.0, 2.0, 3.0], 9), (3, 3)),
        "csr-from_dense": so.CsrGradient.from_dense(np.array([[0.0, 1.0], [2.0, 0.0]])),
    }


def stored_arrays(g):
    if isinstance(g, so.CooGradient):
        return {"indices": g.indices, "values": g.values}
    return {
        "row_offsets": g.row_offsets,
        "col_indices": g.col_indices,
        "values": g.values,
        "touched_rows": g.touched_rows,
    }


@pytest.mark.parametrize("label", list(every_gradient()))
def test_stored_arrays_cannot_be_made_writeable(label):
    """``setflags(write=True)`` raises on every stored array, and on views of them; writes raise too.

    (Before, ``g.indices.setflags(write=True)`` succeeded and the canonical form
    could be broken after validation.)
    """
    g = every_gradient()[label]
    snapshot = pickle.dumps(g)
    for name, a in stored_arrays(g).items():
        for view in (a, a.view(), a[::-1], a.reshape(-1), np.asarray(a)):
            with pytest.raises(ValueError):
                view.setflags(write=True)
            if view.size:
                with pytest.raises(ValueError):
                    view[0] = view[-1]
    assert same(pickle.loads(snapshot), g)


# ---------------------------------------------------------------- copies, pickles, processes


@pytest.mark.parametrize("label", list(every_gradient()))
def test_copy_deepcopy_and_pickle_every_protocol(label):
    """``copy.copy``, ``copy.deepcopy`` and pickle protocols 2..5 give equal gradients with read-only int64 arrays."""
    g = every_gradient()[label]
    assert same(copy.copy(g), g) and same(copy.deepcopy(g), g)
    assert same(copy.deepcopy([g, {"g": g}])[1]["g"], g)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(g, protocol=protocol))
        assert same(back, g), protocol
        for name, a in stored_arrays(back).items():
            with pytest.raises(ValueError):
                a.setflags(write=True)
            if name != "values":
                assert a.dtype == np.int64


def test_pickle_of_a_huge_table_gradient_is_o_nnz():
    """A ``from_rows`` gradient of a 10**6-row table pickles in O(nnz) bytes, not O(rows) (8 MB of offsets).

    True also after ``row_offsets`` has been read (materialised) once.
    """
    g = so.CsrGradient.from_rows([999_999, 5, 5], np.ones((3, 4)), 1_000_000)
    small = len(pickle.dumps(g, protocol=5))
    assert small < 2048
    assert g.row_offsets.shape == (1_000_001,)
    assert len(pickle.dumps(g, protocol=5)) == small
    back = pickle.loads(pickle.dumps(g))
    assert same(back, g) and back.shape == (1_000_000, 4) and back.full_rows
    assert len(pickle.dumps(back, protocol=5)) < 2048  # the unpickled gradient is O(nnz) too
    np.testing.assert_array_equal(back.row_offsets, g.row_offsets)


def test_gradients_cross_a_process_boundary():
    """A gradient built in another process (spawned), and one sent there and back, arrive with equal contents."""
    coo = so.CooGradient([2, 7], np.array([1.5, -0.0], np.float32), 9)
    csr = so.CsrGradient.from_rows([3, 1, 3], np.arange(6.0).reshape(3, 2), 10**6)
    partial = so.CsrGradient([0, 1, 1, 3], [2, 0, 1], [1.0, 2.0, 3.0], (3, 3))
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        echoed = [pool.submit(copy.deepcopy, g) for g in (coo, csr, partial)]
        built = pool.submit(so.CsrGradient.from_rows, [3, 1, 3], np.arange(6.0).reshape(3, 2), 10**6)
        results = [f.result(timeout=60) for f in echoed]
        remote = built.result(timeout=60)
    for sent, back in zip((coo, csr, partial), results):
        assert same(back, sent)
    assert same(remote, csr)


class _Tampered:
    """Pickles as ``reconstructor(*args)``: a gradient's own pickle payload with edited parts."""

    def __init__(self, reconstructor, args):
        self.reduced = (reconstructor, args)

    def __reduce__(self):
        return self.reduced


def _edit(g, position, value):
    reconstructor, args = g.__reduce__()
    args = list(args)
    args[position] = value
    return pickle.dumps(_Tampered(reconstructor, tuple(args)))


TAMPERED = [
    (lambda: so.CooGradient([1, 3], [1.0, 2.0], 5), 0, np.array([3, 1]), r"indices\[1\] = 1 follows indices\[0\] = 3"),
    (lambda: so.CooGradient([1, 3], [1.0, 2.0], 5), 0, np.array([1, 5]), r"indices\[1\] = 5 is out of range"),
    (lambda: so.CooGradient([1, 3], [1.0, 2.0], 5), 1, np.array([1.0]), "indices has 2 entries but values has 1"),
    (lambda: so.CooGradient([1, 3], [1.0, 2.0], 5), 2, -1, "dim must be non-negative"),
    (lambda: so.CooGradient([1, 3], [1.0, 2.0], 5), 0, np.array([1, 2**63], np.uint64), "does not fit in int64"),
    (
        lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4),
        1,
        np.array([3, 1]),
        "rows must be strictly ascending",
    ),
    (
        lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4),
        1,
        np.array([1, 4]),
        r"rows\[1\] = 4 is out of range",
    ),
    (
        lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4),
        2,
        np.array([0, 1, 4]),
        "complete rows need cols entries each",
    ),
    (lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4), 2, np.array([0, 3, 2]), "starts"),
    (lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4), 0, (2**62, 4), "must fit in int64"),
    (lambda: so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4), 4, np.ones(3), "starts|complete rows"),
    (
        lambda: so.CsrGradient([0, 2, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0], (3, 2)),
        3,
        np.array([1, 0, 1]),
        r"col_indices\[1\] = 0 follows col_indices\[0\] = 1",
    ),
    (
        lambda: so.CsrGradient([0, 2, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0], (3, 2)),
        3,
        np.array([0, 1, 2]),
        r"col_indices\[2\] = 2 is out of range",
    ),
    (
        lambda: so.CsrGradient([0, 2, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0], (3, 2)),
        3,
        np.array([0, 1]),
        "col_indices has 2 entries but values has 3",
    ),
]


@pytest.mark.parametrize(("make", "position", "value", "match"), TAMPERED, ids=message_ids(TAMPERED))
def test_tampered_pickle_payload_is_refused(make, position, value, match):
    """Unpickling re-validates: a payload with invalid parts raises ``ValueError`` instead of building a broken gradient."""
    payload = _edit(make(), position, value)
    with pytest.raises(ValueError, match=match):
        pickle.loads(payload)


def test_tampered_payload_with_wrong_kinds_is_a_type_error():
    g = so.CsrGradient.from_rows([1, 3], np.ones((2, 2)), 4)
    with pytest.raises(TypeError):
        pickle.loads(_edit(g, 3, {"cols": 1}))
    with pytest.raises(TypeError):
        pickle.loads(_edit(so.CooGradient([1], [1.0], 5), 1, None))
