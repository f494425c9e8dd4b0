"""Lesson 06 exercises (EGDD): the per-weight gain update and the per-tensor lr_scale update.

Reference: :func:`sparse_opt.egdd.egdd_update`, lingvo's order of operations;
each exercise reads one of its outputs (``gain``, ``lr_scale``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sparse_opt.egdd import EGDD, EGDDHyperParams, egdd_update
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source


def _hyper(**options: Any) -> EGDDHyperParams:
    """EGDD options with the ones an exercise does not involve at :class:`~sparse_opt.EGDD`'s (lingvo's) defaults."""
    return EGDD(np.zeros(1), **{"learning_rate": 0.1, "momentum": 0.9, **options}).hyper_params


# ---------------------------------------------------------------- egdd_gain_update


def _gain_reference(gain: np.ndarray, g: np.ndarray, gbar_old: np.ndarray, gain_learning_rate: float,
                    min_gain: float, max_gain: float, use_signs: bool, beta: float, counter: int) -> np.ndarray:
    g = np.asarray(g, dtype=np.float64)
    zeros = np.zeros_like(g)
    hp = _hyper(gain_learning_rate=gain_learning_rate, min_gain=min_gain, max_gain=max_gain, use_signs=use_signs,
                beta=beta)
    # egdd_update takes the number of earlier updates and increments it itself
    out = egdd_update(zeros, g, zeros, np.asarray(gbar_old, dtype=np.float64), np.asarray(gain, dtype=np.float64),
                      np.asarray(1.0), counter - 1, hp)
    return out.gain


def _flawed_gain(flaw: str) -> Callable[..., np.ndarray]:
    def egdd_gain_update(gain: np.ndarray, g: np.ndarray, gbar_old: np.ndarray, gain_learning_rate: float,
                         min_gain: float, max_gain: float, use_signs: bool, beta: float,
                         counter: int) -> np.ndarray:
        gbar = beta * gbar_old + (1 - beta) * g if flaw == "new_gbar" else gbar_old
        signs = {"always_signs": True, "never_signs": False}.get(flaw, use_signs)
        if signs:
            exponent = gain_learning_rate * np.sign(g) * np.sign(gbar)
        else:
            k = {"counter": counter}.get(flaw, max(counter - 1, 1))
            correction = 1.0 if flaw == "no_correction" else 1 - beta**k
            exponent = gain_learning_rate * g * gbar / correction
        new = gain * np.exp(-exponent if flaw == "sign" else exponent)
        return new if flaw == "no_clip" else np.clip(new, min_gain, max_gain)

    return egdd_gain_update


def _gain_cases() -> list[Case]:
    def case(name: str, gain: list[float], g: list[float], gbar: list[float], use_signs: bool, counter: int,
             gain_lr: float = 0.01, min_gain: float = 0.01, max_gain: float = 100.0, beta: float = 0.9) -> Case:
        return Case(name, {"gain": np.array(gain), "g": np.array(g), "gbar_old": np.array(gbar),
                           "gain_learning_rate": gain_lr, "min_gain": min_gain, "max_gain": max_gain,
                           "use_signs": use_signs, "beta": beta, "counter": counter})

    g, same, opposite = [1.0, -1.0, 0.5, -0.2], [0.3, -0.1, 0.2, -0.4], [-0.3, 0.1, -0.2, 0.4]
    cases = [
        case("signs agree: each gain grows by exp(gain_learning_rate)", [1.0] * 4, g, same, True, 5),
        case("signs disagree: each gain shrinks", [1.0] * 4, g, opposite, True, 5),
        case("a zero gradient or a zero gbar leaves the gain", [2.0, 0.5, 1.0, 3.0], [0.0, 1.0, 0.0, -1.0],
             [0.5, 0.0, 0.0, -0.5], True, 3),
        case("clipped at max_gain", [99.5, 50.0, 1.0, 1.0], g, same, True, 7, gain_lr=0.1),
        case("clipped at min_gain", [0.0105, 1.0, 0.02, 1.0], g, opposite, True, 7, gain_lr=0.1),
        case("use_signs=False, counter 1", [1.0] * 4, g, [0.0] * 4, False, 1, gain_lr=0.5),
        case("use_signs=False, counter 2: still divided by 1 - beta", [1.0] * 4, g, same, False, 2, gain_lr=0.5),
        case("use_signs=False, counter 6: divided by 1 - beta**5", [1.0, 2.0, 0.5, 1.0], g, same, False, 6,
             gain_lr=0.5),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        cases.append(Case(f"random (seed {seed})", {
            "gain": rng.uniform(0.5, 2.0, 5), "g": rng.standard_normal(5), "gbar_old": rng.standard_normal(5),
            "gain_learning_rate": float(rng.uniform(0.01, 0.3)), "min_gain": 0.01, "max_gain": 100.0,
            "use_signs": bool(seed % 2), "beta": float(rng.uniform(0.5, 0.95)), "counter": int(rng.integers(2, 30)),
        }))
    return cases


EGDD_GAIN_UPDATE = Exercise(
    name="egdd_gain_update",
    lesson="06",
    title="EGDD's per-weight gain update (lingvo's order)",
    statement=source(
        """
        egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter) -> gain

        Each weight's gain in lingvo's EGDD, multiplied up when the new gradient
        agrees with the running average gbar_old of past gradients and down when
        it disagrees, then clipped:

            use_signs=True:   gain = clip(gain * exp(gain_learning_rate * sign(g) * sign(gbar_old)), min_gain, max_gain)
            use_signs=False:  gain = clip(gain * exp(gain_learning_rate * g * gbar_old
                                                     / (1 - beta**max(counter - 1, 1))), min_gain, max_gain)

        gain, g, gbar_old : float arrays of one shape (gbar_old is the average before this step)
        counter           : int >= 1, this step's count (already incremented: 1 on the first step)

        Return the new gain as a new array; do not modify the inputs.
        """
    ),
    reference=_gain_reference,
    cases=_gain_cases(),
    outputs=(Output("gain"),),
    solution_source=source(
        """
        def egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter):
            if use_signs:
                agreement = np.sign(g) * np.sign(gbar_old)  # +1, -1, or 0 when either is 0
            else:
                corrected = gbar_old / (1 - beta ** max(counter - 1, 1))  # lingvo's bias correction
                agreement = g * corrected
            return np.clip(gain * np.exp(gain_learning_rate * agreement), min_gain, max_gain)
        """
    ),
    stub_source=source(
        """
        def egdd_gain_update(gain, g, gbar_old, gain_learning_rate, min_gain, max_gain, use_signs, beta, counter):
            \"\"\"The new per-weight gains.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "the update is multiplicative: gain * exp(gain_learning_rate * agreement), where agreement is positive "
        "when g and gbar_old point the same way.",
        "with use_signs the agreement is sign(g) * sign(gbar_old) (np.sign(0) is 0); otherwise g times the "
        "bias-corrected gbar_old, gbar_old / (1 - beta**max(counter - 1, 1)).",
        "clip after the exp: np.clip(gain * np.exp(...), min_gain, max_gain).",
    ),
    diagnoses=(
        Diagnosis(
            "lingvo corrects gbar_old with 1 - beta**max(counter - 1, 1), one step behind the counter (gbar_old is "
            "the average before this step); yours uses 1 - beta**counter",
            _flawed_gain("counter"),
        ),
        Diagnosis(
            "gbar_old needs its bias correction when use_signs=False: divide it by 1 - beta**max(counter - 1, 1)",
            _flawed_gain("no_correction"),
        ),
        Diagnosis(
            "the gain compares g with gbar_old, the average before this step (lingvo updates gbar after the gain), "
            "not with the new average",
            _flawed_gain("new_gbar"),
        ),
        Diagnosis(
            "with use_signs=False the exponent is gain_learning_rate * g * corrected gbar_old, not the product of "
            "signs",
            _flawed_gain("always_signs"),
        ),
        Diagnosis(
            "with use_signs=True the exponent is gain_learning_rate * sign(g) * sign(gbar_old): only the signs "
            "count, not the sizes",
            _flawed_gain("never_signs"),
        ),
        Diagnosis("the new gain must be clipped to [min_gain, max_gain]", _flawed_gain("no_clip")),
        Diagnosis(
            "the sign is flipped: a gain grows when g and gbar_old agree, exp(+gain_learning_rate * ...)",
            _flawed_gain("sign"),
        ),
    ),
)

