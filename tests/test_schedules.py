"""``so.schedules``: the learning-rate schedules against hand-derived values, exact values and real torch.

Three oracles, none of them the module itself:

- hand-derived values: exact fractions (``fractions.Fraction`` of the float64
  arguments) for the rational schedules, special angles (``cos(pi/3) = 1/2``,
  ``cos(pi/4) = sqrt(2)/2``, ...) for the cosine, ``decimal`` logarithms for a
  power at ``t = 2**62``;
- ``tests/golden/round3_schedules_rates.npz`` (``make_torch_schedules.py``):
  the rates of torch 2.13's ``LambdaLR`` (with the SPEC's formulas written out
  in the generator), ``LinearLR``, ``CosineAnnealingLR``, ``SequentialLR``,
  ``StepLR`` and ``ExponentialLR``, with the SPEC's closed forms evaluated in
  mpmath at 50 digits;
- the same schedulers live, when torch is installed (:func:`test_live_torch`).

The trajectory goldens (``round3_schedules_<case>.npz``: torch Adam, AdamW,
SGD and Adagrad driven by those schedulers) are checked here against a plain
float64 numpy transcription of torch's update rules (:func:`dense_reference`)
driven by the *kit's* schedule: this pins the SPEC's equivalence ("the
``t``-th ``opt.step()`` runs at rate ``f(t)``") on whole runs, and measures
what the recursive torch schedulers' rounding does to a trajectory.
``tests/test_torch_golden_schedules.py`` replays the same files through the
kit's optimizers.

Error bounds are in units of ``U = 2**-53`` (float64's unit roundoff), derived
from the number of roundings of each closed form (see :data:`KIT_ULPS`).
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import subprocess
import sys
import warnings
from dataclasses import FrozenInstanceError
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparse_opt
import sparse_opt as so
from sparse_opt import schedules

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
U = 2.0**-53

#: Relative error of each built-in against the exact closed form, in units of ``U``, by counting roundings:
#: ``linear_warmup``: ``t / W`` and ``lr * .`` are correctly rounded: ``2U + U**2``. ``step_decay``,
#: ``exponential``: glibc's ``pow`` is within 1 ulp (<= 2U relative), then ``lr * .``: 3U. ``warmup_cosine``:
#: the angle ``pi * (T - t) / (2 (T - W))`` carries ``fl(pi)``'s 0.35U and two roundings, which ``sin`` keeps
#: (condition ``x cot x <= 1`` on ``[0, pi/2]``) and adds its own 1 ulp (2U): 4.4U; squaring doubles it and
#: rounds (9.8U); ``lr - final_lr``, the product and the sum with ``final_lr`` (all terms >= 0) add 3U: 13U.
#: Observed on the golden cases: 1.9U, 2.0U, 2.0U and 6.0U.
KIT_ULPS = {"constant": 0.0, "linear_warmup": 2.0 + U, "step_decay": 3.0, "exponential": 3.0, "warmup_cosine": 13.0}

#: The exact rates are stored as 30 significant digits: their own relative rounding is below 1e-29.
DIGITS_SLACK = Fraction(1, 10**29)

#: Largest relative difference between the kit and torch's own schedulers over the golden cases (torch
#: 2.13.0+cpu), which is torch's error: its schedulers compute each epoch's rate from the previous one
#: (``make_torch_schedules.py`` has the formulas and the measurements). Bounds a little above the observed:
#: LinearLR 1.24e-15 (warm-up of 50), StepLR 6.1e-16, ExponentialLR 5.4e-15 (3000 epochs of 0.999),
#: CosineAnnealingLR/SequentialLR 4.3e-15 with ``eta_min > 0`` and 1.37e-13 with ``eta_min = 0``, where the
#: rate goes to 0 and the recursion divides ``1 + cos`` terms near ``cos = -1``. ``LambdaLR`` runs the SPEC's
#: formula as written: the same floats as the kit except for the cosine, whose ``1 + cos(x)`` cancels near
#: the end (5.6e-15; the kit's ``sin**2`` form is within 6U of exact, the literal one is not).
TORCH_RTOL = {
    "LinearLR": 1.5e-15,
    "StepLR": 1e-15,
    "ExponentialLR": 6e-15,
    "CosineAnnealingLR": 5e-15,
    "SequentialLR": 5e-15,
    "eta_min_0": 1.5e-13,
    "LambdaLR": 0.0,
    "LambdaLR_cosine": 6e-15,
}

#: sha256 of every round-3 schedule golden file's arrays (the generator's ``content_digest``).
DIGESTS: dict[str, str] = {
    "adagrad_lambda_exponential": "bdc1d49908aa5eddaa64197c30f6d15054d38b21fb7238eeccec04723af786aa",
    "adagrad_lambda_linear_warmup": "95cefdfe2cda66954b841386bd5d82a14b23f7a5c8d451b37b00673607c60e2a",
    "adagrad_lambda_step_decay": "04662261677d323cfea7d9a61ea5c79c66a8540950767320838a260c9c1a24b4",
    "adagrad_lambda_warmup_cosine": "a142095a2b2c0b5f1990e4a7879949664deb20b0be9441db11dbe9ed9e793e12",
    "adagrad_lambda_warmup_cosine_float32": "2b7b8de278d6c6fb5a2120d6051cfe726bf722cb1667d32fee9febdfe03d83c8",
    "adagrad_torch_sequential": "2113ea5076f83f27f639533cc525a1dd4f59bcaa8d896bf45478466a3df60f7f",
    "adagrad_torch_step": "bb828ab19b0550130e543584ff8644884b48722d7ca1ef685bf041ae4040e39f",
    "adam_lambda_linear_warmup": "79ce68cb1b6fdb8139179b22d0f64a308282585d7641c9fb48a930ce607882b1",
    "adam_lambda_step_decay_b2_09999": "9107df5f4105e83dc16667bf85576594d7377eadd6ce3e94b663b9947a3ad8e6",
    "adam_lambda_warmup_cosine_eps0": "80c6be271f4a331ea9f235bc074e4b03902e6303b88c9575663c15f9e90f10a7",
    "adam_torch_linear_b2_09999": "ec572cbd20f8b247f25b46eddb10ae942729a1df185be33ecbaae97e84d9b183",
    "adam_torch_sequential_float32": "93225f80bb31dbb82d6e065c01e1fef82611887e13646e87d5c56e34a29ce60e",
    "adam_torch_step": "169eed9e3fdbb72c96e95f0bf4b07d0bb6155ab5d710189c28aaa8dc35c84099",
    "adamw_lambda_exponential_eps0": "998ca515ad4fc0e5e452e9f1ac29da65f493a6a1e8626e967420d1533deec7af",
    "adamw_lambda_linear_warmup_b2_09999": "49d1dd9d601f166b1b7becb18d17fab9d2aa25282e2d99933abccae4f52cafe7",
    "adamw_lambda_warmup_cosine": "a6cb5cfe666fbd5c960b68addf093db4094abca13d11e4f9545320db34c4121e",
    "adamw_lambda_warmup_cosine_float32": "ce52b14a6abb2694e224e5373e9bdd26e9a0d490c79755adcb1dbb9934fd655c",
    "adamw_torch_cosine": "cf8153fedb98baf36c9a3deea12c4456021d37808cd2ada63400f86122623566",
    "adamw_torch_exponential_b2_09999": "5c28813d11c1ced5ea05d5946c29e12f9250f1af6b5a26c5dfdaafb586f75cda",
    "adamw_torch_sequential_eps0": "7391e9daffcc7bf2093092050a28b91177fe3735ff68a6b623ebc27f3d5a70cf",
    "rates": "81fd3793b231c28210d8d0bf2fcb386dd212bd8e75e1f2873b075b96fa3497d1",
    "sgd_lambda_exponential": "cf7e344e4dc18a3444d8ea6a3d0a2834fce4eaaac2f952f68243f8a5989832fc",
    "sgd_lambda_linear_warmup": "2492f9a92fb30d90f9d8b72d1205320b0e8a77646df94eddd7f351fbf31be742",
    "sgd_lambda_step_decay": "6888eb1b6d803ebb0b9fdfb110147dd292f6765023cbb0ec0ee44ef3b77e1f89",
    "sgd_lambda_warmup_cosine": "c681b8eeb500fc76c2c24b489198e86064203f32c5892bf870d63c93eb1e61fc",
    "sgd_lambda_warmup_cosine_float32": "deb5bcc02c994951ca36fa1f4c6613891ca26a538c74fab406a4fdc60c16b661",
    "sgd_torch_cosine": "59801c248d5c29620524019a4fee84da4ea2e9ff7b4070a823ff1ebad2876455",
    "sgd_torch_exponential": "b9432b47ec083e8ef378a37bd22c6b6237c33f1be93d163ab8e6b91ea71aa621",
    "sgd_torch_linear": "29f58ca3d517ccbf4a4ebd3e894eb3cdae2142824bf39749369cdcfa7c6d09b6",
    "sgd_torch_sequential": "b4830b05820291e0df7281eb5ece4d723219bd3bbc8af56ac82cc44d033b853e",
    "sgd_torch_step": "e0a66a026ebe99ac3db088d6a12c6137cc4cf15e4c19f300cd4a0448be7dc6f8",
}


# -- loading ------------------------------------------------------------------------------------------------
def load_golden(name: str) -> dict[str, np.ndarray]:
    """Every array of ``tests/golden/round3_schedules_<name>.npz`` (no pickle allowed)."""
    with np.load(GOLDEN_DIR / f"round3_schedules_{name}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def content_digest(golden: dict[str, np.ndarray]) -> str:
    """sha256 over the name, dtype, shape and bytes of every array, by sorted name (as the generator's)."""
    h = hashlib.sha256()
    for key in sorted(golden):
        a = golden[key]
        h.update(f"{key}|{a.dtype.str}|{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def kit_schedule(text: np.ndarray) -> schedules.Schedule:
    """The ``so.schedules`` object a golden's JSON names."""
    spec = json.loads(str(text))
    return getattr(so.schedules, spec["function"])(**spec["args"])


def relative_error(actual: float, exact: Fraction) -> Fraction:
    """``|actual - exact| / |exact|`` exactly (0 when both are 0; ``inf``-like 1 when only ``exact`` is 0)."""
    if exact == 0:
        return Fraction(0) if actual == 0 else Fraction(1)
    return abs(Fraction(actual) - exact) / abs(exact)


RATES = load_golden("rates")
RATE_CASES = [str(c) for c in RATES["cases"]]
TRAJECTORIES = sorted(p.stem[len("round3_schedules_") :] for p in GOLDEN_DIR.glob("round3_schedules_*.npz"))
TRAJECTORIES.remove("rates")


# -- hand-derived values -------------------------------------------------------------------------------------
def test_constant_is_lr_on_every_step() -> None:
    """``constant(lr)(t) == lr`` from step 1 to ``2**62``, as a Python float."""
    f = schedules.constant(0.037)
    for t in (1, 2, 10**6, 2**62):
        assert f(t) == 0.037 and type(f(t)) is float


@pytest.mark.parametrize(("lr", "warmup"), [(0.5, 4), (0.3, 7), (0.0123, 50), (1e-3, 1)])
def test_linear_warmup_against_fractions(lr: float, warmup: int) -> None:
    """``lr * t / W`` (exact fraction of the float64 ``lr``) within ``2U``; exactly ``lr`` from ``t = W``."""
    f = schedules.linear_warmup(lr, warmup)
    for t in range(1, warmup):
        assert relative_error(f(t), Fraction(lr) * t / warmup) <= KIT_ULPS["linear_warmup"] * Fraction(U)
    for t in (warmup, warmup + 1, 10 * warmup, 2**62):
        assert f(t) == lr


def test_linear_warmup_dyadic_values_are_exact() -> None:
    """With ``lr = 0.5`` and ``W = 4`` every rate is a dyadic number: computed exactly."""
    f = schedules.linear_warmup(0.5, 4)
    assert [f(t) for t in range(1, 7)] == [0.125, 0.25, 0.375, 0.5, 0.5, 0.5]


def _cos_exact(numerator: int, denominator: int) -> Decimal:
    """``cos(pi * numerator / denominator)`` for the special angles used here, exactly as a 40-digit Decimal."""
    with localcontext() as ctx:
        ctx.prec = 40
        sqrt2, sqrt3 = Decimal(2).sqrt(), Decimal(3).sqrt()
        table = {
            (0, 1): Decimal(1),
            (1, 6): sqrt3 / 2,
            (1, 4): sqrt2 / 2,
            (1, 3): Decimal("0.5"),
            (1, 2): Decimal(0),
            (2, 3): Decimal("-0.5"),
            (3, 4): -sqrt2 / 2,
            (5, 6): -sqrt3 / 2,
            (1, 1): Decimal(-1),
        }
        f = Fraction(numerator, denominator)
        return +table[(f.numerator, f.denominator)]


@pytest.mark.parametrize(("lr", "warmup", "total", "final"), [(1.0, 0, 6, 0.0), (0.3, 2, 8, 0.01), (0.1, 3, 7, 0.0)])
def test_warmup_cosine_at_special_angles(lr: float, warmup: int, total: int, final: float) -> None:
    """The cosine branch at angles ``pi * k / (T - W)`` with known cosines, within 13U; warm-up by fractions.

    ``T - W`` is 6 or 4, so every step of the cosine is at a multiple of ``pi / 6`` or ``pi / 4``, whose
    cosine is rational, ``sqrt(2)/2`` or ``sqrt(3)/2``. With ``final = 0`` the last steps
    have small rates: the cancellation of ``1 + cos`` near ``pi`` that the literal formula suffers.
    """
    f = schedules.warmup_cosine(lr, warmup, total, final_lr=final)
    d = total - warmup
    for t in range(1, total + 3):
        if t <= warmup:
            exact = Fraction(lr) * t / warmup
        elif t >= total:
            exact = Fraction(final)
        else:
            cos = Fraction(_cos_exact(t - warmup, d))
            exact = Fraction(final) + (Fraction(lr) - Fraction(final)) * (1 + cos) / 2
        assert relative_error(f(t), exact) <= KIT_ULPS["warmup_cosine"] * Fraction(U), t
    assert f(warmup if warmup else 1) <= lr and f(total) == final and f(2**62) == final


def test_warmup_cosine_reaches_lr_and_final_lr_exactly() -> None:
    """``lr`` at the end of the warm-up and ``final_lr`` from ``total_steps`` on, bit for bit."""
    f = schedules.warmup_cosine(0.0123, 7, 53, final_lr=1e-4)
    assert f(7) == 0.0123 and f(53) == 1e-4 and f(54) == 1e-4 and f(2**62) == 1e-4
    assert all(1e-4 < f(t) < 0.0123 for t in range(8, 53))
    assert all(f(t) > f(t + 1) for t in range(7, 52)) and all(f(t) < f(t + 1) for t in range(1, 7))


@pytest.mark.parametrize(("lr", "step_size", "gamma"), [(0.1, 30, 0.1), (0.0123, 7, 0.5), (1.0, 1, 0.9), (0.2, 3, 0.0)])
def test_step_decay_against_fractions(lr: float, step_size: int, gamma: float) -> None:
    """``lr * gamma ** ((t - 1) // step_size)`` (exact fractions) within 3U over 40 decay periods."""
    f = schedules.step_decay(lr, step_size, gamma)
    for t in range(1, 40 * step_size + 2):
        exact = Fraction(lr) * Fraction(gamma) ** ((t - 1) // step_size)
        assert relative_error(f(t), exact) <= KIT_ULPS["step_decay"] * Fraction(U), t


@pytest.mark.parametrize(("lr", "gamma"), [(0.01, 0.99), (1.0, 0.5), (0.1, 0.999), (0.3, 1.0), (0.3, 0.0)])
def test_exponential_against_fractions(lr: float, gamma: float) -> None:
    """``lr * gamma ** (t - 1)`` (exact fractions) within 3U for ``t <= 300``; ``gamma = 0``: ``lr`` then 0."""
    f = schedules.exponential(lr, gamma)
    for t in range(1, 301):
        assert relative_error(f(t), Fraction(lr) * Fraction(gamma) ** (t - 1)) <= KIT_ULPS["exponential"] * Fraction(U)


def test_huge_steps_give_exact_powers_without_warnings() -> None:
    """``t = 2**62`` (Python or numpy integer): no overflow, no warning, powers that underflow are 0.0.

    ``gamma = 1 - 2**-53`` (the largest float below 1) keeps ``gamma ** (2**62 - 1)`` = ``exp(-512)``-ish
    representable; its exact value from ``decimal``'s logarithm, and the kit within 1e-13 relative (the
    exponent beyond ``2**53`` is split: ``(gamma ** 2**53) ** 512``, whose 1-ulp error is raised to the 512th).
    """
    gamma = 1.0 - 2.0**-53
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            for t in (2**62, np.int64(2**62), np.uint64(2**62), 2**100):
                assert schedules.exponential(0.5, 0.999)(t) == 0.0
                assert schedules.step_decay(0.5, 3, 0.9)(t) == 0.0
                assert schedules.linear_warmup(0.5, 10)(t) == 0.5
                assert schedules.warmup_cosine(0.5, 10, 100, 0.25)(t) == 0.25
            near_one = schedules.exponential(1.0, gamma)(2**62)
    with localcontext() as ctx:
        ctx.prec = 50
        exact = (Decimal(2**62 - 1) * Decimal(gamma).ln()).exp()
    assert 1e-223 < near_one < 1e-222
    assert relative_error(near_one, Fraction(exact)) <= Fraction(1, 10**13)
    assert schedules.exponential(1.0, gamma)(2**300) == 0.0


# -- invariants of the objects --------------------------------------------------------------------------------
BUILT_INS = [
    schedules.constant(0.05),
    schedules.linear_warmup(0.0123, 7),
    schedules.warmup_cosine(0.0123, 7, 53, final_lr=1e-4),
    schedules.warmup_cosine(0.1, 0, 40),
    schedules.step_decay(0.1, 30, 0.1),
    schedules.exponential(0.01, 0.99),
    schedules.exponential(1.0, 0.0),
    schedules.exponential(1.0, 1.0 - 2.0**-53),  # nonzero up to t ~ 2**62.6: exponents past 2**53 are split
    schedules.step_decay(1.0, 3, 1.0 - 2.0**-53),
]


@pytest.mark.parametrize("f", BUILT_INS, ids=repr)
def test_schedule_objects_are_values(f: schedules.Schedule) -> None:
    """Frozen, equal by parameters, hashable, picklable, and the repr is the call that rebuilds them."""
    clone = pickle.loads(pickle.dumps(f))
    assert clone == f and hash(clone) == hash(f) and clone is not f
    assert eval(repr(f), {"sparse_opt": sparse_opt}) == f
    assert repr(f).startswith("sparse_opt.schedules.")
    with pytest.raises(FrozenInstanceError):
        f.lr = 1.0  # type: ignore[misc]
    assert all(clone(t) == f(t) for t in (1, 7, 53, 1000))


def test_equality_is_by_parameters_and_kind() -> None:
    """Same kind and parameters: equal (an int argument is normalised); another kind or value: not."""
    assert schedules.linear_warmup(1, 4) == schedules.linear_warmup(1.0, np.int32(4))
    assert schedules.step_decay(0.1, 3, 0.5) != schedules.step_decay(0.1, 4, 0.5)
    assert schedules.constant(0.1) != schedules.exponential(0.1, 1.0)
    assert len({schedules.constant(0.1), schedules.constant(0.1), schedules.constant(0.2)}) == 2


STEP_RANGES = st.one_of(
    st.tuples(st.integers(1, 400), st.integers(0, 400)),
    st.tuples(st.integers(2**62 - 1000, 2**62), st.integers(0, 300)),
)


@settings(max_examples=60, deadline=None)
@given(
    f=st.sampled_from(BUILT_INS)
    | st.builds(
        schedules.warmup_cosine,
        st.floats(0, 10),
        st.integers(0, 50),
        st.integers(51, 300),
        st.floats(0, 1),
    )
    | st.builds(schedules.exponential, st.floats(0, 10), st.floats(0.5, 1.0))
    | st.builds(schedules.step_decay, st.floats(0, 10), st.integers(1, 40), st.floats(0, 1))
    | st.builds(schedules.linear_warmup, st.floats(0, 10), st.integers(1, 300)),
    steps=STEP_RANGES,
)
def test_values_are_the_per_step_rates_bit_for_bit(f: schedules.Schedule, steps: tuple[int, int]) -> None:
    """``values(f, a, b)`` is ``[f(t) for t in range(a, b)]`` exactly, near step 1 and near ``2**62``."""
    start, count = steps
    got = schedules.values(f, start, start + count)
    expected = np.array([f(t) for t in range(start, start + count)], dtype=np.float64)
    assert got.dtype == np.float64 and got.shape == (count,)
    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))


def test_values_of_a_callable_calls_it_per_step_and_checks_each_value() -> None:
    """Any callable: evaluated on every step of the range, and a bad value is refused naming its step."""
    seen: list[int] = []

    def f(t: int) -> float:
        seen.append(t)
        return 1.0 / t

    assert schedules.values(f, 3, 6).tolist() == [1 / 3, 1 / 4, 1 / 5] and seen == [3, 4, 5]
    assert schedules.values(f, 5, 5).shape == (0,)
    with pytest.raises(ValueError, match=r"step 4: -1\.0"):
        schedules.values(lambda t: 1.0 if t < 4 else -1.0, 1, 10)


@pytest.mark.parametrize(
    "values",
    [
        [0.5, 0.25, -0.0, 1e-300, 3.0],  # Python floats: checked at once
        [np.float64(0.5), 0.25, np.float64(-0.0), 2.0, 1.0],
        [1, np.float32(0.1), 0.5, True and 2, np.int64(3)],  # any real: checked one by one
    ],
)
def test_values_of_a_callable_are_lr_at_bit_for_bit(values: list) -> None:
    """The range and the gathered steps of any callable are each step's ``lr_at``, bit for bit (``-0.0`` as 0)."""
    f = dict(zip(range(1, 6), values)).__getitem__
    expected = [schedules.lr_at(f, t) for t in range(1, 6)]
    got = schedules.values(f, 1, 6)
    assert got.tobytes() == np.array(expected).tobytes()
    assert schedules.values_at(f, np.array([[5, 1], [3, 3]])).tobytes() == np.array(
        [[expected[4], expected[0]], [expected[2], expected[2]]]
    ).tobytes()


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (float("nan"), ValueError, r"Invalid learning rate at step 3: nan"),
        (-1.0, ValueError, r"Invalid learning rate at step 3: -1\.0"),
        (np.float64("inf"), ValueError, r"Invalid learning rate at step 3: inf"),
        ("0.1", TypeError, r"returned '0\.1' at step 3"),
        (None, TypeError, r"returned None at step 3"),
    ],
)
def test_values_of_a_callable_name_the_first_bad_step(bad: object, error: type, match: str) -> None:
    """Whichever way the values are checked, the error names the first bad step and its value."""
    f = {1: 0.1, 2: 0.2, 3: bad, 4: -5.0, 5: 0.5}.__getitem__
    with pytest.raises(error, match=match):
        schedules.values(f, 1, 6)
    with pytest.raises(error, match=match):
        schedules.values_at(f, np.array([5, 4, 3, 1]))


