"""sparse_opt.exercises: each checker passes its model solution, calls its stub 'not attempted yet',
recognises planted wrong answers by name, reports errors instead of raising, and prints the same
text every time."""

from __future__ import annotations

import copy
import textwrap

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt import exercises as ex
from sparse_opt.exercises._core import Exercise, unchanged

NAMES = [e.name for e in ex.EXERCISES]


def define(source: str, name: str) -> object:
    """Execute learner-style source (with ``np`` and ``so`` imported, as in the notebooks); return ``name``."""
    namespace = {"np": np, "so": so}
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), namespace)
    return namespace[name]


def diagnosis_messages(exercise: Exercise) -> set[str]:
    return {d.message for d in exercise.diagnoses}


# ---------------------------------------------------------------- every exercise


def test_at_least_two_exercises_per_lesson() -> None:
    for lesson in ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10"):
        assert len(ex.for_lesson(lesson)) >= 2, lesson
    assert sorted(NAMES) == sorted(set(NAMES)), "exercise names must be unique"
    assert ex.names() == NAMES


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_model_solution_passes(exercise: Exercise) -> None:
    result = ex.check(define(exercise.solution_source, exercise.name))
    assert result.passed, result.report()
    assert str(result) == f"{exercise.name}: passed all {len(exercise.cases)} cases"
    assert len(exercise.solution_source.splitlines()) <= (22 if exercise.name == "LazyAdam" else 15)


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_stub_is_not_attempted_yet(exercise: Exercise) -> None:
    stub = ex.stub(exercise.name)
    assert stub == exercise.stub_source and "raise NotImplementedError  # your code here" in stub
    result = ex.check(define(stub, exercise.name))
    assert not result.passed and not result.attempted
    assert str(result) == f"not attempted yet: {exercise.name} still raises NotImplementedError"


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_an_exception_is_reported_with_its_line_not_raised(exercise: Exercise) -> None:
    if exercise.name == "LazyAdam":
        source = """
            class LazyAdam:
                def __init__(self, table, lr, beta1, beta2, eps):
                    self.params = table

                def step(self, row_ids, row_grads):
                    raise TypeError("unsupported operand")

                def table(self):
                    return self.params
            """
        where = "(step 1, line 2 of LazyAdam.step)"
    else:
        source = f"""
            def {exercise.name}(*args):
                raise TypeError("unsupported operand")
            """
        where = f"(line 2 of {exercise.name})" if exercise.name != "train_step" else "(step 1, line 2 of train_step)"
    result = ex.check(define(source, exercise.name))
    assert not result.passed and result.attempted
    assert result.message == f"{exercise.name} raised TypeError: unsupported operand {where}"
    assert result.case == exercise.cases[0].name
    assert "inputs:" in str(result) and "expected:" in str(result) and "got:" not in str(result)


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_references_mutate_nothing_and_allocate_nothing_table_sized(exercise: Exercise) -> None:
    for case in exercise.cases:
        outcome = exercise._run(exercise.reference, case)
        assert outcome.mutated == () and outcome.inefficiency is None, case.name


def _vandalize(*args: object) -> None:
    """Write zeros into every writeable array among ``args`` (and the arrays of dicts among them)."""
    for a in args:
        for b in a.values() if isinstance(a, dict) else (a,):
            if isinstance(b, np.ndarray) and b.flags.writeable and b.size:
                b[...] = 0


class _Vandal:
    """A candidate class that writes into whatever it is given."""

    def __init__(self, *args: object) -> None:
        _vandalize(*args)

    def step(self, *args: object) -> None:
        _vandalize(*args)

    def table(self) -> None:
        return None


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_a_learner_writing_into_its_inputs_cannot_change_the_cases(exercise: Exercise) -> None:
    """Every runner hands the learner copies: the shared cases (and so the expected values) stay as they were."""
    vandal = _Vandal if isinstance(exercise.reference, type) else _vandalize
    for case in exercise.cases:
        before = copy.deepcopy(dict(case.inputs))
        try:
            exercise._run(vandal, case)
        except Exception:  # the runner may refuse what the vandal returns; only the inputs matter here
            pass
        assert all(unchanged(before[k], case.inputs[k]) for k in before), case.name


