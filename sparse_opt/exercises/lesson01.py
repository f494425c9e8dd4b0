"""Lesson 01 exercises (sparse gradients): coalescing duplicate ids, and COO -> CSR.

References: :func:`sparse_opt._coalesce.coalesce` (what
``CooGradient.from_unsorted`` and ``CsrGradient.from_rows`` run) and
:meth:`sparse_opt.CsrGradient.from_coo`.
"""

from __future__ import annotations

import numpy as np

from sparse_opt._coalesce import coalesce as kit_coalesce
from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source

# ---------------------------------------------------------------- coalesce


def _coalesce_reference(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return kit_coalesce(np.asarray(indices), np.asarray(values))


def _sums(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted unique indices, the summed values, and the position of each index's first appearance."""
    unique, first, inverse = np.unique(indices, return_index=True, return_inverse=True)
    summed = np.zeros((unique.size, *values.shape[1:]), dtype=values.dtype)
    np.add.at(summed, inverse, values)
    return unique.astype(np.int64), summed, first


def _overwritten(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unique, inverse = np.unique(indices, return_inverse=True)
    out = np.zeros((unique.size, *values.shape[1:]), dtype=values.dtype)
    out[inverse] = values  # one of the repeats wins
    return unique.astype(np.int64), out


def _first_kept(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unique, first = np.unique(indices, return_index=True)
    return unique.astype(np.int64), values[first]


def _sorted_not_merged(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(indices, kind="stable")
    return indices[order].astype(np.int64), values[order]


def _first_appearance_order(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unique, summed, first = _sums(indices, values)
    order = np.argsort(first)
    return unique[order], summed[order]


def _coalesce_cases() -> list[Case]:
    row_grads = np.array([[0.5, -1.0, 0.25], [1.0, 0.0, -0.5], [0.25, 0.5, 0.25], [-2.0, 1.5, 0.75]])
    cases = [
        Case("sorted, no duplicates", {"indices": np.array([1, 4, 6]), "values": np.array([0.5, -1.0, 2.0])}),
        Case("unsorted, no duplicates", {"indices": np.array([6, 1, 4]), "values": np.array([2.0, 0.5, -1.0])}),
        Case(
            "duplicates are summed",
            {"indices": np.array([7, 2, 7, 5, 2, 7]), "values": np.array([0.5, 1.0, 0.25, -1.0, 2.0, 0.125])},
        ),
        Case("one index four times", {"indices": np.array([3, 3, 3, 3]), "values": np.array([1.0, 2.0, 4.0, 8.0])}),
        Case("a single entry", {"indices": np.array([9]), "values": np.array([1.5])}),
        Case("no entries", {"indices": np.zeros(0, dtype=np.int64), "values": np.zeros(0)}),
        Case(
            "int32 indices (the result is int64)",
            {"indices": np.array([5, 1, 5], dtype=np.int32), "values": np.array([1.0, 2.0, 3.0])},
        ),
        Case("rows of an embedding lookup (2-D values)", {"indices": np.array([4, 1, 4, 0]), "values": row_grads}),
    ]
    for seed in range(1, 5):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 20))
        shape = (n, 2) if seed == 4 else (n,)
        cases.append(
            Case(
                f"random (seed {seed})",
                {"indices": rng.integers(0, 12, size=n), "values": rng.standard_normal(shape)},
            )
        )
    return cases


COALESCE = Exercise(
    name="coalesce",
    lesson="01",
    title="sort a coordinate list and sum the values of repeated indices",
    statement=source(
        """
        coalesce(indices, values) -> (unique_indices, summed_values)

        Coalesce a coordinate list, as PyTorch's Tensor.coalesce() and TensorFlow's
        IndexedSlices aggregation do before a non-linear update.

        indices : 1-D integer array, any order, repeats allowed, non-negative (any integer dtype)
        values  : float array with one entry (1-D) or one row (2-D) per index

        Return the distinct indices sorted ascending, as int64, and for each of them
        the sum of its values (the dtype and row shape of `values`), added in the
        order given. Do not modify the inputs.
        """
    ),
    reference=_coalesce_reference,
    cases=_coalesce_cases(),
    outputs=(Output("indices", dtype="int64"), Output("values")),
    solution_source=source(
        """
        def coalesce(indices, values):
            indices = np.asarray(indices, dtype=np.int64)
            values = np.asarray(values)
            unique, inverse = np.unique(indices, return_inverse=True)  # sorted; where each entry goes
            summed = np.zeros((unique.size, *values.shape[1:]), dtype=values.dtype)
            np.add.at(summed, inverse, values)  # adds every entry, repeats included, in order
            return unique, summed
        """
    ),
    stub_source=source(
        """
        def coalesce(indices, values):
            \"\"\"Sorted unique int64 indices, and the values of repeated indices summed.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "every distinct index must appear once, sorted, with the sum of its values; "
        "np.unique gives the sorted distinct indices.",
        "np.unique(indices, return_inverse=True) also returns, for each entry, the position of its index "
        "among the unique ones.",
        "make zeros of shape (len(unique), *values.shape[1:]) and add each value at its position with "
        "np.add.at(summed, inverse, values); `summed[inverse] += values` would keep only one of the repeats.",
    ),
    diagnoses=(
        Diagnosis(
            "duplicates were overwritten instead of summed: `out[inverse] = values` (or `+=`) keeps one value per "
            "index; np.add.at(out, inverse, values) adds them all",
            _overwritten,
        ),
        Diagnosis(
            "only the first value of each repeated index was kept: the values of a repeated index must be summed",
            _first_kept,
        ),
        Diagnosis(
            "the entries were sorted but repeated indices were not merged: each distinct index must appear once",
            _sorted_not_merged,
        ),
        Diagnosis(
            "the indices must come out sorted ascending: yours keep the order in which they first appear",
            _first_appearance_order,
        ),
    ),
)

# ---------------------------------------------------------------- coo_to_csr


def _coo_to_csr_reference(
    linear_indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = shape
    csr = CsrGradient.from_coo(CooGradient(linear_indices, values, rows * cols), (rows, cols))
    return csr.row_offsets, csr.col_indices, csr.values


def _csr_from(row: np.ndarray, col: np.ndarray, values: np.ndarray, rows: int) -> tuple[np.ndarray, ...]:
    """CSR arrays from each entry's row and column, however wrong those are (no error for a row >= rows)."""
    return np.concatenate([[0], np.cumsum(np.bincount(row, minlength=rows))]).astype(np.int64), col, values


def _swapped(linear_indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    rows, cols = shape
    return _csr_from(linear_indices % cols, linear_indices // cols, values, rows)


def _divided_by_rows(linear_indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    rows, _ = shape
    return _csr_from(linear_indices // rows, linear_indices % rows, values, rows)


def _no_leading_zero(linear_indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    rows, cols = shape
    row, col = np.divmod(linear_indices, cols)
    return np.cumsum(np.bincount(row, minlength=rows)), col, values


def _touched_rows_only(
    linear_indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]
) -> tuple[np.ndarray, ...]:
    _, cols = shape
    row, col = np.divmod(linear_indices, cols)
    _, counts = np.unique(row, return_counts=True)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), col, values


def _coo_to_csr_cases() -> list[Case]:
    def case(name: str, indices: list[int], shape: tuple[int, int]) -> Case:
        idx = np.array(indices, dtype=np.int64)
        vals = np.arange(1, idx.size + 1) * 0.5
        return Case(name, {"linear_indices": idx, "values": vals, "shape": shape})

    cases = [
        case("one entry per row", [1, 6, 11], (3, 4)),
        case("an empty row in the middle", [0, 2, 9, 10], (4, 3)),
        case("first and last column of each row", [0, 4, 5, 9, 14], (3, 5)),
        case("no entries", [], (3, 2)),
        case("only the last row", [8, 9], (5, 2)),
        case("a one-column table", [0, 2, 3], (4, 1)),
        case("a table wider than tall", [0, 5, 6, 11], (2, 6)),
        case("a 100000 x 100000 table: linear indices beyond 2**32", [5, 10**10 - 1], (100_000, 100_000)),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        rows, cols = int(rng.integers(2, 8)), int(rng.integers(2, 7))
        nnz = int(rng.integers(1, rows * cols))
        indices = np.sort(rng.choice(rows * cols, size=nnz, replace=False))
        cases.append(
            Case(
                f"random (seed {seed})",
                {"linear_indices": indices.astype(np.int64), "values": rng.standard_normal(nnz), "shape": (rows, cols)},
            )
        )
    return cases


COO_TO_CSR = Exercise(
    name="coo_to_csr",
    lesson="01",
    title="fold a COO gradient over a flattened table into CSR",
    statement=source(
        """
        coo_to_csr(linear_indices, values, shape) -> (row_offsets, col_indices, values)

        Convert a canonical COO gradient over the flattened (rows, cols) table into
        CSR, as CsrGradient.from_coo does.

        linear_indices : 1-D int64 array, strictly ascending, each row * cols + col
        values         : 1-D float array, one value per index
        shape          : (rows, cols)

        Return row_offsets (int64, rows + 1 entries: row r owns entries
        row_offsets[r]:row_offsets[r + 1]; an empty row repeats the offset),
        col_indices (int64, the column of each entry) and the values, in COO order.
        """
    ),
    reference=_coo_to_csr_reference,
    cases=_coo_to_csr_cases(),
    outputs=(Output("row_offsets", dtype="int64"), Output("col_indices", dtype="int64"), Output("values")),
    solution_source=source(
        """
        def coo_to_csr(linear_indices, values, shape):
            rows, cols = shape
            row, col = np.divmod(np.asarray(linear_indices, dtype=np.int64), cols)  # index = row * cols + col
            counts = np.bincount(row, minlength=rows)  # entries per row, empty rows included
            row_offsets = np.zeros(rows + 1, dtype=np.int64)
            row_offsets[1:] = np.cumsum(counts)
            return row_offsets, col, np.asarray(values).copy()
        """
    ),
    stub_source=source(
        """
        def coo_to_csr(linear_indices, values, shape):
            \"\"\"CSR (row_offsets, col_indices, values) of a COO gradient over the flattened table.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "the linear index of (row, col) is row * cols + col, so np.divmod(linear_indices, cols) gives back each "
        "entry's row and column; ascending linear indices are already CSR's order (row by row, columns ascending).",
        "row_offsets[r] is the number of entries in the rows before r: count the entries of every row, empty rows "
        "included, with np.bincount(row, minlength=rows).",
        "row_offsets has rows + 1 entries: a 0, then np.cumsum(counts). Return (row_offsets, col, values), both "
        "index arrays int64.",
    ),
    diagnoses=(
        Diagnosis(
            "row and column are swapped: the row of linear index i is i // cols and its column i % cols",
            _swapped,
        ),
        Diagnosis(
            "the linear index is row * cols + col: divide by cols (shape[1]), not by rows (shape[0])",
            _divided_by_rows,
        ),
        Diagnosis(
            "row_offsets needs rows + 1 entries starting at 0: a 0, then the running count of entries per row",
            _no_leading_zero,
        ),
        Diagnosis(
            "every row needs its offset, empty rows too (they repeat the previous one): count the entries per row "
            "with np.bincount(row, minlength=rows), not only the rows that occur",
            _touched_rows_only,
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (COALESCE, COO_TO_CSR)