@pytest.mark.parametrize(
    ("start", "stop", "error", "match"),
    [
        (0, 3, ValueError, "t_start: 0"),
        (1.0, 3, TypeError, "t_start must be a positive integer, got 1.0"),
        (3, 2, ValueError, "t_stop: 2"),
        (1, 2**63, ValueError, "t_stop: 9223372036854775808"),
        (1, "3", TypeError, "t_stop must be an integer, got '3'"),
        (1, True, TypeError, "t_stop must be an integer, got True"),
    ],
)
def test_values_refuses_bad_ranges(start: object, stop: object, error: type, match: str) -> None:
    """A bad range is refused naming the field and the value."""
    with pytest.raises(error, match=match):
        schedules.values(schedules.constant(1.0), start, stop)


# -- validation ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [np.int8(3), np.uint64(3), np.int64(3), 3, np.array(3)])
def test_any_integer_type_is_a_step(t: object) -> None:
    """Python ints, numpy integers of any width and sign, and 0-d integer arrays are steps."""
    assert schedules.linear_warmup(1.0, 4)(t) == 0.75


@pytest.mark.parametrize(
    ("t", "error", "match"),
    [
        (0, ValueError, "Invalid schedule step t: 0"),
        (-5, ValueError, "Invalid schedule step t: -5"),
        (3.0, TypeError, "got 3.0"),
        (True, TypeError, "got True"),
        (np.bool_(True), TypeError, "got np.True_|got True"),
        ("3", TypeError, "got '3'"),
        (None, TypeError, "got None"),
    ],
)
def test_bad_steps_are_refused(t: object, error: type, match: str) -> None:
    """A step that is not a positive integer is refused naming the value, by every built-in and by ``lr_at``."""
    for f in BUILT_INS:
        with pytest.raises(error, match=match):
            f(t)
    with pytest.raises(error, match=match):
        schedules.lr_at(lambda s: 1.0, t)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: schedules.constant(-0.1), ValueError, r"Invalid lr: -0\.1 \(must be >= 0"),
        (lambda: schedules.constant(float("nan")), ValueError, r"Invalid lr: nan \(must be finite"),
        (lambda: schedules.constant(float("inf")), ValueError, r"Invalid lr: inf \(must be finite"),
        (lambda: schedules.constant(True), TypeError, "lr must be a real number, got True"),
        (lambda: schedules.constant("0.1"), TypeError, "lr must be a real number, got '0.1'"),
        (lambda: schedules.linear_warmup(0.1, 0), ValueError, r"Invalid warmup_steps: 0 \(must be >= 1\)"),
        (lambda: schedules.linear_warmup(0.1, 2.5), TypeError, "warmup_steps must be an integer, got 2.5"),
        (lambda: schedules.linear_warmup(0.1, True), TypeError, "warmup_steps must be an integer, got True"),
        (lambda: schedules.warmup_cosine(0.1, -1, 10), ValueError, r"Invalid warmup_steps: -1 \(must be >= 0\)"),
        (lambda: schedules.warmup_cosine(0.1, 10, 10), ValueError, r"Invalid total_steps: 10 \(must be > warmup"),
        (lambda: schedules.warmup_cosine(0.1, 1, 10, -1e-3), ValueError, r"Invalid final_lr: -0\.001"),
        (lambda: schedules.step_decay(0.1, 0, 0.5), ValueError, r"Invalid step_size: 0 \(must be >= 1\)"),
        (lambda: schedules.step_decay(0.1, 5, 1.5), ValueError, r"Invalid gamma: 1\.5 \(must be <= 1\.0\)"),
        (lambda: schedules.exponential(0.1, -0.5), ValueError, r"Invalid gamma: -0\.5 \(must be >= 0\.0\)"),
        (lambda: schedules.exponential(0.1, float("nan")), ValueError, r"Invalid gamma: nan"),
    ],
)
def test_bad_arguments_are_refused_naming_field_and_value(call: object, error: type, match: str) -> None:
    """Every argument is validated like the optimizers' hyper-parameters."""
    with pytest.raises(error, match=match):
        call()  # type: ignore[operator]


