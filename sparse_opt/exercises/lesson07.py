"""Lesson 07 exercises (performance): bytes of optimizer state per parameter, and an O(nnz) row update.

References: the state arrays the kit's table optimizers really keep (their
``state_dict()``), and :class:`sparse_opt.SparseSgdTable` stepped with
:meth:`sparse_opt.CsrGradient.from_rows`. The row update is also checked for
cost: on a large table, a correct answer that allocates memory the size of the
table (a dense gradient, arithmetic on the whole table) fails, measured with
:mod:`tracemalloc` as notebook 07 measures the kit's own steps.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparse_opt.csr import CsrGradient
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, Outcome, source, unchanged
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adagrad import SparseAdagradConfig, SparseAdagradTable
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgdConfig, SparseSgdTable

Config = SparseAdamConfig | SparseSgdConfig | SparseAdagradConfig

# ---------------------------------------------------------------- state_bytes_per_param

_TABLE_OPTIMIZER = {SparseAdamConfig: SparseAdamTable, SparseSgdConfig: SparseSgdTable,
                    SparseAdagradConfig: SparseAdagradTable}


def _state_bytes_reference(config: Config, cols: int, itemsize: int) -> float:
    """Bytes of the table-sized arrays in the optimizer's state dict, per parameter of a small table."""
    table = np.zeros((4, cols), dtype={4: np.float32, 8: np.float64}[itemsize])
    state = _TABLE_OPTIMIZER[type(config)](table, config).state_dict()
    return sum(a.nbytes for a in state.values() if isinstance(a, np.ndarray) and a.ndim > 0) / table.size


def _flawed_state_bytes(flaw: str) -> Callable[[Config, int, int], float]:
    def state_bytes_per_param(config: Config, cols: int, itemsize: int) -> float:
        size = 4 if flaw == "float32" else itemsize
        last_step = 8.0 if flaw == "steps_per_entry" else 8 / cols
        if isinstance(config, SparseAdamConfig):
            return 2 * size + (0.0 if flaw == "adam_no_steps" else last_step)
        if isinstance(config, SparseSgdConfig):
            buffer = size if (config.momentum != 0 or flaw == "sgd_buffer_always") else 0.0
            keeps_steps = config.mode is LazyMode.DENSE_EQUIVALENT or flaw == "sgd_steps_always"
            return buffer + (last_step if keeps_steps else 0.0)
        return float(size) if (flaw == "rowwise_per_entry" or not config.rowwise) else size / cols

    return state_bytes_per_param


