"""Lesson 05 exercises (Adafactor): the factored second moment, and the row and column statistics.

References: :func:`sparse_opt.adafactor.factored_second_moment` and
:func:`sparse_opt.adafactor.adafactor_update` (``torch.optim.Adafactor``'s
semantics), whose new ``row_var`` and ``col_var`` are the second exercise's
answer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt.adafactor import adafactor_update, factored_second_moment
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source

_EPS = float(np.finfo(np.float64).eps)

# ---------------------------------------------------------------- factored_second_moment


def _factored_reference(row_var: np.ndarray, col_var: np.ndarray, eps1: float) -> np.ndarray:
    return factored_second_moment(np.asarray(row_var, dtype=np.float64), np.asarray(col_var, dtype=np.float64), eps1)


def _flawed_factored(flaw: str) -> Callable[..., np.ndarray]:
    def factored(row_var: np.ndarray, col_var: np.ndarray, eps1: float) -> np.ndarray:
        outer = row_var @ col_var
        if flaw == "unnormalised":
            return outer
        if flaw == "col_mean":
            return outer / np.maximum(col_var.mean(axis=-1, keepdims=True), eps1)
        if flaw == "whole_mean":
            return outer / max(float(row_var.mean()), eps1)
        scale = row_var.sum(axis=-2, keepdims=True) if flaw == "sum" else row_var.mean(axis=-2, keepdims=True)
        if flaw == "added":
            return outer / (scale + eps1)
        if flaw == "no_floor":
            return outer / scale
        return outer / np.maximum(scale, eps1)

    return factored


def _factored_cases() -> list[Case]:
    def case(name: str, row: object, col: object, eps1: float = _EPS) -> Case:
        return Case(name, {"row_var": np.array(row, dtype=np.float64), "col_var": np.array(col, dtype=np.float64),
                           "eps1": eps1})

    cases = [
        case("a 2 x 3 matrix", [[1.0], [4.0]], [[2.0, 3.0, 5.0]]),
        case("a row factor as small as eps1: it is a floor, not a term", [[1e-10], [1e-10]], [[2.0, 4.0]], 1e-10),
        case("a row factor far below eps1: the floor decides", [[1e-20], [3e-20]], [[2.0, 4.0, 1.0]], 1e-10),
        case("one row (R = 1)", [[0.5]], [[1.0, 2.0, 3.0, 4.0]]),
        case("one column (C = 1)", [[1.0], [2.0], [6.0]], [[3.0]]),
        case("a batch of two matrices: (2, R, 1) and (2, 1, C)", [[[1.0], [3.0]], [[10.0], [30.0]]],
             [[[1.0, 2.0]], [[0.5, 0.25]]]),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        rows, cols = int(rng.integers(2, 6)), int(rng.integers(2, 6))
        cases.append(case(f"random (seed {seed})", rng.uniform(0.1, 2.0, (rows, 1)), rng.uniform(0.1, 2.0, (1, cols))))
    return cases


FACTORED_SECOND_MOMENT = Exercise(
    name="factored_second_moment",
    lesson="05",
    title="Adafactor's estimate of the second moment from its row and column factors",
    statement=source(
        """
        factored_second_moment(row_var, col_var, eps1) -> V

        torch.optim.Adafactor's second-moment estimate of a matrix from its two
        factors: the outer product, normalised by the mean of the row factor,
        floored by eps1:

            V = row_var @ col_var / max(mean(row_var over the rows), eps1)

        row_var : float array of shape (..., R, 1), the running mean of g**2 over each row
        col_var : float array of shape (..., 1, C), the running mean of g**2 over each column
        eps1    : float >= 0

        Leading dimensions are a batch of matrices, each with its own factors and
        its own mean. Return V, shape (..., R, C).
        """
    ),
    reference=_factored_reference,
    cases=_factored_cases(),
    outputs=(Output("V"),),
    solution_source=source(
        """
        def factored_second_moment(row_var, col_var, eps1):
            outer = row_var @ col_var  # (..., R, 1) @ (..., 1, C) -> (..., R, C)
            # both factors carry the scale of g**2: divide it out once, with the
            # mean of the row factor of each matrix, floored by eps1
            scale = np.maximum(row_var.mean(axis=-2, keepdims=True), eps1)
            return outer / scale
        """
    ),
    stub_source=source(
        """
        def factored_second_moment(row_var, col_var, eps1):
            \"\"\"V = row_var @ col_var / max(mean(row_var over the rows), eps1).\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "if g**2 were exactly a_i * b_j, row_var would be a_i * mean(b) and col_var mean(a) * b_j: their product "
        "has the scale of g**2 twice.",
        "divide row_var @ col_var by the mean of the row factor (which is mean(a) * mean(b)); take that mean per "
        "matrix, over axis -2.",
        "np.maximum(row_var.mean(axis=-2, keepdims=True), eps1) is the divisor: eps1 is a floor, not added.",
    ),
    diagnoses=(
        Diagnosis(
            "R @ C must be divided by the mean of the row factor: each factor alone carries the scale of g**2",
            _flawed_factored("unnormalised"),
        ),
        Diagnosis(
            "V is normalised by the mean of the column factor; torch divides by the mean of the row factor, "
            "mean(row_var, axis=-2)",
            _flawed_factored("col_mean"),
        ),
        Diagnosis("divide by the mean of the row factor, not its sum", _flawed_factored("sum")),
        Diagnosis(
            "eps1 is a floor, max(mean(row_var), eps1), not added to the mean (torch's form; the paper adds its "
            "eps to g**2 instead)",
            _flawed_factored("added"),
        ),
        Diagnosis(
            "the mean of the row factor must be floored by eps1: max(mean(row_var, axis=-2), eps1)",
            _flawed_factored("no_floor"),
        ),
        Diagnosis(
            "take the mean over the rows of each matrix (axis=-2, keepdims=True), not over the whole batch",
            _flawed_factored("whole_mean"),
        ),
    ),
)