def test_resolve_turns_numbers_into_constant_and_keeps_callables() -> None:
    """A float or int is the constant schedule; a callable is kept as is, not called; anything else is refused."""
    assert schedules.resolve(0.1) == schedules.constant(0.1)
    assert schedules.resolve(np.float32(0.5)) == schedules.constant(0.5)
    assert schedules.resolve(2) == schedules.constant(2.0)

    def never(t: int) -> float:
        raise AssertionError("resolve must not call the schedule")

    assert schedules.resolve(never) is never
    with pytest.raises(ValueError, match=r"Invalid lr: -1\.0"):
        schedules.resolve(-1)
    with pytest.raises(TypeError, match="lr must be a real number, got True"):
        schedules.resolve(True)
    with pytest.raises(TypeError, match=r"learning_rate must be a float >= 0 or a schedule .*got '0\.1'"):
        schedules.resolve("0.1", "learning_rate")
    with pytest.raises(TypeError, match="got None"):
        schedules.resolve(None)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (float("nan"), ValueError, r"Invalid learning rate at step 12: nan \(must be finite and >= 0\)"),
        (float("inf"), ValueError, r"Invalid learning rate at step 12: inf"),
        (-1e-9, ValueError, r"Invalid learning rate at step 12: -1e-09"),
        (np.float64(-2.0), ValueError, r"Invalid learning rate at step 12: -2\.0"),
        ("0.1", TypeError, r"returned '0\.1' at step 12 \(must be a real number\)"),
        (True, TypeError, r"returned True at step 12"),
        (None, TypeError, r"returned None at step 12"),
        (np.array([0.1]), TypeError, r"returned array\(\[0\.1\]\) at step 12"),
    ],
)
def test_lr_at_refuses_bad_values_naming_step_and_value(value: object, error: type, match: str) -> None:
    """A value that is not a finite real ``>= 0`` is refused at the step that asks for it."""
    with pytest.raises(error, match=match):
        schedules.lr_at(lambda t: value, 12)