def test_a_checker_failure_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    exercise = ex.get("coalesce")

    def broken(self: Exercise, fn: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(Exercise, "_check", broken)
    result = exercise.check(exercise.reference)
    assert not result.passed
    assert result.message == "the checker could not judge coalesce: ZeroDivisionError: division by zero"


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_each_known_mistake_is_recognised_as_itself(exercise: Exercise) -> None:
    for diagnosis in exercise.diagnoses:
        result = exercise.check(diagnosis.variant)
        assert not result.passed and result.message == diagnosis.message, (diagnosis.message, result.report())
        assert result.detail is not None  # where the values (or shapes) first differ


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_hints_are_progressive(exercise: Exercise) -> None:
    first = ex.hint(exercise.name, 1)
    assert first.startswith(f"Hint 1 of {len(exercise.hints)} for {exercise.name}: ")
    for k in range(2, len(exercise.hints) + 1):
        assert ex.hint(exercise.name).startswith(f"Hint {k} of ")
    no_more = f"No more hints for {exercise.name}: solution({exercise.name!r}) shows a model answer."
    assert ex.hint(exercise.name) == no_more
    assert ex.hint(exercise.name, 1) == first  # a number restarts from there
    assert len(exercise.hints) >= 3


# ---------------------------------------------------------------- planted wrong answers

PLANTED: dict[str, list[tuple[str, str]]] = {
    "coalesce": [
        ("""
         def coalesce(indices, values):
             unique, inverse = np.unique(indices, return_inverse=True)
             out = np.zeros((len(unique),) + values.shape[1:])
             out[inverse] += values
             return unique.astype(np.int64), out
         """, "duplicates were overwritten instead of summed"),
        ("""
         def coalesce(indices, values):
             order = np.argsort(indices, kind="stable")
             return indices[order].astype(np.int64), values[order]
         """, "repeated indices were not merged"),
        ("""
         def coalesce(indices, values):
             sums = {}
             for i, v in zip(indices.tolist(), values):
                 sums[i] = sums.get(i, 0.0) + v
             return np.array(list(sums), dtype=np.int64), np.array(list(sums.values()))
         """, "must come out sorted ascending"),
        ("""
         def coalesce(indices, values):
             unique, inverse = np.unique(indices, return_inverse=True)
             out = np.zeros((len(unique),) + values.shape[1:])
             np.add.at(out, inverse, values)
             return unique, out
         """, "indices has dtype int32, expected int64"),
        ("""
         def coalesce(indices, values):
             values.sort()
             return np.unique(indices).astype(np.int64), values
         """, "coalesce changed its input values"),
    ],
    "coo_to_csr": [
        ("""
         def coo_to_csr(linear_indices, values, shape):
             rows, cols = shape
             row, col = linear_indices % cols, linear_indices // cols
             offsets = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=rows))])
             return offsets, col, values
         """, "row and column are swapped"),
        ("""
         def coo_to_csr(linear_indices, values, shape):
             row, col = np.divmod(linear_indices, shape[1])
             return np.cumsum(np.bincount(row, minlength=shape[0])), col, values
         """, "row_offsets needs rows + 1 entries"),
        ("""
         def coo_to_csr(linear_indices, values, shape):
             row, col = np.divmod(linear_indices, shape[1])
             _, counts = np.unique(row, return_counts=True)
             return np.concatenate([[0], np.cumsum(counts)]), col, values
         """, "empty rows too"),
    ],
    "lazy_sgd_step": [
        ("""
         def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
             full = np.zeros_like(p)
             full[index] = grad
             g = full + weight_decay * p
             if buf is None:
                 p -= lr * g
             else:
                 buf *= momentum
                 buf += g
                 p -= lr * buf
         """, "coordinates outside index changed"),
        ("""
         def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
             if buf is None:
                 p[index] -= lr * (grad + weight_decay * p[index])
             else:
                 buf[index] = momentum * buf[index] + grad
                 p[index] -= lr * (buf[index] + weight_decay * p[index])
         """, "weight decay belongs in the gradient"),
        ("""
         def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
             p = p.copy()
             g = grad + weight_decay * p[index]
             if buf is None:
                 p[index] -= lr * g
                 return p, None
             buf = buf.copy()
             buf[index] = momentum * buf[index] + g
             p[index] -= lr * buf[index]
             return p, buf
         """, "p and buf were not updated in place"),
        ("""
         def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
             g = grad + weight_decay * p[index]
             if buf is None:
                 p[index] += lr * g
             else:
                 buf[index] = momentum * buf[index] + g
                 p[index] += lr * buf[index]
         """, "the sign is flipped"),
    ],
    "sgd_catch_up": [
        ("""
         def sgd_catch_up(p, buf, k, lr, momentum, weight_decay):
             p = np.array(p, dtype=float)
             buf = None if buf is None else np.array(buf, dtype=float)
             for _ in range(k - 1):
                 g = weight_decay * p
                 if buf is None:
                     p = p - lr * g
                 else:
                     buf = momentum * buf + g
                     p = p - lr * buf
             return p, buf
         """, "yours applies k - 1"),
        ("""
         def sgd_catch_up(p, buf, k, lr, momentum, weight_decay):
             return p * (1 - lr * weight_decay) ** k, buf
         """, "momentum was ignored"),
        ("""
         def sgd_catch_up(p, buf, k, lr, momentum, weight_decay):
             for _ in range(k):
                 g = weight_decay * p
                 if buf is None:
                     p -= lr * g
                 else:
                     buf *= momentum
                     buf += g
                     p -= lr * buf
             return p, buf
         """, "sgd_catch_up changed its input p, buf"),
    ],
    "adam_step": [
        ("""
         def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
             m = beta1 * m + (1 - beta1) * g
             v = beta2 * v + (1 - beta2) * g * g
             step_size = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
             return p - step_size * m / (np.sqrt(v) + eps), m, v
         """, "eps is added to sqrt(v) instead of sqrt(v_hat)"),
        ("""
         def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
             m = beta1 * m + (1 - beta1) * g
             v = beta2 * v + (1 - beta2) * g**2
             return p - lr * m / (np.sqrt(v) + eps), m, v
         """, "the bias correction is missing"),
        ("""
         def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
             update = lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
             m = beta1 * m + (1 - beta1) * g
             v = beta2 * v + (1 - beta2) * g**2
             return p - update, m, v
         """, "p moved with the old moments"),
        ("""
         def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
             m = beta1 * m + (1 - beta1) * g
             v = beta2 * v + (1 - beta2) * g**2
             p -= lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
             return p, m, v
         """, "adam_step changed its input p"),
    ],
    "bias_corrected_update": [
        ("""
         def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):
             m_hat = m / (1 - beta1**visits)
             v_hat = v / (1 - beta2**visits)
             return lr * m_hat / (np.sqrt(v_hat) + eps)
         """, "bias correction uses the coordinate's visit count, not the global step"),
        ("""
         def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):
             return lr * (m / (1 - beta1**t)) / np.sqrt(v / (1 - beta2**t) + eps)
         """, "eps belongs outside the square root"),
        ("""
         def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):
             return -lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
         """, "the sign is flipped"),
    ],
    "dormancy_decay_moments": [
        ("""
         def dormancy_decay_moments(m, v, g, gap, beta1, beta2):
             return beta1 ** (gap - 1) * m + (1 - beta1) * g, beta2 ** (gap - 1) * v + (1 - beta2) * g**2
         """, "the gap is off by one: beta**(gap - 1)"),
        ("""
         def dormancy_decay_moments(m, v, g, gap, beta1, beta2):
             return beta1 * m + (1 - beta1) * g, beta2 * v + (1 - beta2) * g**2
         """, "that is LAZY"),
        ("""
         def dormancy_decay_moments(m, v, g, gap, beta1, beta2):
             d1, d2 = beta1**gap, beta2**gap
             return d1 * m + (1 - d1) * g, d2 * v + (1 - d2) * g**2
         """, "the new gradient keeps its usual weight"),
    ],
    "adam_catch_up": [
        ("""
         def adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps):
             for i in range(1, t - s + 1):
                 m, v = beta1 * m, beta2 * v
                 p = p - lr * (m / (1 - beta1**i)) / (np.sqrt(v / (1 - beta2**i)) + eps)
             return p, m, v
         """, "not the global steps s + 1 .. t"),
        ("""
         def adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps):
             for j in range(s + 1, t):
                 m, v = beta1 * m, beta2 * v
                 p = p - lr * (m / (1 - beta1**j)) / (np.sqrt(v / (1 - beta2**j)) + eps)
             return p, m, v
         """, "one step too few"),
        ("""
         def adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps):
             return p.copy(), m * beta1 ** (t - s), v * beta2 ** (t - s)
         """, "p did not coast: that is DORMANCY_DECAY"),
    ],
    "relative_divergence": [
        ("""
         def relative_divergence(lazy_table, dense_table, initial_table, rows):
             return np.linalg.norm(lazy_table[rows] - dense_table[rows]) / np.linalg.norm(dense_table[rows])
         """, "not the size of its table"),
        ("""
         def relative_divergence(lazy_table, dense_table, initial_table, rows):
             norm = np.linalg.norm
             ratios = [norm(lazy_table[r] - dense_table[r]) / norm(dense_table[r] - initial_table[r]) for r in rows]
             return np.mean(ratios)
         """, "not the mean of per-row ratios"),
        ("""
         def relative_divergence(lazy_table, dense_table, initial_table, rows):
             np.linalg.norm(lazy_table[rows] - dense_table[rows])
         """, "relative_divergence returned None: end it with `return divergence`"),
    ],
    "train_step": [
        ("""
         def train_step(table, opt, ids, targets):
             rows = table[ids]
             opt.step(so.CsrGradient.from_rows(ids, rows - targets, table.shape[0]))
             return 0.5 * np.sum((rows - targets) ** 2)
         """, "the rows were read before being caught up"),
        ("""
         def train_step(table, opt, ids, targets):
             opt.catch_up()
             rows = table[ids]
             opt.step(so.CsrGradient.from_rows(ids, rows - targets, table.shape[0]))
             return 0.5 * np.sum((rows - targets) ** 2)
         """, "caught up rows the batch does not look up"),
        ("""
         def train_step(table, opt, ids, targets):
             opt.catch_up(ids)
             rows = table[ids]
             unique, first = np.unique(ids, return_index=True)
             opt.step(so.CsrGradient.from_rows(unique, (rows - targets)[first], table.shape[0]))
             return 0.5 * np.sum((rows - targets) ** 2)
         """, "an id looked up twice gets the sum of both gradients"),
        ("""
         def train_step(table, opt, ids, targets):
             opt.catch_up(ids)
             rows = table[ids]
             opt.step(so.CsrGradient.from_rows(ids, rows - targets, table.shape[0]))
         """, "train_step should return the loss (a float), got None at step 1"),
    ],
    "factored_second_moment": [
        ("""
         def factored_second_moment(row_var, col_var, eps1):
             return row_var @ col_var / np.maximum(col_var.mean(axis=-1, keepdims=True), eps1)
         """, "normalised by the mean of the column factor"),
        ("""
         def factored_second_moment(row_var, col_var, eps1):
             return row_var @ col_var / (row_var.mean(axis=-2, keepdims=True) + eps1)
         """, "eps1 is a floor"),
        ("""
         def factored_second_moment(row_var, col_var, eps1):
             return np.outer(row_var, col_var) / max(row_var.mean(), eps1)
         """, "V has shape (4, 4), expected shape (2, 2, 2)"),
    ],
    "adafactor_row_col_update": [
        ("""
         def adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay):
             beta2t = step**beta2_decay
             g2 = grad**2
             return (beta2t * row_var + (1 - beta2t) * g2.mean(axis=-1, keepdims=True),
                     beta2t * col_var + (1 - beta2t) * g2.mean(axis=-2, keepdims=True))
         """, "yours swaps them"),
        ("""
         def adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay):
             w = step**beta2_decay
             return (1 - w) * row_var + w * np.mean(grad**2, axis=1), (1 - w) * col_var + w * np.mean(grad**2, axis=0)
         """, "keep the reduced axis (keepdims=True)"),
        ("""
         def adafactor_row_col_update(row_var, col_var, grad, step, beta2_decay):
             w = step**beta2_decay
             row = np.sum(grad**2, axis=-1, keepdims=True)
             col = np.sum(grad**2, axis=-2, keepdims=True)
             return (1 - w) * row_var + w * row, (1 - w) * col_var + w * col
         """, "not sums"),
    ],
    "egdd_gain_update": [
        ("""
         def egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter):
             if use_signs:
                 x = np.sign(g) * np.sign(gbar_old)
             else:
                 x = g * gbar_old / (1 - beta**counter)
             return np.clip(gain * np.exp(gain_learning_rate * x), min_gain, max_gain)
         """, "yours uses 1 - beta**counter"),
        ("""
         def egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter):
             if use_signs:
                 x = np.sign(g) * np.sign(gbar_old)
             else:
                 x = g * gbar_old / (1 - beta ** max(counter - 1, 1))
             return gain * np.exp(gain_learning_rate * x)
         """, "must be clipped to [min_gain, max_gain]"),
        ("""
         def egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter):
             gbar = beta * gbar_old + (1 - beta) * g
             x = np.sign(g) * np.sign(gbar) if use_signs else g * gbar / (1 - beta ** max(counter - 1, 1))
             return np.clip(gain * np.exp(gain_learning_rate * x), min_gain, max_gain)
         """, "not with the new average"),
    ],
    "egdd_lr_scale_update": [
        ("""
         def egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions):
             if use_directions:
                 g, m_old = g / np.linalg.norm(g), m_old / np.linalg.norm(m_old)
             return np.clip(lr_scale * np.exp(scale_learning_rate * np.sum(g * m_old)), min_scale, max_scale)
         """, "lingvo adds 1e-10 to each norm"),
        ("""
         def egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions):
             if use_directions:
                 g = g / (np.linalg.norm(g) + 1e-10)
                 m_old = m_old / (np.linalg.norm(m_old) + 1e-10)
             return lr_scale * np.exp(scale_learning_rate * np.vdot(g, m_old))
         """, "must be clipped to [min_scale, max_scale]"),
        ("""
         def egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions):
             if use_directions:
                 g = g / (np.linalg.norm(g) + 1e-10)
                 m_old = m_old / (np.linalg.norm(m_old) + 1e-10)
             return np.clip(lr_scale * np.exp(scale_learning_rate * g * m_old), min_scale, max_scale)
         """, "lr_scale is one number per tensor"),
    ],
    "state_bytes_per_param": [
        ("""
         def state_bytes_per_param(config, cols, itemsize):
             if isinstance(config, so.SparseAdamConfig):
                 return 2 * itemsize + 8
             if isinstance(config, so.SparseSgdConfig):
                 return (itemsize if config.momentum else 0) + (8 if config.mode.name == "DENSE_EQUIVALENT" else 0)
             return itemsize / cols if config.rowwise else itemsize
         """, "not 8"),
        ("""
         def state_bytes_per_param(config, cols, itemsize):
             if isinstance(config, so.SparseAdamConfig):
                 return 2 * itemsize + 8 / cols
             if isinstance(config, so.SparseSgdConfig):
                 return itemsize + (8 / cols if config.mode.name == "DENSE_EQUIVALENT" else 0)
             return itemsize / cols if config.rowwise else itemsize
         """, "a momentum buffer only when momentum != 0"),
        ("""
         def state_bytes_per_param(config, cols, itemsize):
             if isinstance(config, so.SparseAdamConfig):
                 return 2 * itemsize
             if isinstance(config, so.SparseSgdConfig):
                 steps = 8 / cols if config.mode.name == "DENSE_EQUIVALENT" else 0
                 return (itemsize if config.momentum else 0) + steps
             return itemsize / cols if config.rowwise else itemsize
         """, "keeps last_step in every mode"),
    ],
    "lazy_row_update": [
        ("""
         def lazy_row_update(table, ids, row_grads, lr):
             table[ids] -= lr * row_grads
         """, "numpy's fancy-index update is buffered"),
        ("""
         def lazy_row_update(table, ids, row_grads, lr):
             grad = np.zeros_like(table)
             np.add.at(grad, ids, row_grads)
             table -= lr * grad
         """, "allocated memory the size of the table"),
        ("""
         def lazy_row_update(table, ids, row_grads, lr):
             rows, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
             summed = np.zeros((rows.size, table.shape[1]))
             np.add.at(summed, inverse, row_grads)
             table[rows] -= lr * summed / counts[:, None]
         """, "they are not averaged"),
    ],
    "LazyAdam": [
        ("""
         class LazyAdam:
             def __init__(self, table, lr, beta1, beta2, eps):
                 self.p, self.m, self.v = table.copy(), np.zeros_like(table), np.zeros_like(table)
                 self.lr, self.b1, self.b2, self.eps, self.t = lr, beta1, beta2, eps, 0

             def step(self, row_ids, row_grads):
                 self.t += 1
                 rows, inverse = np.unique(row_ids, return_inverse=True)
                 g = np.zeros((rows.size, self.p.shape[1]))
                 np.add.at(g, inverse, row_grads)
                 self.m[rows] = self.b1 * self.m[rows] + (1 - self.b1) * g
                 self.v[rows] = self.b2 * self.v[rows] + (1 - self.b2) * g * g
                 lr_t = self.lr * np.sqrt(1 - self.b2**self.t) / (1 - self.b1**self.t)
                 self.p[rows] -= lr_t * self.m[rows] / (np.sqrt(self.v[rows]) + self.eps)

             def table(self):
                 return self.p
         """, "eps is added to sqrt(v) instead of sqrt(v_hat)"),
        ("""
         class LazyAdam:
             def __init__(self, table, lr, beta1, beta2, eps):
                 self.p, self.m, self.v = table.copy(), np.zeros_like(table), np.zeros_like(table)
                 self.count = np.zeros(table.shape[0])
                 self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps

             def step(self, row_ids, row_grads):
                 rows, inverse = np.unique(row_ids, return_inverse=True)
                 g = np.zeros((rows.size, self.p.shape[1]))
                 np.add.at(g, inverse, row_grads)
                 self.count[rows] += 1
                 t = self.count[rows][:, None]
                 self.m[rows] = self.b1 * self.m[rows] + (1 - self.b1) * g
                 self.v[rows] = self.b2 * self.v[rows] + (1 - self.b2) * g * g
                 m_hat, v_hat = self.m[rows] / (1 - self.b1**t), self.v[rows] / (1 - self.b2**t)
                 self.p[rows] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

             def table(self):
                 return self.p
         """, "bias correction uses a per-row counter, not the global step"),
        ("""
         class LazyAdam:
             def __init__(self, table, lr, beta1, beta2, eps):
                 self.p, self.m, self.v = table.copy(), np.zeros_like(table), np.zeros_like(table)
                 self.lr, self.b1, self.b2, self.eps, self.t = lr, beta1, beta2, eps, 0

             def step(self, row_ids, row_grads):
                 self.t += 1
                 b1, b2, t = self.b1, self.b2, self.t
                 self.m[row_ids] = b1 * self.m[row_ids] + (1 - b1) * row_grads
                 self.v[row_ids] = b2 * self.v[row_ids] + (1 - b2) * row_grads**2
                 m_hat, v_hat = self.m[row_ids] / (1 - b1**t), self.v[row_ids] / (1 - b2**t)
                 self.p[row_ids] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

             def table(self):
                 return self.p
         """, "repeated rows were overwritten instead of summed"),
        ("""
         class LazyAdam:
             def __init__(self, table, lr, beta1, beta2, eps):
                 self.table = table

             def step(self, row_ids, row_grads):
                 self.table[row_ids] -= 0.1

             def table(self):
                 return self.table
         """, "an attribute set in __init__ (self.table = ...) hides it"),
    ],
    "skipped_displacement": [
        ("""
         def skipped_displacement(m, v, last, touch, rates):
             terms = []
             for j in range(last + 1, touch):
                 k = j - last
                 m_hat = 0.9**k * m / (1 - 0.9**j)
                 v_hat = 0.999**k * v / (1 - 0.999**j)
                 terms.append(m_hat / (np.sqrt(v_hat) + 1e-8))
             return -rates[-1] * sum(terms)
         """, "the current-rate catch-up of FBGEMM"),
        ("""
         def skipped_displacement(m, v, last, touch, rates):
             out = 0.0
             for k in range(1, touch - last):
                 m_hat = 0.9**k * m / (1 - 0.9**k)
                 v_hat = 0.999**k * v / (1 - 0.999**k)
                 out -= rates[k - 1] * m_hat / (np.sqrt(v_hat) + 1e-8)
             return out
         """, "not the steps since the last update"),
        ("""
         def skipped_displacement(m, v, last, touch, rates):
             j = np.arange(last + 1, touch + 1)
             k = j - last
             m_hat = 0.9**k * m / (1 - 0.9**j)
             v_hat = 0.999**k * v / (1 - 0.999**j)
             return -float(np.sum(rates * m_hat / (np.sqrt(v_hat) + 1e-8)))
         """, "the touch step is not skipped"),
    ],
    "decay_over_gap": [
        ("""
         def decay_over_gap(rates, weight_decay):
             return (1 - rates[-1] * weight_decay) ** len(rates)
         """, "the current-rate shortcut"),
        ("""
         def decay_over_gap(rates, weight_decay):
             factor = 1.0
             for lr in rates[:-1]:
                 factor *= 1 - lr * weight_decay
             return factor
         """, "the touch step decays too"),
        ("""
         def decay_over_gap(rates, weight_decay):
             return 1 - weight_decay * np.sum(rates)
         """, "not 1 - wd * sum(lr_j)"),
    ],
    "which_eps_placement": [
        ("""
         def which_eps_placement(p0, g, p1, lr, beta1, beta2, eps):
             updates = {
                 "sqrt(v_hat) + eps": lr * g / (np.abs(g) + eps),
                 "sqrt(v) + eps": lr * g / (np.abs(g) + eps / np.sqrt(1 - beta2)),
                 "sqrt(v_hat + eps)": lr * g / np.sqrt(g**2 + eps),
             }
             return min(updates, key=lambda k: np.max(np.abs((p1 - p0) - updates[k])))
         """, "yours compares with the wrong sign"),
        ("""
         def which_eps_placement(p0, g, p1, lr, beta1, beta2, eps):
             updates = {
                 "sqrt(v_hat) + eps": lr * g / (np.abs(g) + eps),
                 "sqrt(v) + eps": lr * g / (np.abs(g) + eps / np.sqrt(1 - beta2)),
                 "sqrt(v_hat + eps)": lr * g / np.sqrt(g**2 + eps),
             }
             return min(updates, key=lambda k: abs((p0 - p1)[0] - updates[k][0]))
         """, "decide from all coordinates"),
        ("""
         def which_eps_placement(p0, g, p1, lr, beta1, beta2, eps):
             return 0
         """, "placement should be a str, got an int"),
    ],
    "stagnates": [
        ("""
         def stagnates(p, d):
             return np.abs(d) < np.spacing(np.abs(p)) / 2
         """, "misses two cases"),
        ("""
         def stagnates(p, d):
             return (p + d.astype(np.float16)) == p
         """, "was rounded to float16 before the sum"),
    ],
    "stochastic_round": [
        ("""
         def stochastic_round(x, u):
             return x.astype(np.float16)
         """, "that is round to nearest"),
        ("""
         def stochastic_round(x, u):
             near = x.astype(np.float16)
             below = np.abs(near.astype(np.float64)) > np.abs(x)
             return np.where(below, np.nextafter(near, np.float16(0)), near)
         """, "always rounds the magnitude down"),
        ("""
         def stochastic_round(x, u):
             a = np.abs(x)
             near = a.astype(np.float16)
             lo = np.where(near.astype(np.float64) > a, np.nextafter(near, np.float16(0)), near)
             hi = np.nextafter(lo, np.float16(np.inf))
             f = (a - lo.astype(np.float64)) / (hi.astype(np.float64) - lo.astype(np.float64))
             return np.copysign(np.where(u > f, hi, lo), x).astype(np.float16)
         """, "rounds up with probability 1 - f"),
    ],
}


def test_every_exercise_has_planted_wrong_answers() -> None:
    assert set(PLANTED) == set(NAMES)
    assert all(len(answers) >= 2 for answers in PLANTED.values())


@pytest.mark.parametrize(
    ("name", "source", "phrase"),
    [(name, source, phrase) for name, answers in PLANTED.items() for source, phrase in answers],
    ids=[f"{name}-{k}" for name, answers in PLANTED.items() for k in range(len(answers))],
)
def test_planted_wrong_answer_fails_with_the_right_message(name: str, source: str, phrase: str) -> None:
    result = ex.check(define(source, name))
    assert not result.passed and result.attempted, result.report()
    assert phrase in result.message, result.report()
    if phrase in " ".join(diagnosis_messages(ex.get(name))):
        assert result.message in diagnosis_messages(ex.get(name))
    again = ex.check(define(source, name))
    assert str(again) == str(result) and again._repr_html_() == result._repr_html_()  # deterministic


def test_each_exercise_has_at_least_two_planted_answers_recognised_as_known_mistakes() -> None:
    for name, answers in PLANTED.items():
        known = diagnosis_messages(ex.get(name))
        hits = sum(ex.check(define(source, name)).message in known for source, _ in answers)
        assert hits >= 2, name


# ---------------------------------------------------------------- the report


def test_report_of_a_known_mistake() -> None:
    source, _ = PLANTED["coalesce"][0]
    result = ex.check(define(source, "coalesce"))
    assert str(result) == textwrap.dedent(
        """\
        coalesce: failed on case 'duplicates are summed'
          MESSAGE
          first difference at values[0]: expected 3, got 2 (off by 1)
          inputs:
            indices = [7, 2, 7, 5, 2, 7]
            values = [0.5, 1, 0.25, -1, 2, 0.125]
          expected:
            indices = [2, 5, 7]
            values = [3, -1, 0.875]
          got:
            indices = [2, 5, 7]
            values = [2, -1, 0.125]"""
    ).replace("MESSAGE", "duplicates were overwritten instead of summed: `out[inverse] = values` (or `+=`) keeps one "
              "value per index; np.add.at(out, inverse, values) adds them all")
    assert repr(result) == str(result)
    assert result.case == "duplicates are summed" and set(result.inputs) == {"indices", "values"}
    np.testing.assert_array_equal(result.expected[1], [3.0, -1.0, 0.875])
    np.testing.assert_array_equal(result.got[1], [2.0, -1.0, 0.125])
    html = result._repr_html_()
    assert "&#x27;duplicates are summed&#x27;" in html and "<pre" in html


def test_report_ignores_numpy_print_options() -> None:
    source, _ = PLANTED["adam_step"][0]
    plain = str(ex.check(define(source, "adam_step")))
    with np.printoptions(precision=2, floatmode="fixed", threshold=3, linewidth=20):
        assert str(ex.check(define(source, "adam_step"))) == plain


def test_a_conformance_candidate_is_located_by_step_row_and_column() -> None:
    source, _ = PLANTED["LazyAdam"][1]  # per-row counter: differs where a row is first touched late
    result = ex.check(define(source, "LazyAdam"))
    assert result.case == "an empty step still advances the global step"
    assert result.detail.startswith("first difference in table at step 3, row 1, col 0: expected ")
    assert result.outputs == ("table after step 3",) and np.shape(result.expected) == (4, 2)


def test_empty_bodies_are_not_attempted() -> None:
    def coalesce(indices, values):  # noqa: ANN001, ANN202
        ...

    def coo_to_csr(linear_indices, values, shape):  # noqa: ANN001, ANN202
        """Docstring only."""

    def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):  # noqa: ANN001, ANN202
        pass

    assert str(ex.check(coalesce)) == "not attempted yet: coalesce has an empty body"
    assert str(ex.check(coo_to_csr)) == "not attempted yet: coo_to_csr has an empty body"
    assert str(ex.check(lazy_sgd_step)) == "not attempted yet: lazy_sgd_step has an empty body"
    partial = define(
        """
        class LazyAdam:
            def __init__(self, table, lr, beta1, beta2, eps):
                self.params = table

            def step(self, row_ids, row_grads):
                pass

            def table(self):
                return self.params
        """,
        "LazyAdam",
    )
    assert str(ex.check(partial)) == "not attempted yet: LazyAdam.step has an empty body"


