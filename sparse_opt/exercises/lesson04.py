"""Lesson 04 exercises (divergence from dense Adam): measuring the drift, and a training step with catch-up.

``relative_divergence`` is the notebook's yardstick (``sparse_opt.demos.divergence``:
the distance from dense Adam's table relative to how far dense Adam moved);
``train_step`` is one step of the DENSE_EQUIVALENT embedding training loop the
contract describes (``opt.catch_up(ids)``, look up, loss and row gradients,
``opt.step(CsrGradient.from_rows(...))``), checked over whole seeded training
runs of a real :class:`~sparse_opt.SparseAdamTable`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparse_opt.csr import CsrGradient
from sparse_opt.exercises._compare import Output, as_numbers
from sparse_opt.exercises._core import AnswerError, Case, Diagnosis, Exercise, LearnerError, Outcome, source, unchanged
from sparse_opt.exercises._format import describe_type
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable

# ---------------------------------------------------------------- relative_divergence


def _frobenius(x: np.ndarray) -> float:
    return float(np.sqrt(np.sum(x * x)))


def _divergence_reference(
    lazy_table: np.ndarray, dense_table: np.ndarray, initial_table: np.ndarray, rows: np.ndarray
) -> float:
    return _frobenius(lazy_table[rows] - dense_table[rows]) / _frobenius(dense_table[rows] - initial_table[rows])


def _flawed_divergence(flaw: str) -> Callable[..., float]:
    def relative_divergence(lazy_table: np.ndarray, dense_table: np.ndarray, initial_table: np.ndarray,
                            rows: np.ndarray) -> float:
        if flaw == "all_rows":
            rows = np.arange(lazy_table.shape[0])
        lazy, dense, init = lazy_table[rows], dense_table[rows], initial_table[rows]
        if flaw == "per_row_mean":
            return float(np.mean(np.linalg.norm(lazy - dense, axis=1) / np.linalg.norm(dense - init, axis=1)))
        scale = {"dense_size": dense, "lazy_travel": lazy - init}.get(flaw, dense - init)
        if flaw == "absolute":
            return _frobenius(lazy - dense)
        if flaw == "squared":
            return float(np.sum((lazy - dense) ** 2) / np.sum((dense - init) ** 2))
        return _frobenius(lazy - dense) / _frobenius(scale)

    return relative_divergence


def _divergence_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    init = rng.standard_normal((6, 2))
    dense = init + 0.5 * rng.standard_normal((6, 2))
    lazy = init + 0.3 * (dense - init) + 0.1 * rng.standard_normal((6, 2))

    def case(name: str, lazy_table: np.ndarray, rows: list[int]) -> Case:
        return Case(name, {"lazy_table": lazy_table, "dense_table": dense, "initial_table": init,
                           "rows": np.array(rows, dtype=np.int64)})

    cases = [
        case("identical to dense Adam: divergence 0", dense.copy(), [0, 1, 2, 3, 4, 5]),
        case("all rows", lazy, [0, 1, 2, 3, 4, 5]),
        case("a lazy table that never moved: divergence 1", init.copy(), [0, 1, 2, 3, 4, 5]),
        case("a bucket of rows, in any order", lazy, [4, 1]),
        case("a single row", lazy, [3]),
    ]
    for seed in range(1, 4):
        r = np.random.default_rng(seed)
        rows, cols = int(r.integers(4, 9)), int(r.integers(1, 5))
        init_t = r.standard_normal((rows, cols))
        dense_t = init_t + r.standard_normal((rows, cols))
        lazy_t = init_t + r.uniform(0, 1, (rows, 1)) * (dense_t - init_t) + 0.1 * r.standard_normal((rows, cols))
        subset = np.sort(r.choice(rows, size=int(r.integers(2, rows)), replace=False))
        cases.append(Case(f"random (seed {seed})", {"lazy_table": lazy_t, "dense_table": dense_t,
                                                    "initial_table": init_t, "rows": subset.astype(np.int64)}))
    return cases


RELATIVE_DIVERGENCE = Exercise(
    name="relative_divergence",
    lesson="04",
    title="how far a lazy table is from dense Adam's, relative to dense Adam's journey",
    statement=source(
        """
        relative_divergence(lazy_table, dense_table, initial_table, rows) -> float

        The notebook's divergence, over a bucket of rows:

            ||lazy[rows] - dense[rows]||_F / ||dense[rows] - initial[rows]||_F

        the distance of the lazy table from dense Adam's, relative to how far dense
        Adam moved those rows from where all three started (0: identical to dense
        Adam; 1: as far as not having trained at all, in that direction).

        lazy_table, dense_table, initial_table : float arrays of shape (num_rows, dim)
        rows : 1-D int array of distinct row ids (dense Adam moved them)

        ||x||_F is the Frobenius norm, sqrt(sum(x**2)) over every entry. Return a float.
        """
    ),
    reference=_divergence_reference,
    cases=_divergence_cases(),
    outputs=(Output("divergence"),),
    solution_source=source(
        """
        def relative_divergence(lazy_table, dense_table, initial_table, rows):
            gap = lazy_table[rows] - dense_table[rows]  # where lazy is, seen from dense Adam
            journey = dense_table[rows] - initial_table[rows]  # how far dense Adam went
            return float(np.sqrt(np.sum(gap**2)) / np.sqrt(np.sum(journey**2)))
        """
    ),
    stub_source=source(
        """
        def relative_divergence(lazy_table, dense_table, initial_table, rows):
            \"\"\"||lazy - dense||_F / ||dense - initial||_F over the given rows.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "select the rows first (table[rows]); everything else uses only those rows.",
        "the numerator is the Frobenius norm of lazy - dense; the yardstick is how far dense Adam moved, "
        "dense - initial, not how big its table is.",
        "one ratio over all the selected entries: np.sqrt(np.sum(gap**2)) / np.sqrt(np.sum(journey**2)).",
    ),
    diagnoses=(
        Diagnosis(
            "the yardstick is how far dense Adam moved the rows, ||dense[rows] - initial[rows]||, not the size of "
            "its table ||dense[rows]||",
            _flawed_divergence("dense_size"),
        ),
        Diagnosis(
            "the yardstick is dense Adam's journey, ||dense[rows] - initial[rows]||, not the lazy table's",
            _flawed_divergence("lazy_travel"),
        ),
        Diagnosis(
            "the divergence is relative: divide ||lazy - dense|| by how far dense Adam moved the rows",
            _flawed_divergence("absolute"),
        ),
        Diagnosis(
            "the square roots are missing: a ratio of norms, not of squared norms", _flawed_divergence("squared")
        ),
        Diagnosis(
            "one ratio of Frobenius norms over all the rows, not the mean of per-row ratios",
            _flawed_divergence("per_row_mean"),
        ),
        Diagnosis("only the rows in `rows` count, not the whole table", _flawed_divergence("all_rows")),
    ),
)