def test_lr_at_returns_python_floats() -> None:
    """numpy scalars and ints become Python floats; ``-0.0`` becomes ``+0.0``; built-ins are not re-checked."""
    assert type(schedules.lr_at(lambda t: np.float32(0.25), 1)) is float
    assert schedules.lr_at(lambda t: 3, 1) == 3.0 and type(schedules.lr_at(lambda t: 3, 1)) is float
    zero = schedules.lr_at(lambda t: -0.0, 5)
    assert zero == 0.0 and math.copysign(1.0, zero) == 1.0
    assert schedules.lr_at(schedules.linear_warmup(1.0, 4), np.int64(2)) == 0.5


def test_user_subclass_of_schedule_is_checked_like_any_callable() -> None:
    """Only the five built-ins skip the value check: a subclass of ``Schedule`` is a user callable."""

    class Negative(schedules.Schedule):
        def _rate(self, t: int) -> float:
            return -1.0

    with pytest.raises(ValueError, match=r"step 3: -1\.0"):
        schedules.lr_at(Negative(), 3)
    with pytest.raises(ValueError, match=r"step 1: -1\.0"):
        schedules.values(Negative(), 1, 4)


def test_import_is_numpy_only() -> None:
    """``so.schedules`` is an attribute of the package after a plain ``import sparse_opt``, which loads no torch."""
    code = (
        "import sys, sparse_opt as so; assert so.schedules.constant(1.0)(1) == 1.0; "
        "print([m for m in ('torch', 'scipy', 'matplotlib', 'mpmath') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# -- torch's schedulers: the recorded rates ------------------------------------------------------------------
def torch_rtol(case: str) -> float:
    """The bound on ``|kit - torch| / |exact|`` for rate case ``case`` (see :data:`TORCH_RTOL`)."""
    scheduler = str(RATES[f"{case}__scheduler"]).split("(")[0]
    spec = json.loads(str(RATES[f"{case}__kit"]))
    if scheduler == "LambdaLR":
        return TORCH_RTOL["LambdaLR_cosine" if spec["function"] == "warmup_cosine" else "LambdaLR"]
    if spec["args"].get("final_lr", 1.0) == 0.0:
        return TORCH_RTOL["eta_min_0"]
    return TORCH_RTOL[scheduler]


@pytest.mark.parametrize("case", RATE_CASES)
def test_kit_rates_are_within_their_bound_of_the_exact_closed_form(case: str) -> None:
    """Every recorded step: the kit's rate against mpmath's 50-digit closed form, within :data:`KIT_ULPS`."""
    f = kit_schedule(RATES[f"{case}__kit"])
    bound = Fraction(KIT_ULPS[json.loads(str(RATES[f"{case}__kit"]))["function"]]) * Fraction(U)
    exact = [Fraction(Decimal(str(x))) for x in RATES[f"{case}__exact"]]
    worst = max(relative_error(f(t), e) for t, e in enumerate(exact, start=1))
    assert worst <= bound + DIGITS_SLACK, f"{float(worst / Fraction(U)):.2f} U"


@pytest.mark.parametrize("case", RATE_CASES)
def test_kit_rates_equal_torch_schedulers(case: str) -> None:
    """The kit's rates are torch's (``LambdaLR``, ``LinearLR``, ...) up to the recursion's rounding (TORCH_RTOL).

    ``LambdaLR`` with the SPEC's formulas gives the kit's floats bit for bit, except the cosine (whose
    literal ``1 + cos`` the kit avoids). Past ``T_max`` torch's cosine rises again; the kit's stays at
    ``final_lr``: the documented limit of the equality.
    """
    f = kit_schedule(RATES[f"{case}__kit"])
    torch_rates = RATES[f"{case}__torch"]
    until = int(RATES[f"{case}__equal_until"])
    ours = schedules.values(f, 1, len(torch_rates) + 1)
    exact = np.array([float(Decimal(str(x))) for x in RATES[f"{case}__exact"]])
    scale = np.where(exact == 0.0, 1.0, np.abs(exact))
    err = float(np.max(np.abs(ours[:until] - torch_rates[:until]) / scale[:until]))
    assert err <= torch_rtol(case), f"{err:.3g}"
    if torch_rtol(case) == 0.0:
        np.testing.assert_array_equal(ours, torch_rates)
    if until < len(torch_rates):
        final = f.final_lr  # type: ignore[attr-defined]
        assert (ours[until:] == final).all() and (torch_rates[until:] > final).all()


def test_torch_recursion_error_is_what_the_bounds_say() -> None:
    """The tolerances are not loose: torch's own error reaches near each family's bound (the kit's is ~U).

    If a family's observed error were far below its bound, the bound would hide a regression.
    """
    worst: dict[str, float] = {}
    for case in RATE_CASES:
        f = kit_schedule(RATES[f"{case}__kit"])
        until = int(RATES[f"{case}__equal_until"])
        exact = np.array([float(Decimal(str(x))) for x in RATES[f"{case}__exact"][:until]])
        scale = np.where(exact == 0.0, 1.0, np.abs(exact))
        err = float(np.max(np.abs(schedules.values(f, 1, until + 1) - RATES[f"{case}__torch"][:until]) / scale))
        key = torch_rtol(case)
        worst[str(key)] = max(worst.get(str(key), 0.0), err)
    for key, err in worst.items():
        assert float(key) == 0.0 and err == 0.0 or err > float(key) / 3, (key, err)


def test_rate_goldens_are_the_recorded_ones() -> None:
    """The rate file: torch 2.13, every case's arrays, and the content digest."""
    assert str(RATES["torch_version"]).startswith("2.13.0")
    assert len(RATE_CASES) == 20
    for case in RATE_CASES:
        n = len(RATES[f"{case}__torch"])
        assert RATES[f"{case}__exact"].shape == (n,) and 1 <= int(RATES[f"{case}__equal_until"]) <= n
    assert content_digest(RATES) == DIGESTS["rates"]


LIVE_CASES = [
    ("LinearLR", {"start_factor": 1 / 9, "total_iters": 8}, schedules.linear_warmup(0.02, 9), 40),
    ("CosineAnnealingLR", {"T_max": 29, "eta_min": 1e-3}, schedules.warmup_cosine(0.02, 1, 30, 1e-3), 30),
    ("StepLR", {"step_size": 4, "gamma": 0.3}, schedules.step_decay(0.02, 4, 0.3), 60),
    ("ExponentialLR", {"gamma": 0.97}, schedules.exponential(0.02, 0.97), 200),
    ("SequentialLR", {}, schedules.warmup_cosine(0.02, 5, 25, 1e-3), 25),
]


@pytest.mark.parametrize(("scheduler", "kwargs", "f", "epochs"), LIVE_CASES, ids=[c[0] for c in LIVE_CASES])
def test_live_torch(scheduler: str, kwargs: dict[str, float], f: schedules.Schedule, epochs: int) -> None:
    """With torch installed: the kit's schedule drives ``LambdaLR`` bit for bit, and equals torch's own scheduler.

    ``LambdaLR(opt, lambda e: f(e + 1))`` on base lr 1.0 must give ``f(t)`` before the ``t``-th
    ``opt.step()`` exactly (the SPEC's equivalence); the native scheduler on base lr ``f.lr`` within
    :data:`TORCH_RTOL` (its recursion's rounding).
    """
    torch = pytest.importorskip("torch")
    lr_scheduler = torch.optim.lr_scheduler

    def run(base_lr: float, make: object) -> np.ndarray:
        p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        opt = torch.optim.SGD([p], lr=base_lr)
        sched = make(opt)  # type: ignore[operator]
        rates = []
        for _ in range(epochs):
            rates.append(opt.param_groups[0]["lr"])
            p.grad = torch.zeros_like(p)
            opt.step()
            sched.step()
        return np.array(rates)

    ours = schedules.values(f, 1, epochs + 1)
    np.testing.assert_array_equal(run(1.0, lambda opt: lr_scheduler.LambdaLR(opt, lambda e: f(e + 1))), ours)
    if scheduler == "SequentialLR":

        def native(opt: object) -> object:
            warm = lr_scheduler.LinearLR(opt, start_factor=1 / 5, end_factor=1.0, total_iters=4)
            cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=20, eta_min=1e-3)
            return lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[4])

    else:

        def native(opt: object) -> object:
            return getattr(lr_scheduler, scheduler)(opt, **kwargs)

    theirs = run(f.lr, native)  # type: ignore[attr-defined]
    np.testing.assert_allclose(theirs, ours, rtol=TORCH_RTOL[scheduler], atol=0.0)