# ---------------------------------------------------------------- adafactor_row_col_update


def _row_col_reference(
    row_var: np.ndarray, col_var: np.ndarray, grad: np.ndarray, step: int, beta2_decay: float
) -> tuple[np.ndarray, np.ndarray]:
    grad = np.array(grad, dtype=np.float64)
    state = {"row_var": np.array(row_var, dtype=np.float64), "col_var": np.array(col_var, dtype=np.float64)}
    _, new = adafactor_update(np.ones_like(grad), grad, step, state, lr=0.01, beta2_decay=beta2_decay, eps1=_EPS,
                              eps2=1e-3, d=1.0, weight_decay=0.0, maximize=False)
    return new["row_var"], new["col_var"]


def _flawed_row_col(flaw: str) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def update(row_var: np.ndarray, col_var: np.ndarray, grad: np.ndarray, step: int,
               beta2_decay: float) -> tuple[np.ndarray, np.ndarray]:
        weight = step**beta2_decay  # 1 - beta2_t
        if flaw == "swapped_weights":
            weight = 1 - weight
        stat = grad if flaw == "mean_of_g" else grad**2
        reduce = np.sum if flaw == "sum" else np.mean
        axes = {"swapped_axes": (-2, -1), "fixed_axes": (1, 0)}.get(flaw, (-1, -2))
        keep = flaw != "no_keepdims"
        row = reduce(stat, axis=axes[0], keepdims=keep)
        col = reduce(stat, axis=axes[1], keepdims=keep)
        return row_var + weight * (row - row_var), col_var + weight * (col - col_var)

    return update


def _row_col_cases() -> list[Case]:
    def case(name: str, grad: np.ndarray, step: int, beta2_decay: float = -0.8, fresh: bool = False) -> Case:
        shape = grad.shape
        r = np.random.default_rng(shape[-1] + 10 * shape[-2] + step)
        row = np.zeros((*shape[:-1], 1)) if fresh else r.uniform(0.1, 1.0, (*shape[:-1], 1))
        col = np.zeros((*shape[:-2], 1, shape[-1])) if fresh else r.uniform(0.1, 1.0, (*shape[:-2], 1, shape[-1]))
        return Case(name, {"row_var": row, "col_var": col, "grad": grad, "step": step, "beta2_decay": beta2_decay})

    g23 = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
    cases = [
        case("the first step replaces the zeros (1 - beta2_t = 1)", g23, 1, fresh=True),
        case("step 10 with beta2_decay = -0.8", g23, 10),
        case("beta2_decay = 0: the statistics are replaced at every step", g23, 5, beta2_decay=0.0),
        case("a square gradient", np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 3.0], [0.0, 0.0, 1.0]]), 4),
        case("one row", np.array([[0.5, -1.0, 2.0, 1.0]]), 3),
        case("a batch of two matrices (2, R, C)", np.stack([g23, 2 * g23[::-1]]), 6),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        shape = (int(rng.integers(2, 5)), int(rng.integers(2, 6)))
        cases.append(case(f"random (seed {seed})", rng.standard_normal(shape), int(rng.integers(1, 100)),
                          beta2_decay=float(rng.choice([-0.8, -0.5]))))
    return cases


