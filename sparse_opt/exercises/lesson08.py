"""Lesson 08 exercises (conformance): a lazy Adam candidate class, and telling eps placements apart.

``LazyAdam`` is checked the way a conformance suite checks a real optimizer:
the learner's class and the kit's ``SparseAdamTable`` in ``LAZY`` mode
(global-step bias correction, ``eps`` on ``sqrt(v_hat)``, repeated rows
coalesced) run the same small scenarios side by side, and the report names the
first step, row and column where the tables part. A wrong answer is then matched
against plain-loop variants with one known mistake each, to say which. It does
not use ``sparse_opt.conformance``: the lesson builds that check by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparse_opt.csr import CsrGradient
from sparse_opt.exercises._compare import Output, as_numbers
from sparse_opt.exercises._core import AnswerError, Case, Diagnosis, Exercise, LearnerError, Outcome, source
from sparse_opt.exercises._format import describe_type
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable

# ---------------------------------------------------------------- LazyAdam


class _KitLazyAdam:
    """The reference: ``SparseAdamTable`` (LAZY) behind the candidate protocol the exercise asks for."""

    def __init__(self, table: np.ndarray, lr: float, beta1: float, beta2: float, eps: float) -> None:
        self.params = np.array(table, dtype=np.float64)
        self._opt = SparseAdamTable(self.params, SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=eps))

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        rows, cols = self.params.shape
        grads = np.asarray(row_grads, dtype=np.float64).reshape(len(row_ids), cols)
        self._opt.step(CsrGradient.from_rows(row_ids, grads, rows))

    def table(self) -> np.ndarray:
        return self.params.copy()


def _lazy_adam_class(flaw: str = "") -> type:
    """A plain-loop lazy Adam over a table with one known mistake (``flaw=""``: none, the reference's semantics)."""

    class LazyAdam:
        def __init__(self, table: np.ndarray, lr: float, beta1: float, beta2: float, eps: float) -> None:
            self.params = np.array(table, dtype=np.float64)
            self.m = np.zeros_like(self.params)
            self.v = np.zeros_like(self.params)
            self.visits = np.zeros(self.params.shape[0], dtype=np.int64)
            self.last = np.zeros(self.params.shape[0], dtype=np.int64)
            self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
            self.t = 0

        def _updates(self, row_ids: np.ndarray, row_grads: np.ndarray) -> list[tuple[int, np.ndarray]]:
            pairs = list(zip(row_ids.tolist(), np.asarray(row_grads, dtype=np.float64), strict=True))
            if flaw == "separate":
                return pairs
            summed: dict[int, np.ndarray] = {}
            for r, g in pairs:
                summed[r] = g if flaw == "overwrite" else summed.get(r, 0.0) + g
            if flaw == "dense":
                return [(r, summed.get(r, np.zeros(self.params.shape[1]))) for r in range(self.params.shape[0])]
            return sorted(summed.items())

        def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
            if flaw != "empty_not_counted" or len(row_ids):
                self.t += 1
            b1, b2, t = self.beta1, self.beta2, self.t
            for r, g in self._updates(row_ids, row_grads):
                self.visits[r] += 1
                gap = t - self.last[r] if flaw == "dormancy_decay" else 1
                self.m[r] = b1**gap * self.m[r] + (1 - b1) * g
                self.v[r] = b2**gap * self.v[r] + (1 - b2) * g**2
                k = self.visits[r] if flaw == "per_row_counter" else t
                if flaw == "eps_on_sqrt_v":
                    u = self.lr * np.sqrt(1 - b2**k) / (1 - b1**k) * self.m[r] / (np.sqrt(self.v[r]) + self.eps)
                else:
                    m_hat, v_hat = self.m[r] / (1 - b1**k), self.v[r] / (1 - b2**k)
                    u = self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
                self.params[r] -= u
                self.last[r] = t

        def table(self) -> np.ndarray:
            return self.params.copy()

    return LazyAdam


def _as_table(snapshot: Any, shape: tuple[int, ...], step: int) -> np.ndarray:
    """The candidate's table after ``step``, or an AnswerError saying what is wrong with it."""
    if snapshot is None:
        raise AnswerError(f"LazyAdam.table() returned None after step {step}: return the current table")
    table = as_numbers(snapshot)
    if table is None or not issubclass(type(snapshot), np.ndarray):
        raise AnswerError(
            f"LazyAdam.table() returned {describe_type(snapshot)} after step {step}, not a numpy array of numbers"
        )
    if table.shape != shape:
        raise AnswerError(f"LazyAdam.table() has shape {table.shape} after step {step}, expected {shape}")
    return table


def _run_candidate(cls: type, inputs: Mapping[str, Any]) -> Outcome:
    """Create the candidate on a copy of the table, run the scenario's steps, record the table after each."""
    table = np.array(inputs["table"], dtype=np.float64)
    hyper = [inputs[key] for key in ("lr", "beta1", "beta2", "eps")]
    try:
        opt = cls(table.copy(), *hyper)
    except Exception as err:
        raise LearnerError("creating the optimizer", err) from err
    if not callable(getattr(opt, "table", None)):
        raise AnswerError(
            "LazyAdam needs a method table(); an attribute set in __init__ (self.table = ...) hides it: store the "
            "table under another name, e.g. self.params"
        )
    snapshots = []
    for k, step in enumerate(inputs["steps"].values(), start=1):
        try:
            opt.step(step["row_ids"].copy(), step["row_grads"].copy())
            snapshot = opt.table()
        except Exception as err:
            raise LearnerError(f"step {k}", err) from err
        snapshots.append(_as_table(snapshot, table.shape, k))
    return Outcome(np.stack(snapshots))


def _scenario(name: str, table: np.ndarray, id_lists: list[list[int]], seed: int, eps: float = 1e-3,
              lr: float = 0.1) -> Case:
    """A scenario: the table, the hyper-parameters, and one batch per step with two-decimal gradients."""
    rng = np.random.default_rng(seed)
    steps = {
        f"step {k}": {"row_ids": np.array(ids, dtype=np.int64),
                      "row_grads": rng.standard_normal((len(ids), table.shape[1])).round(2) + 0.0}
        for k, ids in enumerate(id_lists, start=1)
    }
    return Case(name, {"table": table, "lr": lr, "beta1": 0.9, "beta2": 0.999, "eps": eps, "steps": steps})


def _candidate_cases() -> list[Case]:
    table = np.array([[0.5, -0.5], [1.0, 0.0], [-1.0, 2.0], [0.25, 0.75]])
    cases = [
        _scenario("one step, distinct rows", table, [[0, 2]], 1),
        _scenario("a repeated row in one step", table, [[1, 3], [1, 3, 1]], 2),
        _scenario("an empty step still advances the global step", table, [[0], [], [1]], 3),
        _scenario("a row first touched late (t = 4)", table, [[0], [0], [0], [2]], 4),
        _scenario("a row that comes back after a gap", table, [[0, 1], [0], [0], [1]], 5),
        _scenario("a large eps (0.1)", table, [[0, 1], [1, 2]], 6, eps=0.1),
    ]
    for seed in range(1, 3):
        rng = np.random.default_rng(100 + seed)
        id_lists = [rng.integers(0, 5, size=int(rng.integers(0, 4))).tolist() for _ in range(6)]
        cases.append(_scenario(f"random (seed {seed})", rng.standard_normal((5, 3)).round(2) + 0.0, id_lists, seed))
    return cases


LAZY_ADAM = Exercise(
    name="LazyAdam",
    lesson="08",
    title="a lazy Adam candidate class, checked step by step against the LAZY semantics",
    statement=source(
        """
        class LazyAdam:
            def __init__(self, table, lr, beta1, beta2, eps): ...
            def step(self, row_ids, row_grads): ...
            def table(self): ...

        A lazy Adam over an embedding table with SparseAdamTable's LAZY semantics:

        - __init__ gets the initial table (num_rows, dim) and the hyper-parameters;
          m and v start at 0.
        - step(row_ids, row_grads) is one global step t = 1, 2, ... (an empty batch
          counts too). row_ids may repeat: the gradients of a repeated row are summed
          first (coalesced), and each distinct row then gets one update:
              m[r] = beta1 * m[r] + (1 - beta1) * g
              v[r] = beta2 * v[r] + (1 - beta2) * g**2
              p[r] -= lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m[r] / (1 - beta1**t),  v_hat = v[r] / (1 - beta2**t)
          with t the global step. Rows not looked up do not change at all.
        - table() returns the current table (an array of the table's shape).

        The check runs your class and a reference side by side on small scenarios
        and names the first step, row and column where the tables differ.
        """
    ),
    reference=_KitLazyAdam,
    cases=_candidate_cases(),
    outputs=(Output("table", per_step=True, axes=("row", "col")),),
    runner=_run_candidate,
    solution_source=source(
        """
        class LazyAdam:
            def __init__(self, table, lr, beta1, beta2, eps):
                self.params = np.array(table, dtype=float)
                self.m = np.zeros_like(self.params)
                self.v = np.zeros_like(self.params)
                self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
                self.t = 0  # the global step: every call counts, empty or not

            def step(self, row_ids, row_grads):
                self.t += 1
                rows, inverse = np.unique(row_ids, return_inverse=True)
                g = np.zeros((rows.size, self.params.shape[1]))
                np.add.at(g, inverse, row_grads)  # coalesce: one summed gradient per row
                b1, b2, t = self.beta1, self.beta2, self.t
                self.m[rows] = b1 * self.m[rows] + (1 - b1) * g
                self.v[rows] = b2 * self.v[rows] + (1 - b2) * g**2
                m_hat = self.m[rows] / (1 - b1**t)
                v_hat = self.v[rows] / (1 - b2**t)
                self.params[rows] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

            def table(self):
                return self.params.copy()
        """
    ),
    stub_source=source(
        """
        class LazyAdam:
            \"\"\"Lazy Adam on an embedding table: your conformance candidate.\"\"\"

            def __init__(self, table, lr, beta1, beta2, eps):
                raise NotImplementedError  # your code here

            def step(self, row_ids, row_grads):
                raise NotImplementedError  # your code here

            def table(self):
                raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "keep your own copy of the table and two arrays m, v of its shape, plus one global step counter t that "
        "every call to step increments; do not name the table attribute `table` (that is the method).",
        "in step, coalesce first: np.unique(row_ids, return_inverse=True) and np.add.at give one summed gradient "
        "per distinct row; then update m, v and the parameters of those rows only.",
        "bias-correct with the global t (not a per-row count) and add eps to np.sqrt(v_hat), as "
        "adam_step in lesson 03 does.",
    ),
    diagnoses=(
        Diagnosis(
            "eps is added to sqrt(v) instead of sqrt(v_hat): the update is lr * m_hat / (sqrt(v_hat) + eps), as in "
            "torch.optim.Adam and SparseAdamTable",
            _lazy_adam_class("eps_on_sqrt_v"),
        ),
        Diagnosis(
            "repeated rows were not coalesced: a row looked up twice in one step gets one update with the sum of "
            "its gradients, not one update per lookup",
            _lazy_adam_class("separate"),
        ),
        Diagnosis(
            "repeated rows were overwritten instead of summed: a row looked up twice in one step gets the sum of "
            "its gradients (fancy assignment keeps only one)",
            _lazy_adam_class("overwrite"),
        ),
        Diagnosis(
            "bias correction uses a per-row counter, not the global step t (the number of step calls, empty ones "
            "included)",
            _lazy_adam_class("per_row_counter"),
        ),
        Diagnosis(
            "an empty step still counts: t is the number of step calls, whatever the batch",
            _lazy_adam_class("empty_not_counted"),
        ),
        Diagnosis(
            "rows that were not looked up changed: a lazy Adam updates only the rows in row_ids (their m, v and "
            "parameters); a dense one decays and moves every row",
            _lazy_adam_class("dense"),
        ),
        Diagnosis(
            "the moments decayed by beta**gap at a row's return: that is DORMANCY_DECAY; LAZY decays them once "
            "per touch",
            _lazy_adam_class("dormancy_decay"),
        ),
    ),
)

# ---------------------------------------------------------------- which_eps_placement

#: The three answers of which_eps_placement.
PLACEMENTS = ("sqrt(v_hat) + eps", "sqrt(v) + eps", "sqrt(v_hat + eps)")


def _first_updates(g: np.ndarray, lr: float, beta1: float, beta2: float, eps: float) -> dict[str, np.ndarray]:
    """Each placement's first update (t = 1, from zero moments): m_hat = g and v_hat = g**2 there."""
    a = np.abs(g)
    return {
        "sqrt(v_hat) + eps": lr * g / (a + eps),
        "sqrt(v) + eps": lr * g / (a + eps / np.sqrt(1 - beta2)),  # sqrt(v) = sqrt(1 - beta2) * |g|
        "sqrt(v_hat + eps)": lr * g / np.sqrt(g * g + eps),
    }


def _placement_reference(p0: np.ndarray, g: np.ndarray, p1: np.ndarray, lr: float, beta1: float, beta2: float,
                         eps: float) -> str:
    moved = np.asarray(p0, dtype=np.float64) - np.asarray(p1, dtype=np.float64)
    updates = _first_updates(np.asarray(g, dtype=np.float64), lr, beta1, beta2, eps)
    return min(PLACEMENTS, key=lambda name: float(np.max(np.abs(moved - updates[name]))))


def _flawed_placement(flaw: str) -> Callable[..., str]:
    def which_eps_placement(p0: np.ndarray, g: np.ndarray, p1: np.ndarray, lr: float, beta1: float, beta2: float,
                            eps: float) -> str:
        moved = p1 - p0 if flaw == "sign" else p0 - p1
        updates = _first_updates(g, lr, beta1, beta2, eps)
        if flaw == "uncorrected":  # lr * m / (sqrt(v) + eps), the step-size correction forgotten
            updates["sqrt(v) + eps"] = lr * (1 - beta1) * g / (np.sqrt(1 - beta2) * np.abs(g) + eps)
        errors = {name: np.abs(moved - u) for name, u in updates.items()}
        score = {name: float(e[0] if flaw == "first_only" else e.max()) for name, e in errors.items()}
        return min(PLACEMENTS, key=score.__getitem__)

    return which_eps_placement


def _placement_cases() -> list[Case]:
    def case(name: str, placement: str, g: list[float], eps: float = 0.1, beta2: float = 0.999,
             lr: float = 0.01) -> Case:
        p0 = np.array([1.0, -1.0, 0.5, 0.0][: len(g)])
        grad = np.array(g)
        p1 = p0 - _first_updates(grad, lr, 0.9, beta2, eps)[placement]
        return Case(name, {"p0": p0, "g": grad, "p1": p1, "lr": lr, "beta1": 0.9, "beta2": beta2, "eps": eps})

    cases = [
        case("torch.optim.Adam's placement", "sqrt(v_hat) + eps", [0.5, -2.0, 0.1]),
        case("TensorFlow's epsilon hat: eps on sqrt(v)", "sqrt(v) + eps", [0.5, -2.0, 0.1]),
        case("eps inside the square root", "sqrt(v_hat + eps)", [0.5, -2.0, 0.1]),
        case("a zero gradient tells nothing: decide from the others", "sqrt(v) + eps", [0.0, 3.0, -4.0]),
        case("beta2 = 0.99", "sqrt(v) + eps", [0.5, -2.0, 0.1], beta2=0.99),
        case("a smaller eps (0.01)", "sqrt(v_hat + eps)", [0.5, -2.0, 0.1, 1.0], eps=0.01),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        cases.append(case(f"random (seed {seed})", PLACEMENTS[int(rng.integers(3))],
                          rng.standard_normal(4).round(3).tolist(), eps=float(rng.uniform(0.01, 0.5)),
                          beta2=float(rng.choice([0.99, 0.999]))))
    return cases


WHICH_EPS_PLACEMENT = Exercise(
    name="which_eps_placement",
    lesson="08",
    title="identify an optimizer's eps placement from its first step",
    statement=source(
        """
        which_eps_placement(p0, g, p1, lr, beta1, beta2, eps) -> str

        An Adam implementation took its first step (t = 1, from zero moments) with
        gradient g and moved the parameters from p0 to p1. Which eps placement does
        it implement? Return one of

            "sqrt(v_hat) + eps"   torch.optim.Adam, SparseAdamTable: lr * m_hat / (sqrt(v_hat) + eps)
            "sqrt(v) + eps"       TensorFlow's epsilon hat:
                                  lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps)
            "sqrt(v_hat + eps)"   eps inside the root: lr * m_hat / sqrt(v_hat + eps)

        p0, g, p1 : float arrays of one shape (some entries of g may be 0)

        Exactly one placement explains the step (up to rounding): predict each
        one's p1 and return the closest.
        """
    ),
    reference=_placement_reference,
    cases=_placement_cases(),
    outputs=(Output("placement"),),
    solution_source=source(
        """
        def which_eps_placement(p0, g, p1, lr, beta1, beta2, eps):
            m, v = (1 - beta1) * g, (1 - beta2) * g**2  # the moments after step 1
            m_hat, v_hat = g, g**2  # ... and bias-corrected: exactly g and g**2
            updates = {
                "sqrt(v_hat) + eps": lr * m_hat / (np.sqrt(v_hat) + eps),
                "sqrt(v) + eps": lr * np.sqrt(1 - beta2) / (1 - beta1) * m / (np.sqrt(v) + eps),
                "sqrt(v_hat + eps)": lr * m_hat / np.sqrt(v_hat + eps),
            }
            errors = {name: np.max(np.abs((p0 - p1) - u)) for name, u in updates.items()}
            return min(errors, key=errors.get)
        """
    ),
    stub_source=source(
        """
        def which_eps_placement(p0, g, p1, lr, beta1, beta2, eps):
            \"\"\"'sqrt(v_hat) + eps', 'sqrt(v) + eps' or 'sqrt(v_hat + eps)'.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "after one step from zero moments, m = (1 - beta1) * g and v = (1 - beta2) * g**2, so m_hat = g and "
        "v_hat = g**2.",
        "compute the update each placement would have made; the parameters moved by p0 - p1 (the update is "
        "subtracted).",
        "compare over all coordinates (a coordinate with g = 0 moved by 0 under every placement), e.g. the "
        "largest absolute error, and return the name of the smallest.",
    ),
    diagnoses=(
        Diagnosis(
            "the parameters moved by p1 - p0 = -update: compare p0 - p1 with the predicted updates (yours "
            "compares with the wrong sign)",
            _flawed_placement("sign"),
        ),
        Diagnosis(
            "the 'sqrt(v) + eps' form still bias-corrects, with the correction folded into the step size: "
            "lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps); at t = 1 that is "
            "lr * g / (|g| + eps / sqrt(1 - beta2))",
            _flawed_placement("uncorrected"),
        ),
        Diagnosis(
            "a coordinate with g = 0 moves by 0 under every placement: decide from all coordinates (the largest "
            "error over the whole array), not from the first",
            _flawed_placement("first_only"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (LAZY_ADAM, WHICH_EPS_PLACEMENT)