# -- the trajectory goldens against a float64 transcription of torch's update rules ------------------------------
def touches(golden: dict[str, np.ndarray]) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(t, ids, rows)`` for every step: the touched row ids (ascending) and their gradient rows."""
    grads, used, out = golden["touch_grads"], 0, []
    for t, mask in enumerate(golden["touch_mask"], start=1):
        ids = np.flatnonzero(mask)
        out.append((t, ids, grads[used : used + ids.size]))
        used += ids.size
    assert used == len(grads)
    return out


def kind_of(name: str) -> str:
    """``adam``, ``adamw``, ``sgd`` or ``adagrad``: the torch optimizer of trajectory ``name``."""
    return name.split("_")[0]


def dense_reference(golden: dict[str, np.ndarray], kind: str, rates: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Torch's dense update rules in float64 numpy at the given per-step ``rates``; the state at each checkpoint.

    Written from ``torch/optim/{adam,adamw,sgd,adagrad}.py`` (single-tensor path): Adam(W)'s ``p *= 1 - lr *
    wd`` (AdamW), ``m += (1 - beta1) (g - m)``, ``v = beta2 v + (1 - beta2) g**2``, ``p -= (lr / bc1) m /
    (sqrt(v) / sqrt(bc2) + eps)``; SGD's ``g += wd p``, ``buf = g`` on step 1 else ``mu buf + g``, ``p -=
    lr buf``; Adagrad's ``sum += g**2``, ``p -= lr / (1 + (t - 1) lr_decay) g / (sqrt(sum) + eps)``. Every
    row gets every step: the untouched ones a zero gradient. For a float32 golden every scalar torch
    passes to a float32 kernel (``beta2``, ``1 - beta1``, ``1 - lr * wd``, ``lr / bc1``, ...) is rounded to
    float32 first, as torch's kernels do; the arithmetic stays float64, so what is left against torch is
    the rounding of torch's float32 operations.
    """
    scalar = (lambda x: float(np.float32(x))) if golden["p0"].dtype == np.float32 else float
    p = golden["p0"].astype(np.float64)
    a, b = np.zeros_like(p), np.zeros_like(p)
    if kind == "adagrad":
        a += scalar(golden["initial_accumulator_value"])
    wd = float(golden["weight_decay"])
    marks = set(golden["checkpoints"].tolist())
    out = []
    for t, ids, rows in touches(golden):
        g = np.zeros_like(p)
        g[ids] = rows
        lr = float(rates[t - 1])
        if kind in ("adam", "adamw"):
            beta1, beta2, eps = (float(golden[k]) for k in ("beta1", "beta2", "eps"))
            if kind == "adamw":
                p = p * scalar(1.0 - lr * wd)
            a = a + scalar(1.0 - beta1) * (g - a)
            b = scalar(beta2) * b + scalar(1.0 - beta2) * g * g
            step_size = lr / (1.0 - beta1**t)
            p = p - scalar(step_size) * a / (np.sqrt(b) / scalar(math.sqrt(1.0 - beta2**t)) + scalar(eps))
            state = {"exp_avg": a, "exp_avg_sq": b}
        elif kind == "sgd":
            g = g + scalar(wd) * p
            a = g if t == 1 else scalar(golden["momentum"]) * a + g
            p = p - scalar(lr) * a
            state = {"momentum_buffer": a}
        else:
            clr = lr / (1.0 + (t - 1) * float(golden["lr_decay"]))
            a = a + g * g
            p = p - scalar(clr) * g / (np.sqrt(a) + scalar(golden["eps"]))
            state = {"sum": a}
        if t in marks:
            out.append({"params": p.copy(), **{k: v.copy() for k, v in state.items()}})
    return out