# ---------------------------------------------------------------- egdd_lr_scale_update


def _lr_scale_reference(lr_scale: float, g: np.ndarray, m_old: np.ndarray, scale_learning_rate: float,
                        min_scale: float, max_scale: float, use_directions: bool) -> np.ndarray:
    g = np.asarray(g, dtype=np.float64)
    zeros = np.zeros_like(g)
    hp = _hyper(scale_learning_rate=scale_learning_rate, min_scale=min_scale, max_scale=max_scale,
                use_directions=use_directions)
    out = egdd_update(zeros, g, np.asarray(m_old, dtype=np.float64), zeros, np.ones_like(g),
                      np.asarray(lr_scale, dtype=np.float64), 0, hp)
    return out.lr_scale


def _flawed_lr_scale(flaw: str) -> Callable[..., float | np.ndarray]:
    def egdd_lr_scale_update(lr_scale: float, g: np.ndarray, m_old: np.ndarray, scale_learning_rate: float,
                             min_scale: float, max_scale: float, use_directions: bool) -> float | np.ndarray:
        directions = {"always_directions": True, "never_directions": False}.get(flaw, use_directions)
        if directions:
            tiny = 0.0 if flaw == "no_tiny" else 1e-10
            g = g / (np.sqrt(np.sum(g * g)) + tiny)
            m_old = m_old / (np.sqrt(np.sum(m_old * m_old)) + tiny)
        inner = g * m_old if flaw == "per_entry" else np.sum(g * m_old)
        new = lr_scale * np.exp(-scale_learning_rate * inner if flaw == "sign" else scale_learning_rate * inner)
        return new if flaw == "no_clip" else np.clip(new, min_scale, max_scale)

    return egdd_lr_scale_update