def _state_bytes_cases() -> list[Case]:
    def case(name: str, config: Config, cols: int, itemsize: int) -> Case:
        return Case(name, {"config": config, "cols": cols, "itemsize": itemsize})

    cases = [
        case("SparseAdamTable, float32, 64 columns (notebook 07's 8.125)", SparseAdamConfig(), 64, 4),
        case("SparseAdamTable in DORMANCY_DECAY mode, float64", SparseAdamConfig(mode=LazyMode.DORMANCY_DECAY), 16, 8),
        case("SparseAdamTable in DENSE_EQUIVALENT mode", SparseAdamConfig(mode=LazyMode.DENSE_EQUIVALENT), 32, 4),
        case("SparseSgdTable without momentum: no state at all", SparseSgdConfig(lr=0.1), 16, 4),
        case("SparseSgdTable with momentum", SparseSgdConfig(lr=0.1, momentum=0.9), 16, 4),
        case("SparseSgdTable without momentum, DENSE_EQUIVALENT",
             SparseSgdConfig(lr=0.1, mode=LazyMode.DENSE_EQUIVALENT), 16, 8),
        case("SparseSgdTable with momentum, DENSE_EQUIVALENT",
             SparseSgdConfig(lr=0.1, momentum=0.9, mode=LazyMode.DENSE_EQUIVALENT), 8, 4),
        case("SparseAdagradTable, element-wise", SparseAdagradConfig(), 16, 4),
        case("SparseAdagradTable, row-wise", SparseAdagradConfig(rowwise=True), 16, 4),
        case("a one-column table", SparseAdamConfig(), 1, 8),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        configs: list[Config] = [
            SparseAdamConfig(mode=list(LazyMode)[int(rng.integers(3))]),
            SparseSgdConfig(lr=0.1, momentum=float(rng.choice([0.0, 0.9])),
                            mode=(LazyMode.LAZY, LazyMode.DENSE_EQUIVALENT)[int(rng.integers(2))]),
            SparseAdagradConfig(rowwise=bool(rng.integers(2))),
        ]
        cases.append(case(f"random (seed {seed})", configs[int(rng.integers(3))],
                          int(rng.choice([2, 8, 100, 128])), int(rng.choice([4, 8]))))
    return cases


STATE_BYTES_PER_PARAM = Exercise(
    name="state_bytes_per_param",
    lesson="07",
    title="bytes of optimizer state per parameter of an embedding table",
    statement=source(
        """
        state_bytes_per_param(config, cols, itemsize) -> float

        How many bytes of state, per parameter, the kit's table optimizer for
        `config` keeps for a table of width `cols` whose floats have `itemsize`
        bytes (4: float32, 8: float64). Count only the arrays that grow with the
        table (not scalar counters such as step_count):

          - so.SparseAdamConfig   -> SparseAdamTable: m and v (one float each per
            parameter) and last_step, one int64 per row, in every mode
          - so.SparseSgdConfig    -> SparseSgdTable: a momentum buffer only when
            momentum != 0, and last_step (one int64 per row) only in DENSE_EQUIVALENT mode
          - so.SparseAdagradConfig -> SparseAdagradTable: the accumulator `sum`, one
            float per parameter, or one per row when rowwise=True

        Return bytes / (rows * cols), a float (rows does not matter).
        """
    ),
    reference=_state_bytes_reference,
    cases=_state_bytes_cases(),
    outputs=(Output("bytes_per_param"),),
    solution_source=source(
        """
        def state_bytes_per_param(config, cols, itemsize):
            per_row = 8 / cols  # one int64 per row, shared by the row's cols parameters
            if isinstance(config, so.SparseAdamConfig):
                return 2 * itemsize + per_row  # m, v, and last_step in every mode
            if isinstance(config, so.SparseSgdConfig):
                buffer = itemsize if config.momentum != 0 else 0
                steps = per_row if config.mode is so.LazyMode.DENSE_EQUIVALENT else 0
                return float(buffer + steps)
            return itemsize / cols if config.rowwise else float(itemsize)  # Adagrad's sum
        """
    ),
    stub_source=source(
        """
        def state_bytes_per_param(config, cols, itemsize):
            \"\"\"Bytes of table-sized optimizer state per parameter.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "an array with one entry per parameter costs its itemsize per parameter; one with an entry per row "
        "costs its itemsize / cols.",
        "last_step is int64 (8 bytes) per row: 8 / cols per parameter. Adam keeps it in every mode, SGD only in "
        "DENSE_EQUIVALENT mode, where it needs the gap to catch up.",
        "dispatch on the config's type with isinstance(config, so.SparseAdamConfig) etc., and read "
        "config.momentum, config.mode and config.rowwise.",
    ),
    diagnoses=(
        Diagnosis(
            "last_step is kept once per row (an embedding step updates whole rows), 8 / cols bytes per parameter, "
            "not 8",
            _flawed_state_bytes("steps_per_entry"),
        ),
        Diagnosis(
            "SparseAdamTable keeps last_step in every mode (LAZY included): 8 / cols bytes per parameter on top "
            "of m and v",
            _flawed_state_bytes("adam_no_steps"),
        ),
        Diagnosis(
            "SparseSgdTable keeps a momentum buffer only when momentum != 0",
            _flawed_state_bytes("sgd_buffer_always"),
        ),
        Diagnosis(
            "SparseSgdTable keeps last_step only in DENSE_EQUIVALENT mode (to know each row's gap); LAZY SGD keeps "
            "no step record",
            _flawed_state_bytes("sgd_steps_always"),
        ),
        Diagnosis(
            "row-wise Adagrad keeps one accumulator per row: itemsize / cols bytes per parameter",
            _flawed_state_bytes("rowwise_per_entry"),
        ),
        Diagnosis("the floats have itemsize bytes (8 for float64), not always 4", _flawed_state_bytes("float32")),
    ),
)

# ---------------------------------------------------------------- lazy_row_update

#: Tables at least this large are also checked for table-sized allocations.
_WATCHED_BYTES = 256 * 1024


def _row_update_reference(table: np.ndarray, ids: np.ndarray, row_grads: np.ndarray, lr: float) -> None:
    SparseSgdTable(table, SparseSgdConfig(lr=lr)).step(CsrGradient.from_rows(ids, row_grads, table.shape[0]))


def _peak_bytes(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()`` and the most memory it held at once beyond what existed before (tracemalloc).

    If tracemalloc was already tracing, its peak is reset (and tracing goes on).
    Unlike :func:`sparse_opt.demos.memory.measure_peak` it does not collect
    garbage first: a check only asks whether a call held a table-sized block
    (a quarter of the table or more), and a full collection per call made the
    checks some 25 times slower.
    """
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        returned = call()
        return returned, tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()


def _run_row_update(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> Outcome:
    """Call ``fn`` on copies; on a large table, also measure what the call allocated."""
    args = {key: (value.copy() if isinstance(value, np.ndarray) else value) for key, value in inputs.items()}
    table = args["table"]
    returned, peak = _peak_bytes(lambda: fn(*args.values()))
    mutated = tuple(k for k in ("ids", "row_grads") if not unchanged(inputs[k], args[k]))
    inefficiency = None
    if table.nbytes >= _WATCHED_BYTES and peak >= table.nbytes // 4:
        inefficiency = (
            "the values are right, but the update allocated memory the size of the table (a dense gradient, "
            "np.zeros_like(table), or arithmetic on the whole table): a lazy update costs O(len(ids) * cols), "
            "touching only the looked-up rows"
        )
    return Outcome(table, returned, mutated, inefficiency)


def _flawed_row_update(flaw: str) -> Callable[..., None]:
    def lazy_row_update(table: np.ndarray, ids: np.ndarray, row_grads: np.ndarray, lr: float) -> None:
        if flaw == "buffered":
            table[ids] -= lr * row_grads  # a repeated id gets one of its gradients
            return
        unique, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        summed = np.zeros((unique.size, table.shape[1]))
        np.add.at(summed, inverse, row_grads)
        if flaw == "mean":
            summed /= counts[:, None]
        table[unique] += lr * summed if flaw == "sign" else -lr * summed

    return lazy_row_update


def _row_update_cases() -> list[Case]:
    def case(name: str, table: np.ndarray, ids: list[int], grads: object, lr: float = 0.5) -> Case:
        return Case(name, {"table": table, "ids": np.array(ids, dtype=np.int64),
                           "row_grads": np.array(grads, dtype=np.float64).reshape(len(ids), table.shape[1]),
                           "lr": lr})

    small = np.arange(10, dtype=np.float64).reshape(5, 2)
    big = np.random.default_rng(0).standard_normal((4096, 16)).round(2) + 0.0
    cases = [
        case("distinct ids", small, [3, 0], [[1.0, -1.0], [0.5, 2.0]]),
        case("a repeated id: its gradients add up", small, [1, 4, 1], [[1.0, 0.0], [2.0, 2.0], [0.5, -1.0]]),
        case("one id three times", small, [2, 2, 2], [[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]]),
        case("no lookups", small, [], []),
        case("a 4096 x 16 table and a batch of 6 lookups", big, [7, 4000, 7, 12, 3000, 12],
             np.random.default_rng(1).standard_normal((6, 16)).round(2), lr=0.1),
    ]
    for seed in range(1, 3):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 8))
        cases.append(case(f"random (seed {seed})", rng.standard_normal((6, 3)), rng.integers(0, 6, size=n).tolist(),
                          rng.standard_normal((n, 3)), lr=float(rng.uniform(0.01, 1.0))))
    return cases


LAZY_ROW_UPDATE = Exercise(
    name="lazy_row_update",
    lesson="07",
    title="a lazy SGD step on an embedding table in O(len(ids) * cols), in place",
    statement=source(
        """
        lazy_row_update(table, ids, row_grads, lr) -> None

        Plain SGD on an embedding table after a lookup, in place: every looked-up
        row r moves by -lr times the sum of the gradients of all lookups of r; no
        other row is read or written. The cost must be O(len(ids) * cols), whatever
        the size of the table (no table-sized temporary: on a large table the check
        measures what your update allocates).

        table     : float array (num_rows, cols), updated in place
        ids       : 1-D int array of looked-up rows (any order, repeats allowed)
        row_grads : float array (len(ids), cols), the gradient of each lookup
        """
    ),
    reference=_row_update_reference,
    cases=_row_update_cases(),
    outputs=(Output("table", axes=("row", "col")),),
    in_place=("table",),
    runner=_run_row_update,
    solution_source=source(
        """
        def lazy_row_update(table, ids, row_grads, lr):
            rows, inverse = np.unique(ids, return_inverse=True)  # the distinct looked-up rows
            summed = np.zeros((rows.size, table.shape[1]))
            np.add.at(summed, inverse, row_grads)  # a repeated id gets the sum of its gradients
            table[rows] -= lr * summed  # O(len(ids) * cols): only those rows
        """
    ),
    stub_source=source(
        """
        def lazy_row_update(table, ids, row_grads, lr):
            \"\"\"table[r] -= lr * (sum of r's gradients) for each looked-up row r, in place.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "work with the looked-up rows only: never build anything of the table's shape.",
        "`table[ids] -= lr * row_grads` is not enough when an id repeats: numpy's fancy-index update is "
        "buffered, so a repeated row gets only one of its gradients.",
        "sum the gradients per distinct id first (np.unique with return_inverse, then np.add.at), then "
        "table[unique] -= lr * summed; np.subtract.at(table, ids, lr * row_grads) works too.",
    ),
    diagnoses=(
        Diagnosis(
            "table[ids] -= lr * row_grads applies one gradient per repeated id: numpy's fancy-index update is "
            "buffered, so repeats do not add up; sum them first (coalesce) or use np.subtract.at",
            _flawed_row_update("buffered"),
        ),
        Diagnosis(
            "the gradients of a repeated id add up (the embedding's gradient is a sum), they are not averaged",
            _flawed_row_update("mean"),
        ),
        Diagnosis(
            "the sign is flipped: the rows moved up the gradient (table[r] -= lr * ...)",
            _flawed_row_update("sign"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (STATE_BYTES_PER_PARAM, LAZY_ROW_UPDATE)