def worst_errors(golden: dict[str, np.ndarray], kind: str, rates: np.ndarray) -> dict[str, float]:
    """Largest error of :func:`dense_reference` at ``rates`` against torch, per quantity (NaN patterns equal).

    float64: entry-wise relative, ``|ours - torch| / |torch|``. float32: relative to the largest magnitude
    the entry has had at the checkpoints so far: a float32 computation's error is a few ulp of the values
    that flowed into it, and SGD's coupled decay makes a momentum entry cross zero (``g`` and ``wd * p``
    have opposite signs), where an entry-wise relative error measures only the cancellation.
    """
    errors: dict[str, float] = {}
    float32 = golden["p0"].dtype == np.float32
    with np.errstate(invalid="ignore", divide="ignore"):
        reference = dense_reference(golden, kind, rates)
    seen: dict[str, np.ndarray] = {}
    for c, ref in enumerate(reference):
        for key, ours in ref.items():
            theirs = golden[key][c].astype(np.float64)
            np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=key)
            seen[key] = np.fmax(seen.get(key, np.zeros_like(theirs)), np.abs(theirs))
            finite = np.isfinite(theirs)
            scale = (seen[key] if float32 else np.abs(theirs))[finite]
            scale = np.maximum(scale, np.finfo(golden["p0"].dtype).tiny)
            err = float(np.max(np.abs(ours[finite] - theirs[finite]) / scale)) if finite.any() else 0.0
            errors[key] = max(errors.get(key, 0.0), err)
    return errors