# ---------------------------------------------------------------- train_step


class _WatchedAdamTable(SparseAdamTable):
    """A SparseAdamTable that remembers which rows each ``catch_up`` call brought current (None = all)."""

    def __init__(self, params: np.ndarray, config: SparseAdamConfig) -> None:
        super().__init__(params, config)
        self.caught_up: list[np.ndarray | None] = []

    def catch_up(self, index: object = None) -> None:
        self.caught_up.append(None if index is None else np.array(index, copy=True))
        super().catch_up(index)


def _train_step_reference(table: np.ndarray, opt: SparseAdamTable, ids: np.ndarray, targets: np.ndarray) -> float:
    opt.catch_up(ids)
    rows = table[ids]
    loss = 0.5 * float(np.sum((rows - targets) ** 2))
    opt.step(CsrGradient.from_rows(ids, rows - targets, table.shape[0]))
    return loss


def _as_loss(value: Any, step: int) -> np.ndarray:
    """The loss ``train_step`` returned, as a 0-d array of its dtype (an integer one as float64)."""
    loss = as_numbers(value)
    if loss is None or loss.ndim or loss.dtype.kind == "b":
        raise AnswerError(f"train_step should return the loss (a float), got {describe_type(value)} at step {step}")
    return loss.astype(np.float64) if loss.dtype.kind in "iu" else loss