def test_a_partly_written_class_names_the_method_still_to_write() -> None:
    partial = define(
        """
        class LazyAdam:
            def __init__(self, table, lr, beta1, beta2, eps):
                self.params = table

            def step(self, row_ids, row_grads):
                self.params = self.params

            def table(self):
                raise NotImplementedError  # your code here
        """,
        "LazyAdam",
    )
    assert str(ex.check(partial)) == "not attempted yet: LazyAdam.table still raises NotImplementedError"


def test_odd_return_values_are_reported_not_raised() -> None:
    class Weird:
        def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
            raise RuntimeError("no array here")

    for returned in ("text", Weird(), [1, [2, 3]], (1, 2, 3), {"a": 1}, (Weird(), Weird())):
        def coalesce(indices, values, _r=returned):  # noqa: ANN001, ANN202
            return _r

        result = ex.check(coalesce)
        assert not result.passed and result.attempted and result.message, returned
        assert "could not judge" not in result.message, result.message  # judged as a wrong answer, not a crash
        assert str(result)  # the report renders


def test_wrong_shapes_and_dtypes_get_generic_messages() -> None:
    def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):  # noqa: ANN001, ANN202
        return (lr * m / (np.sqrt(v) + eps))[:1]

    assert ex.check(bias_corrected_update).message == "update has shape (1,), expected shape (3,)"

    def coo_to_csr(linear_indices, values, shape):  # noqa: ANN001, ANN202
        row, col = np.divmod(linear_indices, shape[1])
        counts = np.bincount(row, minlength=shape[0])
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32), col, values

    assert ex.check(coo_to_csr).message == "row_offsets has dtype int32, expected int64"