#: float32 goldens: bounds on torch's float32 run against the float64 reference on the same float32 inputs
#: and float32 scalars, per quantity, a little above the observed (torch 2.13.0+cpu, AVX512): Adam(W)
#: params 1.02e-6 / 2.2e-6, exp_avg 1.8e-7 / 1.5e-7, exp_avg_sq 6.3e-7 / 6.5e-7; SGD params 1.19e-6,
#: momentum_buffer 3.8e-7; Adagrad params 7.0e-7, sum 4.7e-8. That is the rounding of torch's float32
#: operations alone: the parameters are rounded to float32 after every step (twice with AdamW's decay), a
#: random walk of 300 to 600 half-ulp roundings, sqrt(600) * 0.5 ulp = 1.5e-6 at |p| ~ 1, 2-3x that at the
#: worst of 24 entries; moments and sums take one rounding per step of terms that decay.
FLOAT32_BOUNDS = {
    "adamw_lambda_warmup_cosine_float32": {"params": 2.5e-6, "exp_avg": 2e-7, "exp_avg_sq": 8e-7},
    "adam_torch_sequential_float32": {"params": 1.2e-6, "exp_avg": 2.5e-7, "exp_avg_sq": 8e-7},
    "sgd_lambda_warmup_cosine_float32": {"params": 1.5e-6, "momentum_buffer": 5e-7},
    "adagrad_lambda_warmup_cosine_float32": {"params": 8e-7, "sum": 6e-8},
}


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_trajectory_goldens_follow_the_kit_schedule(name: str) -> None:
    """Torch's run under each scheduler is the dense update rule at the kit's rates: ``lr`` of step ``t`` is ``f(t)``.

    float64: within 1e-12 relative of the reference at the kit's schedule, and the recorded ``lrs`` are
    the kit's rates (bit for bit under ``LambdaLR`` but for the cosine, within :data:`TORCH_RTOL` under torch's
    own schedulers). float32: within :data:`FLOAT32_BOUNDS` (torch's float32 rounding).
    """
    golden = load_golden(name)
    f = kit_schedule(golden["kit_schedule"])
    ours = schedules.values(f, 1, int(golden["num_steps"]) + 1)
    scheduler = str(golden["scheduler"])
    cosine_lambda = scheduler == "LambdaLR" and isinstance(f, schedules.WarmupCosine)
    rate_rtol = TORCH_RTOL["LambdaLR_cosine" if cosine_lambda else scheduler]
    np.testing.assert_allclose(golden["lrs"], ours, rtol=rate_rtol, atol=0.0)
    errors = worst_errors(golden, kind_of(name), ours)
    for quantity, err in errors.items():
        bound = FLOAT32_BOUNDS[name][quantity] if name in FLOAT32_BOUNDS else 1e-12
        assert err <= bound, (quantity, err)