def _run_training(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> Outcome:
    """Train a fresh DENSE_EQUIVALENT SparseAdamTable with ``fn`` on the case's batches.

    The output is the losses ``fn`` returned and the table after the run, every
    row brought current (so a dormant row compares with dense training's).
    """
    table = np.array(inputs["table"], dtype=np.float64)
    opt = _WatchedAdamTable(table, SparseAdamConfig(**inputs["config"], mode=LazyMode.DENSE_EQUIVALENT))
    losses = []
    inefficiency = None
    mutated: set[str] = set()
    for k, batch in enumerate(inputs["batches"].values(), start=1):
        given = {key: batch[key].copy() for key in ("ids", "targets")}
        opt.caught_up.clear()
        try:
            returned = fn(table, opt, given["ids"], given["targets"])
        except Exception as err:
            raise LearnerError(f"step {k}", err) from err
        losses.append(_as_loss(returned, k))
        mutated |= {key for key, value in given.items() if not unchanged(batch[key], value)}
        wanted = set(np.unique(batch["ids"]).tolist())
        if inefficiency is None and any(c is None or not set(np.unique(c).tolist()) <= wanted for c in opt.caught_up):
            inefficiency = (
                f"the values are right, but step {k} caught up rows the batch does not look up (catch_up() with no "
                "ids costs O(table) on every step): catch up only this batch's ids, opt.catch_up(ids)"
            )
    opt.catch_up()
    return Outcome((np.array(losses), table.copy()), None, tuple(sorted(mutated)), inefficiency)


def _flawed_train_step(flaw: str) -> Callable[..., float]:
    def train_step(table: np.ndarray, opt: SparseAdamTable, ids: np.ndarray, targets: np.ndarray) -> float:
        if flaw != "no_catch_up":
            opt.catch_up(ids)
        rows = table[ids]
        residual = rows - targets
        loss = 0.5 * float(np.sum(residual**2))
        grads = {"sign": -residual, "no_half": 2 * residual, "mean": residual / residual.size}.get(flaw, residual)
        step_ids = ids
        if flaw == "deduplicated":  # one gradient per distinct id, that of its first lookup
            step_ids, first = np.unique(ids, return_index=True)
            grads = grads[first]
        opt.step(CsrGradient.from_rows(step_ids, grads, table.shape[0]))
        if flaw == "loss_after":
            return 0.5 * float(np.sum((table[ids] - targets) ** 2))
        return {"no_half": 2 * loss, "mean": loss / residual.size}.get(flaw, loss)

    return train_step


def _batches(rng: np.random.Generator, id_lists: list[list[int]], cols: int) -> dict[str, dict[str, np.ndarray]]:
    """One batch per step, keyed "step 1", "step 2", ...: ids and targets (two decimals, no negative zeros)."""
    return {
        f"step {k}": {
            "ids": np.array(ids, dtype=np.int64),
            "targets": rng.standard_normal((len(ids), cols)).round(2) + 0.0,
        }
        for k, ids in enumerate(id_lists, start=1)
    }


def _train_step_cases() -> list[Case]:
    rng = np.random.default_rng(4)
    table = rng.standard_normal((6, 2)).round(2) + 0.0
    config = {"lr": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-3}

    def case(name: str, id_lists: list[list[int]], weight_decay: float = 0.0) -> Case:
        cfg = {**config, "weight_decay": weight_decay} if weight_decay else config
        return Case(name, {"table": table, "config": cfg, "batches": _batches(rng, id_lists, 2)})

    cases = [
        case("one step", [[1, 3]]),
        case("a repeated id in a batch", [[2, 2, 5]]),
        case("a row dormant for three steps, then looked up again", [[0, 4], [1], [1], [1], [0]]),
        case("weight decay: dormant rows shrink too", [[0, 4], [1], [1], [0, 4]], weight_decay=0.5),
    ]
    for seed in range(1, 3):
        r = np.random.default_rng(seed)
        id_lists = [r.integers(0, 6, size=int(r.integers(1, 4))).tolist() for _ in range(6)]
        cases.append(Case(f"random (seed {seed})", {"table": r.standard_normal((6, 2)).round(2) + 0.0, "config": config,
                                                   "batches": _batches(r, id_lists, 2)}))
    return cases


TRAIN_STEP = Exercise(
    name="train_step",
    lesson="04",
    title="one step of the DENSE_EQUIVALENT embedding training loop",
    statement=source(
        """
        train_step(table, opt, ids, targets) -> loss

        One step of lazy training that follows dense Adam exactly. `opt` is a
        SparseAdamTable over `table` in DENSE_EQUIVALENT mode, so a row that had no
        gradient for a while lags behind until it is caught up. The loss is

            loss = 0.5 * sum((table[ids] - targets)**2)

        over every looked-up entry (its gradient with respect to the looked-up rows
        is table[ids] - targets). Bring the batch's rows current, compute the loss
        and the row gradients, step the optimizer with the gradient of the table
        (CsrGradient.from_rows sums the gradients of a repeated id), and return the
        loss of the rows as they were before the step, as a float.

        table   : the (num_rows, dim) float64 table the optimizer updates in place
        opt     : sparse_opt.SparseAdamTable (mode DENSE_EQUIVALENT)
        ids     : 1-D int array of looked-up rows (repeats allowed)
        targets : float array of shape (len(ids), dim)

        The check trains a fresh optimizer with your function for a few steps and
        compares the losses and the final table with dense-equivalent training.
        """
    ),
    reference=_train_step_reference,
    cases=_train_step_cases(),
    outputs=(Output("losses", per_step=True), Output("table", axes=("row", "col"))),
    runner=_run_training,
    solution_source=source(
        """
        def train_step(table, opt, ids, targets):
            opt.catch_up(ids)  # the rows of this batch, as dense training holds them now
            rows = table[ids]
            residual = rows - targets
            loss = 0.5 * float(np.sum(residual**2))
            grad = so.CsrGradient.from_rows(ids, residual, table.shape[0])  # repeats summed
            opt.step(grad)
            return loss
        """
    ),
    stub_source=source(
        """
        def train_step(table, opt, ids, targets):
            \"\"\"Catch up, look up, loss and gradient, one optimizer step; return the loss.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "in DENSE_EQUIVALENT mode table[ids] is stale for a row that was dormant: call opt.catch_up(ids) "
        "before reading it.",
        "the gradient of 0.5 * sum((rows - targets)**2) with respect to the looked-up rows is rows - targets; "
        "so.CsrGradient.from_rows(ids, rows - targets, table.shape[0]) turns it into the table's gradient.",
        "compute the loss before opt.step(...) changes the table, and return it as a float.",
    ),
    diagnoses=(
        Diagnosis(
            "the rows were read before being caught up: in DENSE_EQUIVALENT mode a dormant row lags until "
            "opt.catch_up(ids) brings it current, so table[ids] gave stale values",
            _flawed_train_step("no_catch_up"),
        ),
        Diagnosis(
            "the gradient's sign is flipped: the gradient of 0.5 * ||rows - targets||**2 is rows - targets",
            _flawed_train_step("sign"),
        ),
        Diagnosis(
            "the loss is 0.5 * sum((rows - targets)**2), whose gradient is rows - targets (yours is twice that)",
            _flawed_train_step("no_half"),
        ),
        Diagnosis(
            "the loss is a sum over every looked-up entry, not a mean (and its gradient is rows - targets)",
            _flawed_train_step("mean"),
        ),
        Diagnosis(
            "an id looked up twice gets the sum of both gradients: pass every lookup to CsrGradient.from_rows, "
            "which sums repeats, instead of keeping one per id",
            _flawed_train_step("deduplicated"),
        ),
        Diagnosis(
            "the loss was computed after the step: return the loss of the rows as they were before opt.step",
            _flawed_train_step("loss_after"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (RELATIVE_DIVERGENCE, TRAIN_STEP)