def _lr_scale_cases() -> list[Case]:
    def case(name: str, lr_scale: float, g: object, m_old: object, use_directions: bool = True,
             scale_lr: float = 0.1, min_scale: float = 0.1, max_scale: float = 10.0) -> Case:
        return Case(name, {"lr_scale": lr_scale, "g": np.array(g, dtype=np.float64),
                           "m_old": np.array(m_old, dtype=np.float64), "scale_learning_rate": scale_lr,
                           "min_scale": min_scale, "max_scale": max_scale, "use_directions": use_directions})

    cases = [
        case("g along the old momentum: the scale grows", 1.0, [1.0, 2.0, -1.0], [0.5, 1.5, -0.5]),
        case("g against the old momentum: it shrinks", 1.0, [1.0, 2.0, -1.0], [-0.5, -1.5, 0.5]),
        case("the first step, m_old = 0: unchanged", 2.0, [1.0, 2.0, -1.0], [0.0, 0.0, 0.0]),
        case("clipped at max_scale", 9.95, [1.0, 2.0, -1.0], [0.5, 1.5, -0.5]),
        case("clipped at min_scale", 0.105, [1.0, 2.0, -1.0], [-0.5, -1.5, 0.5]),
        case("use_directions=False: the raw inner product", 1.0, [1.0, 2.0, -1.0], [0.5, 1.5, -0.5],
             use_directions=False),
        case("a 2-D tensor: one scale for the whole tensor", 1.5, [[1.0, -2.0], [0.5, 3.0]], [[0.2, -0.1], [0.4, 0.6]]),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        cases.append(case(f"random (seed {seed})", float(rng.uniform(0.5, 2.0)), rng.standard_normal(5),
                          rng.standard_normal(5), use_directions=bool(seed % 2),
                          scale_lr=float(rng.uniform(0.01, 0.3))))
    return cases


EGDD_LR_SCALE_UPDATE = Exercise(
    name="egdd_lr_scale_update",
    lesson="06",
    title="EGDD's per-tensor lr_scale update from the new gradient and the old momentum",
    statement=source(
        """
        egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions) -> lr_scale

        One scalar per parameter tensor in lingvo's EGDD, grown when the new
        gradient points along the old momentum and shrunk when it points against it:

            u, w = g / (||g|| + 1e-10), m_old / (||m_old|| + 1e-10)     if use_directions
                 = g, m_old                                            otherwise
            lr_scale = clip(lr_scale * exp(scale_learning_rate * sum(u * w)), min_scale, max_scale)

        lr_scale : float, the current scale
        g, m_old : float arrays of one shape, any number of dimensions; norms and the
                   sum run over the whole tensor
        Return the new lr_scale (a float, or a 0-d array).
        """
    ),
    reference=_lr_scale_reference,
    cases=_lr_scale_cases(),
    outputs=(Output("lr_scale"),),
    solution_source=source(
        """
        def egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions):
            if use_directions:  # unit vectors: the cosine between g and the old momentum
                g = g / (np.sqrt(np.sum(g * g)) + 1e-10)
                m_old = m_old / (np.sqrt(np.sum(m_old * m_old)) + 1e-10)
            inner = np.sum(g * m_old)  # one number for the whole tensor
            return float(np.clip(lr_scale * np.exp(scale_learning_rate * inner), min_scale, max_scale))
        """
    ),
    stub_source=source(
        """
        def egdd_lr_scale_update(lr_scale, g, m_old, scale_learning_rate, min_scale, max_scale, use_directions):
            \"\"\"The new lr_scale of one parameter tensor.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "lr_scale is one number for the whole tensor: reduce the inner product of g and m_old to a single sum.",
        "with use_directions, divide each by its Euclidean norm over the whole tensor plus 1e-10 first; on the "
        "first step m_old is all zeros and the 1e-10 keeps 0 / 0 away.",
        "multiply by np.exp(scale_learning_rate * inner), then clip to [min_scale, max_scale].",
    ),
    diagnoses=(
        Diagnosis(
            "lingvo adds 1e-10 to each norm, g / (||g|| + 1e-10) and m_old / (||m_old|| + 1e-10), so a zero "
            "momentum (the first step) gives 0, not NaN",
            _flawed_lr_scale("no_tiny"),
        ),
        Diagnosis(
            "with use_directions=False the inner product uses the raw g and m_old, not unit vectors",
            _flawed_lr_scale("always_directions"),
        ),
        Diagnosis(
            "with use_directions=True g and m_old are first divided by their norms (plus 1e-10): the signal is "
            "the cosine, whatever the gradient's size",
            _flawed_lr_scale("never_directions"),
        ),
        Diagnosis(
            "lr_scale is one number per tensor: sum the products g * m_old over the whole tensor",
            _flawed_lr_scale("per_entry"),
        ),
        Diagnosis("the new lr_scale must be clipped to [min_scale, max_scale]", _flawed_lr_scale("no_clip")),
        Diagnosis(
            "the sign is flipped: lr_scale grows when g points along the old momentum, exp(+scale_learning_rate "
            "* ...)",
            _flawed_lr_scale("sign"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (EGDD_GAIN_UPDATE, EGDD_LR_SCALE_UPDATE)