ADAFACTOR_ROW_COL_UPDATE = Exercise(
    name="adafactor_row_col_update",
    lesson="05",
    title="Adafactor's running row and column means of g**2",
    statement=source(
        """
        adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay) -> (row_var, col_var)

        The two factors torch.optim.Adafactor keeps for a matrix gradient, updated
        at step `step` (1 on the first step):

            1 - beta2_t = step ** beta2_decay
            row_var = beta2_t * row_var + (1 - beta2_t) * mean(grad**2 over the last axis)   (..., R, 1)
            col_var = beta2_t * col_var + (1 - beta2_t) * mean(grad**2 over axis -2)         (..., 1, C)

        (torch writes it row_var.lerp_(mean, 1 - beta2_t).)

        row_var : float array (..., R, 1);  col_var : float array (..., 1, C)
        grad    : float array (..., R, C); leading dimensions are a batch of matrices
        step    : int >= 1;  beta2_decay : float <= 0

        Return the new (row_var, col_var) as new arrays; do not modify the inputs.
        """
    ),
    reference=_row_col_reference,
    cases=_row_col_cases(),
    outputs=(Output("row_var"), Output("col_var")),
    solution_source=source(
        """
        def adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay):
            weight = step**beta2_decay  # 1 - beta2_t: 1 on the first step, then shrinking
            row_mean = np.mean(grad**2, axis=-1, keepdims=True)  # (..., R, 1)
            col_mean = np.mean(grad**2, axis=-2, keepdims=True)  # (..., 1, C)
            row_var = row_var + weight * (row_mean - row_var)  # lerp towards the new statistic
            col_var = col_var + weight * (col_mean - col_var)
            return row_var, col_var
        """
    ),
    stub_source=source(
        """
        def adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay):
            \"\"\"The new (row_var, col_var): running means of grad**2 over each row and each column.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "the row factor has one number per row: the mean of grad**2 along that row, i.e. over the last axis; "
        "the column factor one per column, over axis -2.",
        "keep the reduced axis (keepdims=True), so the shapes are (..., R, 1) and (..., 1, C) like the state.",
        "the new statistic gets the weight step**beta2_decay (that is 1 - beta2_t): "
        "new = old + weight * (stat - old).",
    ),
    diagnoses=(
        Diagnosis(
            "the new statistic gets the weight 1 - beta2_t = step**beta2_decay and the old one beta2_t; yours "
            "swaps them",
            _flawed_row_col("swapped_weights"),
        ),
        Diagnosis(
            "the row factor averages g**2 along each row, over the last axis (shape (..., R, 1)); the column "
            "factor over axis -2 (shape (..., 1, C)): yours swaps them",
            _flawed_row_col("swapped_axes"),
        ),
        Diagnosis("the factors average grad**2, not grad", _flawed_row_col("mean_of_g")),
        Diagnosis("the factors are means of grad**2, not sums", _flawed_row_col("sum")),
        Diagnosis(
            "keep the reduced axis (keepdims=True): the row factor has shape (..., R, 1), the column factor "
            "(..., 1, C)",
            _flawed_row_col("no_keepdims"),
        ),
        Diagnosis(
            "use the last two axes (axis=-1 for the row factor, axis=-2 for the column factor): leading axes "
            "are a batch of matrices",
            _flawed_row_col("fixed_axes"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (FACTORED_SECOND_MOMENT, ADAFACTOR_ROW_COL_UPDATE)