@pytest.mark.parametrize("name", [n for n in TRAJECTORIES if n.startswith("adam")])
def test_trajectory_reference_can_fail(name: str) -> None:
    """The same reference fed torch's rate one step late (``f(t - 1)``), the classic off-by-one, is far off."""
    golden = load_golden(name)
    f = kit_schedule(golden["kit_schedule"])
    late = np.concatenate([[f(1)], schedules.values(f, 1, int(golden["num_steps"]))])
    assert max(worst_errors(golden, kind_of(name), late).values()) > 1e-6


# -- the trajectory files themselves ----------------------------------------------------------------------------
STATE_KEYS = {"adam": {"exp_avg", "exp_avg_sq", "step"}, "sgd": {"momentum_buffer"}, "adagrad": {"sum", "step"}}
HYPER_KEYS = {"adam": {"beta1", "beta2", "eps"}, "sgd": {"momentum"}, "adagrad": {"lr_decay", "eps"}}
HYPER_KEYS["adagrad"] |= {"initial_accumulator_value"}
COMMON_KEYS = {"torch_version", "numpy_version", "torch_call", "dtype", "seed", "num_steps", "lr", "weight_decay"}
COMMON_KEYS |= {"scheduler", "scheduler_call", "kit_schedule", "p0", "touch_mask", "touch_grads", "lrs"}
COMMON_KEYS |= {"checkpoints", "params"}


def test_every_golden_file_is_known() -> None:
    """The files on disk are exactly the recorded ones (a missing or extra file is noticed)."""
    assert sorted([*TRAJECTORIES, "rates"]) == sorted(DIGESTS)


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_trajectory_golden_is_the_recorded_one(name: str) -> None:
    """Keys, torch version, optimizer and scheduler, dtypes, size on disk and content digest are as generated."""
    golden = load_golden(name)
    kind = kind_of(name).rstrip("w")
    assert set(golden) == COMMON_KEYS | STATE_KEYS[kind] | HYPER_KEYS[kind]
    assert str(golden["torch_version"]).startswith("2.13.0")
    head = {"adam": "torch.optim.Adam(", "adamw": "torch.optim.AdamW(", "sgd": "torch.optim.SGD(", "adagrad": ""}
    assert str(golden["torch_call"]).startswith(head[kind_of(name)] or "torch.optim.Adagrad(")
    scheduler = str(golden["scheduler"])
    assert str(golden["scheduler_call"]).startswith(f"{scheduler}(")
    assert (scheduler == "LambdaLR") == ("_lambda_" in name) == (float(golden["lr"]) == 1.0)
    dtype = str(golden["dtype"])
    assert dtype == ("float32" if name.endswith("float32") else "float64")
    for key in ("p0", "touch_grads", "params", "exp_avg", "exp_avg_sq", "momentum_buffer", "sum"):
        if key in golden:
            assert golden[key].dtype == np.dtype(dtype), key
    assert (GOLDEN_DIR / f"round3_schedules_{name}.npz").stat().st_size < 100_000
    assert content_digest(golden) == DIGESTS[name]


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_dormant_gaps_cross_the_schedule_boundaries(name: str) -> None:
    """Some row's dormant gap contains a change of the rate's regime: the end of the warm-up, a decay, the end.

    For each schedule the boundaries are the steps where its formula changes (warm-up end, each step decay,
    cosine end); every one of them, and at least one rate change of 2x or more, falls strictly inside a gap
    of a row that is touched before and after it. Every touched gradient row is nonzero; row 5 is never touched.
    """
    golden = load_golden(name)
    mask = golden["touch_mask"]
    f = kit_schedule(golden["kit_schedule"])
    n = int(golden["num_steps"])
    boundaries = {
        schedules.LinearWarmup: lambda: [f.warmup_steps],  # type: ignore[attr-defined]
        schedules.WarmupCosine: lambda: [b for b in (f.warmup_steps, f.total_steps) if 1 < b < n],  # type: ignore
        schedules.StepDecay: lambda: list(range(f.step_size + 1, n + 1, f.step_size)),  # type: ignore[attr-defined]
        schedules.Exponential: lambda: [n // 2],
    }[type(f)]()
    rates = schedules.values(f, 1, n + 1)
    gaps = []
    for row in range(5):
        steps = np.flatnonzero(mask[:, row]) + 1
        gaps += [(int(a), int(b)) for a, b in zip(steps[:-1], steps[1:]) if b - a > 1]
    for boundary in boundaries:
        assert any(a < boundary < b for a, b in gaps), boundary
    assert any(max(rates[a:b]) >= 2 * min(rates[a:b]) for a, b in gaps)
    assert not mask[:, 5].any() and (golden["touch_grads"] != 0).all()
    assert len(golden["touch_grads"]) == mask.sum() and (~mask.any(axis=1)).sum() == 1