# ---------------------------------------------------------------- the module-level API


def test_check_dispatches_by_name_or_by_the_name_argument() -> None:
    answer = define(ex.solution("coalesce"), "coalesce")
    assert ex.check(answer).passed
    answer.__name__ = "my_coalesce"
    assert ex.check(answer, name="coalesce").passed
    unknown = ex.check(answer)
    assert not unknown.passed and not unknown.attempted
    assert unknown.message.startswith("there is no exercise named 'my_coalesce'; the exercises (lesson) are: ")
    assert all(f"{e.name} ({e.lesson})" in unknown.message for e in ex.EXERCISES)
    assert str(unknown) == unknown.message


def test_check_of_something_that_is_not_a_function() -> None:
    result = ex.check((np.array([1]), np.array([1.0])))
    assert not result.passed and "check needs the function itself (e.g. check(coalesce))" in result.message
    result = ex.get("coalesce").check(3)
    assert not result.passed and "write check(coalesce), not check(coalesce(...))" in result.message


def test_lookups() -> None:
    assert [e.name for e in ex.for_lesson("03")] == [
        "adam_step", "bias_corrected_update", "dormancy_decay_moments", "adam_catch_up"
    ]
    assert ex.for_lesson(3) == ex.for_lesson("3") == ex.for_lesson("03")
    assert ex.for_lesson("99") == []
    assert ex.get("coalesce").lesson == "01"
    with pytest.raises(LookupError, match="there is no exercise named 'nope'"):
        ex.hint("nope")
    with pytest.raises(LookupError, match="coalesce \\(01\\)"):
        ex.solution("nope")
    assert repr(ex.get("coalesce")) == (
        "<Exercise coalesce (lesson 01): sort a coordinate list and sum the values of repeated indices>"
    )
    for e in ex.EXERCISES:
        assert e.statement.splitlines()[0].startswith(("class " + e.name, e.name + "("))
        assert repr(ex.solution(e.name)) == e.solution_source  # displays as plain text


def test_hint_numbers_out_of_range() -> None:
    assert ex.hint("coalesce", 9) == "coalesce has hints 1 to 3; there is no hint 9."


def test_lazy_adam_diagnoses_start_from_the_reference() -> None:
    """The plain loop the diagnoses vary is SparseAdamTable's LAZY: each variant is one mistake away from it."""
    from sparse_opt.exercises.lesson08 import _lazy_adam_class

    exercise = ex.get("LazyAdam")
    for case in exercise.cases:
        expected = exercise.expected(case)
        loop = _lazy_adam_class()(case.inputs["table"], *(case.inputs[k] for k in ("lr", "beta1", "beta2", "eps")))
        for k, step in enumerate(case.inputs["steps"].values()):
            loop.step(step["row_ids"], step["row_grads"])
            np.testing.assert_allclose(loop.table(), expected[k], rtol=1e-13, atol=1e-15, err_msg=case.name)
