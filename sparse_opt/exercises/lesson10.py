"""Lesson 10 exercises (low-precision tables): when an update vanishes, and stochastic rounding.

``stagnates`` is the rule of the lesson's section 1 (an update lost to round to
nearest, ties to even included), checked against the kit's
:func:`~sparse_opt._rounding.round_nearest`; ``stochastic_round`` is the rounding
of section 2 with the uniform draws given, checked bit for bit against the kit's
:func:`~sparse_opt._rounding.round_stochastic` fed the same draws.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt._rounding import round_nearest, round_stochastic
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source

_F16 = np.dtype(np.float16)
_GAP_AT_1 = 2.0**-10  # the gap above 1 in float16 (the gap below 1 is half of it)

# ---------------------------------------------------------------- stagnates


def _stagnates_reference(p: np.ndarray, d: np.ndarray) -> np.ndarray:
    return round_nearest(p.astype(np.float64) + d, _F16) == p


def _flawed_stagnates(flaw: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def stagnates(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        if flaw == "half_arithmetic":
            return (p + d.astype(np.float16)) == p
        gap = np.spacing(np.abs(p)).astype(np.float64)
        if flaw == "whole_gap":
            return np.abs(d) < gap
        if flaw == "relative":
            return np.abs(d) < np.abs(p).astype(np.float64) * _GAP_AT_1 / 2
        return np.abs(d) < gap / 2  # "half_gap_above": ties and the smaller gap below a power of two missed

    return stagnates


def _stagnates_cases() -> list[Case]:
    def case(name: str, p: list[float], d: list[float]) -> Case:
        return Case(name, {"p": np.array(p, dtype=np.float16), "d": np.array(d, dtype=np.float64)})

    g = _GAP_AT_1
    cases = [
        case("updates of a tenth of a gap and of a whole gap", [1.0, 1.0, 1.5], [0.1 * g, g, -g]),
        case("just under and just over half a gap", [1.5, 1.5], [0.49 * g, 0.51 * g]),
        case("a tie: exactly half a gap (to even)", [1.0, 1.0 + g, 1.5], [0.5 * g, 0.5 * g, -0.5 * g]),
        case("downwards from a power of two, where the gap is halved", [1.0, 1.0, 2.0], [-0.3 * g, -0.2 * g, -0.6 * g]),
        case("a large weight against a small one", [0.1, 100.0, 0.1, 100.0], [1e-4, 1e-4, -3e-5, -0.03]),
        case("negative weights, updates either way", [-1.0, -1.0, -0.75], [0.4 * g, -0.6 * g, 0.25 * g]),
        case("a tie whose float16 rounding decides", [1.0], [0.5 * g + 2.0**-30]),
        case("zero and a subnormal", [0.0, 0.0, 2.0**-24], [2.0**-26, 2.0**-24, 2.0**-26]),
    ]
    for seed in range(1, 4):
        r = np.random.default_rng(seed)
        p = (r.choice([-1, 1], 12) * 2.0 ** r.uniform(-6, 6, 12)).astype(np.float16)
        gaps = np.spacing(np.abs(p)).astype(np.float64)
        d = r.choice([-1, 1], 12) * gaps * r.choice([0.1, 0.3, 0.5, 0.7, 1.5], 12)
        cases.append(Case(f"random (seed {seed})", {"p": p, "d": d}))
    return cases


STAGNATES = Exercise(
    name="stagnates",
    lesson="10",
    title="which updates round to nearest loses on a float16 weight",
    statement=source(
        """
        stagnates(p, d) -> mask

        A float16 weight p is written as fl(p + d): the exact sum rounded to the
        nearest float16, ties to the neighbour whose last bit is even. Return a
        boolean array, True where the update d is lost: fl(p + d) == p.

        p : float16 array (finite)
        d : float64 array of the same shape (updates, exact)

        The lesson's rule: d is lost when |d| is below half the gap from p to
        its neighbour on d's side, and at exactly half when p's last bit is
        even. The gap below a power of two is half the gap above it.
        """
    ),
    reference=_stagnates_reference,
    cases=_stagnates_cases(),
    outputs=(Output("mask", dtype="bool"),),
    solution_source=source(
        """
        def stagnates(p, d):
            exact = p.astype(np.float64) + d  # exact: float16 fits in float64 many times over
            return exact.astype(np.float16) == p  # numpy's cast rounds to nearest, ties to even
        """
    ),
    stub_source=source(
        """
        def stagnates(p, d):
            \"\"\"True where fl(p + d) == p in float16 (round to nearest, ties to even).\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "the definition is the test: form the sum p + d without rounding, round it once to float16, compare with p.",
        "p + d.astype(np.float16) rounds d first and then the sum: two roundings. Widen p to float64 instead; "
        "the sum of a float16 and a float64 update is then exact enough to round once.",
        "(p.astype(np.float64) + d).astype(np.float16) == p: numpy's cast to float16 rounds to nearest, ties to even.",
    ),
    diagnoses=(
        Diagnosis(
            "|d| < spacing(p) / 2 misses two cases: a tie (exactly half a gap) is lost when p's last bit is even, "
            "and below a power of two the gap is half the gap above it; round the sum instead of comparing sizes",
            _flawed_stagnates("half_gap_above"),
        ),
        Diagnosis(
            "an update is lost below half a gap, not below a whole gap: between half and one gap it rounds to "
            "the neighbour",
            _flawed_stagnates("whole_gap"),
        ),
        Diagnosis(
            "the gap is not proportional to |p|: it is constant over a binade (from one power of two to the "
            "next), so |p| * 2**-11 is right only at powers of two",
            _flawed_stagnates("relative"),
        ),
        Diagnosis(
            "d was rounded to float16 before the sum: two roundings, which decide a near-tie the wrong way; add "
            "in float64 and round once",
            _flawed_stagnates("half_arithmetic"),
        ),
    ),
)

