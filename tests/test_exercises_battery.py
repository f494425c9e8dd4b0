"""Every exercise against a battery of generic wrong answers derived from its model answer.

Each wrong answer is the model answer with its result changed in one generic
way (negated, shifted, as lists, in another dtype, an output missing or one
too many, None, always-equal objects, lying subclasses, objects that only
convert to the right answer, an ``__array__`` that raises, an exception). Every
one must get a judged, failed verdict that names the case -- never "the checker
could not judge". The battery iterates over the registry, so a new exercise is
covered without being listed here.

No exercise's statement allows any of these changes (an array output is "a new
array", a scalar "a float", the placement one of three strings; an int32 or
float32 result is not what the statements ask for, and float32 cannot meet the
tolerance). The same answer in another form -- a list for the tuple of outputs, a
Python float for a 0-d array and the reverse, an ndarray subclass that
overrides nothing -- is asserted to pass, with where each form applies listed
exercise by exercise (:data:`ALLOWED_FOR`).
"""

from __future__ import annotations

import copy
import inspect
import textwrap
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt import exercises as ex
from sparse_opt.exercises._compare import Output, compare
from sparse_opt.exercises._core import Exercise

NAMES = [e.name for e in ex.EXERCISES]


def model_answer(exercise: Exercise) -> Any:
    """The exercise's model solution, defined as a learner would (with ``np`` and ``so`` imported)."""
    namespace = {"np": np, "so": so}
    exec(compile(textwrap.dedent(exercise.solution_source), f"<{exercise.name}>", "exec"), namespace)
    return namespace[exercise.name]


# ---------------------------------------------------------------- objects that lie


class LyingFloat(float):
    """Holds a wrong number; says it equals anything and converts (``float``, ``__array__``) to the right one."""

    claimed: Any

    def __new__(cls, held: float, claimed: Any) -> LyingFloat:
        obj = super().__new__(cls, held)
        obj.claimed = claimed
        return obj

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = float.__hash__

    def __float__(self) -> float:
        return float(self.claimed)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.claimed, dtype=dtype)

    def __sub__(self, other: object) -> float:
        return 0.0

    __rsub__ = __sub__

    def __abs__(self) -> float:
        return abs(float(self.claimed))


class LyingArray(np.ndarray):
    """Holds wrong numbers; every method and protocol numpy or a checker might ask answers with the right ones."""

    claimed: Any = None

    def __array_finalize__(self, obj: Any) -> None:
        self.claimed = getattr(obj, "claimed", None)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return np.ones(np.shape(self.claimed), dtype=bool)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return np.zeros(np.shape(self.claimed), dtype=bool)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.claimed, dtype=dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        honest = [np.asarray(x.claimed) if isinstance(x, LyingArray) else x for x in inputs]
        return getattr(ufunc, method)(*honest, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        honest = [np.asarray(x.claimed) if isinstance(x, LyingArray) else x for x in args]
        return func(*honest, **kwargs)

    def __getitem__(self, item: Any) -> Any:
        return np.asarray(self.claimed)[item]

    def tolist(self) -> Any:  # type: ignore[override]
        return np.asarray(self.claimed).tolist()

    def astype(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return np.asarray(self.claimed).astype(*args, **kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return np.array(self.claimed)


def lying_array(held: np.ndarray, claimed: np.ndarray) -> LyingArray:
    out = np.ndarray.view(np.array(held), LyingArray)
    out.claimed = claimed
    return out


class LyingStr(str):
    """Holds a wrong string; says it equals anything and prints as the right one."""

    claimed: str

    def __new__(cls, held: str, claimed: str) -> LyingStr:
        obj = super().__new__(cls, held)
        obj.claimed = claimed
        return obj

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.claimed

    def __repr__(self) -> str:
        return repr(self.claimed)


class LyingTuple(tuple):
    """Holds wrong outputs; its length, items and iteration show the right ones."""

    claimed: tuple[Any, ...]

    def __new__(cls, held: tuple[Any, ...], claimed: tuple[Any, ...]) -> LyingTuple:
        obj = super().__new__(cls, held)
        obj.claimed = claimed
        return obj

    def __len__(self) -> int:
        return len(self.claimed)

    def __iter__(self) -> Any:
        return iter(self.claimed)

    def __getitem__(self, item: Any) -> Any:
        return self.claimed[item]

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = tuple.__hash__


class ConvertsToIt:
    """Not a number, an array or a string, but converts to the right one by every protocol and equals it."""

    def __init__(self, claimed: Any) -> None:
        self.claimed = claimed

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.claimed, dtype=dtype)

    def __float__(self) -> float:
        return float(self.claimed)

    def __str__(self) -> str:
        return str(self.claimed)

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class ArrayRaises:
    """An object whose conversions raise."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no array here")

    def __float__(self) -> float:
        raise RuntimeError("no float here")


# ---------------------------------------------------------------- the battery

#: The harness's own control: the model answer's result passed through unchanged.
UNCHANGED = "unchanged"


def _numeric(x: Any, on_float: Callable[[np.ndarray], np.ndarray], on_int: Callable[[np.ndarray], np.ndarray],
             on_str: Callable[[str], Any]) -> Any:
    """``x`` (one output) changed by ``on_float``, ``on_int`` or ``on_str``, keeping its kind (array or scalar)."""
    if x is None:
        return None
    if isinstance(x, str):
        return on_str(x)
    a = np.asarray(x)
    changed = on_float(a) if a.dtype.kind == "f" else on_int(a)
    if isinstance(x, np.ndarray):
        return changed
    if isinstance(x, np.generic) or changed.dtype != a.dtype:  # a Python number in a new dtype: a numpy scalar
        return changed[()]
    return changed.item()


def _wrong(x: Any) -> Any:
    """A clearly wrong version of ``x`` (what the lying objects hold)."""
    return _numeric(x, lambda a: a + 1 + np.abs(a), lambda a: a + 1000, lambda s: "not a placement")


def _leaf_transforms(exercise: Exercise) -> dict[str, Callable[[Any], Any]]:
    """Changes to one output, by name."""

    def small(a: np.ndarray) -> np.ndarray:  # ten times the exercise's tolerance
        return a + 10 * (exercise.atol + exercise.rtol * np.abs(a))

    def lying(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, str):
            return LyingStr(_wrong(x), x)
        if isinstance(x, np.ndarray):
            return lying_array(_wrong(x), x)
        return LyingFloat(float(_wrong(x)), x)

    return {
        UNCHANGED: lambda x: x,
        "negated": lambda x: _numeric(x, np.negative, np.negative, lambda s: s[::-1]),
        "shifted just beyond the tolerance": lambda x: _numeric(x, small, lambda a: a + 1, lambda s: s + " "),
        "shifted by a large amount": lambda x: _numeric(x, lambda a: a + 1 + np.abs(a), lambda a: a + 1000,
                                                        str.upper),
        "as Python lists": lambda x: x.tolist() if isinstance(x, np.ndarray) else (None if x is None else [x]),
        "in another dtype": lambda x: _numeric(
            x, lambda a: a.astype(np.float32), lambda a: a.astype(np.int32), str.encode
        ),
        "each output unittest.mock.ANY": lambda x: mock.ANY,
        "each output a spec'd Mock": lambda x: mock.Mock(spec=type(x)),
        "each output a lying subclass": lying,
        "each output an object that converts to it": lambda x: None if x is None else ConvertsToIt(x),
        "each output an object whose __array__ raises": lambda x: ArrayRaises(),
    }


#: Changes to the whole result (``outputs`` is the tuple of outputs, ``single`` whether there is one).
WHOLE: dict[str, Callable[[tuple[Any, ...], bool], Any]] = {
    "None": lambda outputs, single: None,
    "unittest.mock.ANY": lambda outputs, single: mock.ANY,
    "one output missing": lambda outputs, single: outputs[:-1],
    "one output too many": lambda outputs, single: (*outputs, outputs[-1]),
    "a tuple subclass that shows the right outputs but holds wrong ones": lambda outputs, single: LyingTuple(
        tuple(_wrong(x) for x in outputs), outputs
    ),
}

#: Leaf changes that an in-place exercise's answer writes into the arrays it was given.
WRITTEN_IN_PLACE = (
    UNCHANGED, "negated", "shifted just beyond the tolerance", "shifted by a large amount", "in another dtype"
)

RAISES = "a function that raises"
WRONG_ANSWERS = [change for change in _leaf_transforms(ex.EXERCISES[0]) if change != UNCHANGED] + [*WHOLE, RAISES]


def _apply(change: str, exercise: Exercise, result: Any, single: bool) -> Any:
    """``result`` (one output, or a tuple of them) changed by ``change``."""
    outputs = (result,) if single else tuple(result)
    if change in WHOLE:
        return WHOLE[change](outputs, single)
    changed = tuple(map(_leaf_transforms(exercise)[change], outputs))
    return changed[0] if single else changed


def wrong_answer(exercise: Exercise, change: str) -> Any:
    """The exercise's model answer, with its result changed by ``change``; named as the exercise."""
    model = model_answer(exercise)
    if isinstance(model, type):  # a class: what table() returns is judged

        class Wrong(model):  # type: ignore[misc, valid-type]
            def step(self, *args: Any) -> None:
                if change == RAISES:
                    raise RuntimeError("planted")
                super().step(*args)

            def table(self) -> Any:
                return _apply(change, exercise, super().table(), True)

        Wrong.__name__ = Wrong.__qualname__ = exercise.name
        return Wrong

    names = list(inspect.signature(model).parameters)

    def answer(*args: Any) -> Any:
        if change == RAISES:
            raise RuntimeError("planted")
        if not exercise.in_place:
            returned = model(*args)
            return _apply(change, exercise, returned, not isinstance(returned, tuple))
        written = [names.index(k) for k in exercise.in_place]
        if change in WRITTEN_IN_PLACE:  # wrong values, written where they belong
            model(*args)
            for i in written:
                if args[i] is not None:
                    args[i][...] = _leaf_transforms(exercise)[change](args[i])
            return None
        copies = copy.deepcopy(list(args))  # the right values, returned in a wrong form and not written
        model(*copies)
        outputs = tuple(copies[i] for i in written)
        return _apply(change, exercise, outputs[0] if len(outputs) == 1 else outputs, len(outputs) == 1)

    answer.__name__ = answer.__qualname__ = exercise.name
    return answer


@pytest.mark.parametrize("change", WRONG_ANSWERS)
@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_a_generic_wrong_answer_is_judged_and_fails_on_a_named_case(exercise: Exercise, change: str) -> None:
    result = ex.check(wrong_answer(exercise, change))
    report = str(result)  # the report renders, whatever the answer held
    assert "could not judge" not in result.message, report
    assert not result.passed and result.attempted, report
    assert result.case in [c.name for c in exercise.cases], report
    assert report.startswith(f"{exercise.name}: failed on case '{result.case}'\n"), report
    again = ex.check(wrong_answer(exercise, change))
    assert str(again) == report  # deterministic: no memory address, no state carried between checks


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_the_battery_harness_alone_changes_nothing(exercise: Exercise) -> None:
    """The model answer passed through the harness unchanged still passes: the failures above are the changes'."""
    result = ex.check(wrong_answer(exercise, UNCHANGED))
    assert result.passed, result.report()


# ---------------------------------------------------------------- what the contracts allow


def _swap_scalar(x: Any) -> Any:
    """A 0-d array as a Python float, a Python or numpy float as a 0-d array; anything else unchanged."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    if isinstance(x, (float, np.floating)):
        return np.asarray(x)
    return x


class PlainSubclass(np.ndarray):
    """An ndarray subclass that overrides nothing."""


def _as_subclass(x: Any) -> Any:
    return np.ndarray.view(x, PlainSubclass) if isinstance(x, np.ndarray) and x.ndim else x


ALLOWED: dict[str, Callable[[Any], Any]] = {
    "a scalar as a 0-d array, or a 0-d array as a Python float": _swap_scalar,
    "arrays as an ndarray subclass that overrides nothing": _as_subclass,
}

#: Where each allowed form applies (where the model answer returns such a value), by the exercise's statement.
ALLOWED_FOR = {
    "a scalar as a 0-d array, or a 0-d array as a Python float": {
        "sgd_catch_up", "relative_divergence", "train_step", "egdd_lr_scale_update", "state_bytes_per_param",
        "skipped_displacement", "decay_over_gap",
    },
    "arrays as an ndarray subclass that overrides nothing": {
        "coalesce", "coo_to_csr", "sgd_catch_up", "adam_step", "bias_corrected_update", "dormancy_decay_moments",
        "adam_catch_up", "factored_second_moment", "adafactor_row_col_update", "egdd_gain_update", "LazyAdam",
        "stagnates", "stochastic_round",
    },
}


def _allowed_answer(exercise: Exercise, form: str) -> tuple[Any, list[bool]]:
    """The model answer with its outputs in the allowed ``form``; and, per call, whether the form changed them."""
    model = model_answer(exercise)
    change = ALLOWED[form]
    changed: list[bool] = []

    def convert(result: Any) -> Any:
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        new = tuple(change(x) for x in outputs)
        changed.append(any(type(a) is not type(b) for a, b in zip(outputs, new, strict=True)))
        return new[0] if single else list(new)  # the outputs as a list, not a tuple, too

    if isinstance(model, type):

        class Allowed(model):  # type: ignore[misc, valid-type]
            def table(self) -> Any:
                return convert(super().table())

        Allowed.__name__ = exercise.name
        return Allowed, changed

    def answer(*args: Any) -> Any:
        return convert(model(*args))

    answer.__name__ = exercise.name
    return answer, changed


@pytest.mark.parametrize("form", list(ALLOWED))
@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=NAMES)
def test_forms_the_contract_allows_pass(exercise: Exercise, form: str) -> None:
    answer, changed = _allowed_answer(exercise, form)
    result = ex.check(answer)
    assert result.passed, result.report()
    assert any(changed) == (exercise.name in ALLOWED_FOR[form]), (form, exercise.name)


def test_the_outputs_may_come_as_a_list_but_an_array_may_not() -> None:
    """``-> (indices, values)``: a list of the two is the same answer; a list of numbers is not an array."""
    model = model_answer(ex.get("coalesce"))

    def coalesce(indices, values):  # noqa: ANN001, ANN202
        return list(model(indices, values))

    assert ex.check(coalesce).passed

    def coalesce(indices, values):  # noqa: ANN001, ANN202, F811
        unique, summed = model(indices, values)
        return unique.tolist(), summed.tolist()

    result = ex.check(coalesce)
    assert result.message == "indices should be a numpy array, got a list of 3 items"
    assert result.case == "sorted, no duplicates"


# ---------------------------------------------------------------- the defects of issue 16, one by one


def _only_in(case_name: str, exercise: Exercise) -> Any:
    """The model answer, wrong (shifted by a large amount) only on the case called ``case_name``."""
    case = next(c for c in exercise.cases if c.name == case_name)
    answer = wrong_answer(exercise, "shifted by a large amount")
    model = model_answer(exercise)

    def only_there(*args: Any) -> Any:
        same = all(
            (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
            for a, b in zip(args, case.inputs.values(), strict=True)
        )
        return (answer if same else model)(*args)

    only_there.__name__ = exercise.name
    return only_there


@pytest.mark.parametrize(
    ("name", "case_name"),
    [
        ("coalesce", "rows of an embedding lookup (2-D values)"),
        ("coo_to_csr", "one entry per row"),
        ("adafactor_row_col_update", "the first step replaces the zeros (1 - beta2_t = 1)"),
        ("lazy_sgd_step", "weight decay without momentum (buf is None)"),
        ("sgd_catch_up", "no momentum: pure decay (buf is None)"),
    ],
)
def test_an_undiagnosed_wrong_answer_is_shown_with_its_case_expected_and_got(name: str, case_name: str) -> None:
    """Was 'the checker could not judge ...: ValueError: ... inhomogeneous shape' (np.asarray of the outputs)."""
    exercise = ex.get(name)
    result = ex.check(_only_in(case_name, exercise))
    assert not result.passed and result.case == case_name, result.report()
    assert result.message.startswith("first difference "), result.report()
    assert result.sections == ("inputs", "expected", "got")


def test_an_undiagnosed_wrong_train_step_is_shown_with_its_case() -> None:
    def train_step(table, opt, ids, targets):  # noqa: ANN001, ANN202
        opt.catch_up(ids)
        rows = table[ids]
        opt.step(so.CsrGradient.from_rows(ids, 3 * (rows - targets), table.shape[0]))
        return 0.5 * float(np.sum((rows - targets) ** 2))

    result = ex.check(train_step)
    assert result.case == "one step", result.report()
    assert result.message.startswith("first difference in table at row 1, col 0: expected "), result.report()
    assert "expected:" in str(result) and "got:" in str(result)


@pytest.mark.parametrize(
    ("name", "returned", "message"),
    [
        ("which_eps_placement", mock.ANY, "placement should be a str, got an _ANY"),
        ("which_eps_placement", LyingStr("no", "sqrt(v_hat) + eps"),
         "placement: expected 'sqrt(v_hat) + eps', got 'no'"),
        ("relative_divergence", mock.ANY, "divergence should be a number, got an _ANY"),
        ("relative_divergence", LyingFloat(5.0, 0.0), "first difference in divergence: expected 0, got 5 (off by 5)"),
        ("coalesce", (mock.ANY, mock.ANY), "indices should be a numpy array, got an _ANY"),
        ("coalesce", (ConvertsToIt([1, 4, 6]), np.zeros(3)), "indices should be a numpy array, got a ConvertsToIt"),
        ("coalesce", (lying_array(np.array([1, 4, 7]), np.array([1, 4, 6])), np.array([0.5, -1.0, 2.0])),
         "first difference at indices[2]: expected 6, got 7"),
        ("coalesce", (np.array([1, 4, 6]), mock.Mock(spec=np.ndarray)), "values should be a numpy array, got a Mock"),
    ],
    ids=["ANY-str", "lying-str", "ANY-float", "lying-float", "ANY-array", "converts", "lying-array", "mock"],
)
def test_objects_that_lie_are_judged_by_what_they_hold(name: str, returned: Any, message: str) -> None:
    """which_eps_placement passed a learner returning unittest.mock.ANY; lying subclasses passed everywhere."""

    def answer(*args: Any) -> Any:
        return returned

    answer.__name__ = name
    result = ex.check(answer)
    assert not result.passed and result.message == message, result.report()
    assert result.case == ex.get(name).cases[0].name


def test_a_float32_answer_is_told_its_dtype() -> None:
    """Was 'first difference ... (off by 4.23e-09)' with expected and got listed alike."""
    model = model_answer(ex.get("coalesce"))

    def coalesce(indices, values):  # noqa: ANN001, ANN202
        unique, summed = model(indices, values)
        return unique, summed.astype(np.float32)

    result = ex.check(coalesce)
    assert result.message == "values has dtype float32, expected float64", result.report()
    assert str(result).endswith("values = [0.5, -1, 2]  (dtype float32)")

    model = model_answer(ex.get("adam_step"))

    def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):  # noqa: ANN001, ANN202
        p, m, v = model(p, m, v, g, t, lr, beta1, beta2, eps)
        return p.astype(np.float32), m, v

    result = ex.check(adam_step)  # float32 rounding is beyond the tolerance: the dtype is named, not the values
    assert result.message == "p has dtype float32, expected float64", result.report()
    assert result.case == ex.get("adam_step").cases[0].name


def test_close_numbers_are_listed_with_the_digits_that_tell_them_apart() -> None:
    """Expected and got differ by 3e-9 relative: at six digits they would be listed identically."""
    model = model_answer(ex.get("adam_step"))

    def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):  # noqa: ANN001, ANN202
        p, m, v = model(p, m, v, g, t, lr, beta1, beta2, eps)
        return p * (1 + 3e-9), m, v

    result = ex.check(adam_step)
    assert result.message == "first difference at p[0]: expected 0.900000002, got 0.9000000047 (off by 2.7e-09)"
    text = str(result)
    assert "    p = [0.900000002, -0.9, 0.40000001]\n" in text  # expected, at nine digits
    assert "    p = [0.900000005, -0.900000003, 0.400000011]\n" in text  # got
    assert "    m = [0.05, -0.2, 0.01]\n" in text


def test_the_first_difference_takes_up_to_17_digits() -> None:
    e, g = 1.0, float(np.nextafter(1.0, 2.0))
    found = compare(np.array([e]), np.array([g]), [Output("x")], who="f", rtol=0.0, atol=0.0)
    assert found is not None and found.text == (
        "first difference at x[0]: expected 1, got 1.0000000000000002 (off by 2.22e-16)"
    )
    assert found.digits == 17


def test_a_candidate_may_return_its_own_table_without_copying_it() -> None:
    """table() may return the array it keeps updating: each step's table is recorded as it was then."""
    model = model_answer(ex.get("LazyAdam"))

    class LazyAdam(model):  # type: ignore[misc, valid-type]
        def table(self) -> np.ndarray:
            return self.params

    assert ex.check(LazyAdam).passed