# ---------------------------------------------------------------- stochastic_round


class _Draws:
    """Stands in for a ``numpy.random.Generator``: ``random(shape)`` returns the given draws."""

    def __init__(self, u: np.ndarray) -> None:
        self._u = u

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.asarray(self._u, dtype=np.float64).reshape(shape)


def _stochastic_reference(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    return round_stochastic(x, _F16, _Draws(u))  # type: ignore[arg-type]


def _neighbours(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float16 neighbours lo <= a <= hi of non-negative float64 ``a``."""
    near = a.astype(np.float16)
    lo = np.where(near.astype(np.float64) > a, np.nextafter(near, np.float16(0)), near)
    return lo, np.nextafter(lo, np.float16(np.inf))


def _flawed_stochastic(flaw: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def stochastic_round(x: np.ndarray, u: np.ndarray) -> np.ndarray:
        if flaw == "nearest":
            return x.astype(np.float16)
        if flaw == "signed":  # rounds x up (towards +inf) when u < (x - lo) / (hi - lo), lo <= x <= hi signed
            lo = np.where(x.astype(np.float16).astype(np.float64) > x, np.nextafter(x.astype(np.float16),
                          np.float16(-np.inf)), x.astype(np.float16))  # fmt: skip
            hi = np.nextafter(lo, np.float16(np.inf))
            f = (x - lo.astype(np.float64)) / (hi.astype(np.float64) - lo.astype(np.float64))
            return np.where(u < f, hi, lo).astype(np.float16)
        a = np.abs(x)
        lo, hi = _neighbours(a)
        f = (a - lo.astype(np.float64)) / (hi.astype(np.float64) - lo.astype(np.float64))
        if flaw == "truncate":
            out = lo
        elif flaw == "inverted":
            out = np.where(u > f, hi, lo)
        elif flaw == "from_nearest":  # lo taken as fl(|x|) even when fl(|x|) is above |x|
            near = a.astype(np.float16)
            out = np.where(u < f, np.nextafter(near, np.float16(np.inf)), near)
        else:
            out = np.where(u < f, hi, lo)
        return np.copysign(out, x).astype(np.float16)

    return stochastic_round


def _stochastic_cases() -> list[Case]:
    def case(name: str, x: list[float], u: list[float]) -> Case:
        return Case(name, {"x": np.array(x, dtype=np.float64), "u": np.array(u, dtype=np.float64)})

    g = _GAP_AT_1
    cases = [
        case("a quarter of the way from 1 to its upper neighbour", [1 + g / 4] * 4, [0.1, 0.24, 0.26, 0.9]),
        case("three quarters of the way: fl(x) is the upper neighbour", [1 + 3 * g / 4] * 4, [0.1, 0.74, 0.76, 0.9]),
        case("representable values never move", [1.0, 0.5, -2.0, 0.0], [0.0, 0.3, 0.5, 0.99]),
        case("negative values: the magnitude rounds", [-(1 + g / 4), -(1 + g / 4), -(1 + 3 * g / 4)], [0.1, 0.9, 0.5]),
        case("below 1, where the gap is halved", [1 - g / 8, 1 - g / 8, 0.3], [0.2, 0.3, 0.5]),
        case("subnormals and below the smallest one", [2.0**-26, 2.0**-26, 1.5 * 2.0**-24, 2.0**-20 + 2.0**-25],
             [0.2, 0.3, 0.4, 0.6]),
        case("the largest float16 and just under it", [65504.0, 65500.0, 65500.0], [0.0, 0.8, 0.9]),
    ]
    for seed in range(1, 4):
        r = np.random.default_rng(seed)
        x = r.choice([-1, 1], 16) * 2.0 ** r.uniform(-10, 10, 16)
        cases.append(Case(f"random (seed {seed})", {"x": x, "u": r.random(16)}))
    return cases


STOCHASTIC_ROUND = Exercise(
    name="stochastic_round",
    lesson="10",
    title="stochastic rounding to float16, with the uniform draws given",
    statement=source(
        """
        stochastic_round(x, u) -> rounded

        Round each x to float16 stochastically. For |x| between its two float16
        neighbours lo <= |x| <= hi (consecutive float16 values; lo == hi == |x|
        when |x| is a float16), with the fraction of the gap |x| has covered

            f = (|x| - lo) / (hi - lo)      (0 when |x| is a float16)

        the result is hi when u < f and lo otherwise, with x's sign: the
        magnitude rounds away from zero with probability f, so the expected
        result is x.

        x : float64 array, |x| <= 65504 (the largest float16)
        u : float64 array of the same shape, uniform draws in [0, 1)

        Return a float16 array of x's shape.
        """
    ),
    reference=_stochastic_reference,
    cases=_stochastic_cases(),
    outputs=(Output("rounded", dtype="float16"),),
    # below half the relative gap of float16 (2**-11 at least): only the exact float16 passes
    rtol=2.0**-12,
    atol=0.0,
    solution_source=source(
        """
        def stochastic_round(x, u):
            a = np.abs(x)
            near = a.astype(np.float16)  # one of the two neighbours
            lo = np.where(near.astype(np.float64) > a, np.nextafter(near, np.float16(0)), near)
            hi = np.nextafter(lo, np.float16(np.inf))
            f = (a - lo.astype(np.float64)) / (hi.astype(np.float64) - lo.astype(np.float64))
            return np.copysign(np.where(u < f, hi, lo), x).astype(np.float16)
        """
    ),
    stub_source=source(
        """
        def stochastic_round(x, u):
            \"\"\"x rounded to float16: |x| to its upper neighbour when u < f, else the lower; x's sign.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "work on a = np.abs(x) and put the sign back at the end (np.copysign). Round to nearest first: "
        "a.astype(np.float16) is one of the two neighbours, but which one depends on whether it landed above a.",
        "if fl(a) > a it is hi, and lo is one float16 below it (np.nextafter(near, np.float16(0))); otherwise it "
        "is lo. hi is always np.nextafter(lo, np.float16(np.inf)).",
        "f = (a - lo) / (hi - lo) computed in float64 (exact); the result is np.where(u < f, hi, lo) with x's sign.",
    ),
    diagnoses=(
        Diagnosis(
            "that is round to nearest: u is ignored. Stochastic rounding goes up with probability f, whichever "
            "neighbour is nearer",
            _flawed_stochastic("nearest"),
        ),
        Diagnosis(
            "that always rounds the magnitude down (towards zero): the result must be hi when u < f",
            _flawed_stochastic("truncate"),
        ),
        Diagnosis(
            "u > f rounds up with probability 1 - f: the rule is hi when u < f, so that the expected value is x",
            _flawed_stochastic("inverted"),
        ),
        Diagnosis(
            "fl(|x|) is not always the lower neighbour: when it rounded up, lo is one float16 below it",
            _flawed_stochastic("from_nearest"),
        ),
        Diagnosis(
            "the statement rounds the magnitude |x| away from zero when u < f; rounding x itself towards +inf "
            "has the same law but a different result for a given u on negative x",
            _flawed_stochastic("signed"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (STAGNATES, STOCHASTIC_ROUND)
