"""Lesson 03 exercises (Adam, LAZY vs DORMANCY_DECAY vs DENSE_EQUIVALENT on one coordinate).

Four functions: plain dense Adam, the bias-corrected update with the *global*
step, DORMANCY_DECAY's moments at a touch, and the DENSE_EQUIVALENT catch-up of
a dormant coordinate. References: :class:`sparse_opt.DenseAdam`,
:func:`sparse_opt.sparse_adam.sparse_adam_update` (``DORMANCY_DECAY``) and
:class:`sparse_opt._adam_coasting.AdamCoasting` (the catch-up); the
bias-corrected update is the one-line formula they share.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt._adam_coasting import AdamCoasting
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adam import sparse_adam_update

_EPS_ON_SQRT_V = (
    "eps is added to sqrt(v) instead of sqrt(v_hat): the update is lr * m_hat / (sqrt(v_hat) + eps) with "
    "v_hat = v / (1 - beta2**t), as in torch.optim.Adam (folding the correction into the learning rate, "
    "lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps), moves eps)"
)
_EPS_IN_ROOT = "eps belongs outside the square root: sqrt(v_hat) + eps, not sqrt(v_hat + eps)"
_NO_CORRECTION = "the bias correction is missing: m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t)"


def _update(m: np.ndarray, v: np.ndarray, t: float | np.ndarray, lr: float, beta1: float, beta2: float, eps: float,
            flaw: str = "") -> np.ndarray:
    """``lr * m_hat / (sqrt(v_hat) + eps)`` at step ``t`` (per coordinate if an array), or with one known mistake."""
    if flaw == "eps_on_sqrt_v":
        return lr * np.sqrt(1 - beta2**t) / (1 - beta1**t) * m / (np.sqrt(v) + eps)
    if flaw == "no_correction":
        return lr * m / (np.sqrt(v) + eps)
    m_hat = m / (1 - beta1**t)
    if flaw == "v_uncorrected":
        return lr * m_hat / (np.sqrt(v) + eps)
    if flaw == "root_outside":
        return lr * m_hat / (np.sqrt(v) / (1 - beta2**t) + eps)
    v_hat = v / (1 - beta2**t)
    if flaw == "eps_in_root":
        return lr * m_hat / np.sqrt(v_hat + eps)
    return lr * m_hat / (np.sqrt(v_hat) + eps)


def _moment_arrays(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Plausible Adam moments: m of either sign, v >= m**2-ish, positive."""
    m = 0.1 * rng.standard_normal(n)
    v = 0.01 * rng.standard_normal(n) ** 2 + 1e-4
    return m, v


# ---------------------------------------------------------------- adam_step


def _adam_step_reference(p: np.ndarray, m: np.ndarray, v: np.ndarray, g: np.ndarray, t: int, lr: float,
                         beta1: float, beta2: float, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    params = np.array(p, dtype=np.float64)
    opt = DenseAdam(params, lr=lr, beta1=beta1, beta2=beta2, eps=eps)
    opt.m, opt.v, opt.step_count = np.array(m, dtype=np.float64), np.array(v, dtype=np.float64), t - 1
    opt.step(np.array(g, dtype=np.float64))
    return params, opt.m, opt.v


def _flawed_adam_step(flaw: str) -> Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]:
    def adam_step(p: np.ndarray, m: np.ndarray, v: np.ndarray, g: np.ndarray, t: int, lr: float, beta1: float,
                  beta2: float, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        new_m = beta1 * m + (1 - beta1) * g
        new_v = beta2 * v + (1 - beta2) * g**2
        step = {"t_minus_1": t - 1, "t_plus_1": t + 1}.get(flaw, t)
        used_m, used_v = (m, v) if flaw == "old_moments" else (new_m, new_v)
        u = _update(used_m, used_v, step, lr, beta1, beta2, eps, flaw)
        return (p + u if flaw == "sign" else p - u), new_m, new_v

    return adam_step


def _adam_step_cases() -> list[Case]:
    def case(name: str, p: list[float], m: list[float], v: list[float], g: list[float], t: int,
             lr: float = 0.1, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> Case:
        arrays = {"p": np.array(p), "m": np.array(m), "v": np.array(v), "g": np.array(g)}
        return Case(name, {**arrays, "t": t, "lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps})

    cases = [
        case("the first step (t = 1) from zero moments", [1.0, -1.0, 0.5], [0.0] * 3, [0.0] * 3, [0.5, -2.0, 0.1], 1),
        case("a later step (t = 10)", [1.0, -1.0, 0.5], [0.05, -0.2, 0.01], [0.002, 0.03, 1e-4],
             [0.5, -2.0, 0.1], 10),
        case("a large eps (0.1): where it is added matters", [1.0, -1.0, 0.5], [0.02, -0.05, 0.01],
             [1e-4, 4e-4, 1e-5], [0.1, -0.3, 0.05], 3, eps=0.1),
        case("a zero gradient still moves p (it coasts)", [1.0, -1.0, 0.5], [0.05, -0.2, 0.01],
             [0.002, 0.03, 1e-4], [0.0, 0.0, 0.0], 5),
        case("beta1 = 0 (no momentum)", [1.0, -1.0, 0.5], [0.0] * 3, [0.002, 0.03, 1e-4], [0.5, -2.0, 0.1], 4,
             beta1=0.0),
        case("late in training (t = 10000)", [1.0, -1.0, 0.5], [0.05, -0.2, 0.01], [0.002, 0.03, 1e-4],
             [0.5, -2.0, 0.1], 10_000, lr=1e-3),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        m, v = _moment_arrays(rng, 4)
        cases.append(Case(f"random (seed {seed})", {
            "p": rng.standard_normal(4), "m": m, "v": v, "g": rng.standard_normal(4),
            "t": int(rng.integers(1, 50)), "lr": float(rng.uniform(1e-3, 0.1)), "beta1": 0.9,
            "beta2": float(rng.choice([0.99, 0.999])), "eps": float(rng.choice([1e-8, 1e-3, 0.05])),
        }))
    return cases


ADAM_STEP = Exercise(
    name="adam_step",
    lesson="03",
    title="one step of plain dense Adam",
    statement=source(
        """
        adam_step(p, m, v, g, t, lr, beta1, beta2, eps) -> (p, m, v)

        One step of Adam (Kingma & Ba, 2015) with torch.optim.Adam's eps placement:

            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g**2
            m_hat = m / (1 - beta1**t),  v_hat = v / (1 - beta2**t)
            p = p - lr * m_hat / (sqrt(v_hat) + eps)

        p, m, v, g : float arrays of one shape (parameters, moments, gradient)
        t          : int >= 1, the number of this step (1 on the first step)

        Return the new (p, m, v) as new arrays; do not modify the inputs.
        """
    ),
    reference=_adam_step_reference,
    cases=_adam_step_cases(),
    outputs=(Output("p"), Output("m"), Output("v")),
    solution_source=source(
        """
        def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g**2
            m_hat = m / (1 - beta1**t)  # bias correction: the moments start at 0
            v_hat = v / (1 - beta2**t)
            p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
            return p, m, v
        """
    ),
    stub_source=source(
        """
        def adam_step(p, m, v, g, t, lr, beta1, beta2, eps):
            \"\"\"One Adam step: the new (p, m, v).\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "update the two moments first, then use the new ones: m is a running mean of g, v of g**2.",
        "both moments start at 0, so early on they are too small: divide by 1 - beta1**t and 1 - beta2**t, "
        "with t the number of this step.",
        "p moves by lr * m_hat / (np.sqrt(v_hat) + eps), against the gradient; write `p = p - ...` (not "
        "`p -= ...`, which would change the caller's array).",
    ),
    diagnoses=(
        Diagnosis(_EPS_ON_SQRT_V, _flawed_adam_step("eps_on_sqrt_v")),
        Diagnosis(_EPS_IN_ROOT, _flawed_adam_step("eps_in_root")),
        Diagnosis(_NO_CORRECTION, _flawed_adam_step("no_correction")),
        Diagnosis(
            "the bias correction uses t - 1: t is the number of this step (1 on the first), so divide by "
            "1 - beta1**t",
            _flawed_adam_step("t_minus_1"),
        ),
        Diagnosis(
            "the bias correction uses t + 1: t is already the number of this step, so divide by 1 - beta1**t",
            _flawed_adam_step("t_plus_1"),
        ),
        Diagnosis(
            "p moved with the old moments: update m and v first, then use the new ones in the update of p",
            _flawed_adam_step("old_moments"),
        ),
        Diagnosis("the sign is flipped: p moved up the gradient (p = p - lr * ...)", _flawed_adam_step("sign")),
    ),
)

# ---------------------------------------------------------------- bias_corrected_update


def _bias_corrected_reference(m: np.ndarray, v: np.ndarray, t: int, visits: np.ndarray, lr: float, beta1: float,
                              beta2: float, eps: float) -> np.ndarray:
    return _update(np.asarray(m, dtype=np.float64), np.asarray(v, dtype=np.float64), t, lr, beta1, beta2, eps)


def _flawed_update(flaw: str) -> Callable[..., np.ndarray]:
    def bias_corrected_update(m: np.ndarray, v: np.ndarray, t: int, visits: np.ndarray, lr: float, beta1: float,
                              beta2: float, eps: float) -> np.ndarray:
        step = np.asarray(visits, dtype=np.float64) if flaw == "visits" else t
        return _update(m, v, step, lr, beta1, beta2, eps, flaw)

    return bias_corrected_update


def _bias_corrected_cases() -> list[Case]:
    g = np.array([0.5, -2.0, 0.1])
    first_m, first_v = 0.1 * g, 0.001 * g**2  # the moments after a first touch (beta1 0.9, beta2 0.999)

    def case(name: str, m: np.ndarray, v: np.ndarray, t: int, visits: list[int], eps: float = 1e-8,
             lr: float = 1e-3) -> Case:
        return Case(name, {"m": m, "v": v, "t": t, "visits": np.array(visits, dtype=np.int64), "lr": lr,
                           "beta1": 0.9, "beta2": 0.999, "eps": eps})

    m, v = np.array([0.05, -0.2, 0.01]), np.array([0.002, 0.03, 1e-4])
    cases = [
        case("first touch at global step 50 (visits = 1)", first_m, first_v, 50, [1, 1, 1]),
        case("touched on every step (visits == t)", m, v, 7, [7, 7, 7]),
        case("coordinates touched different numbers of times", m, v, 20, [1, 5, 20]),
        case("the first step (t = 1)", first_m, first_v, 1, [1, 1, 1]),
        case("a large eps (0.1): where it is added matters", np.array([0.02, -0.05, 0.01]),
             np.array([1e-4, 4e-4, 1e-5]), 3, [1, 2, 3], eps=0.1),
        case("late in training (t = 10000): the correction is nearly 1", m, v, 10_000, [1, 100, 10_000]),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        m, v = _moment_arrays(rng, 4)
        t = int(rng.integers(2, 200))
        cases.append(Case(f"random (seed {seed})", {
            "m": m, "v": v, "t": t, "visits": rng.integers(1, t + 1, size=4), "lr": float(rng.uniform(1e-3, 0.1)),
            "beta1": 0.9, "beta2": float(rng.choice([0.99, 0.999])), "eps": float(rng.choice([1e-8, 1e-3, 0.05])),
        }))
    return cases


BIAS_CORRECTED_UPDATE = Exercise(
    name="bias_corrected_update",
    lesson="03",
    title="the bias-corrected Adam update of touched coordinates, with the global step",
    statement=source(
        """
        bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps) -> update

        The amount a lazy Adam subtracts from each touched coordinate, after its
        moments m and v have been updated:  p[index] -= update.

            update = lr * m_hat / (sqrt(v_hat) + eps),
            m_hat = m / (1 - beta1**t),  v_hat = v / (1 - beta2**t)

        m, v   : float arrays, the touched coordinates' (already updated) moments
        t      : int >= 1, the global step: the number of optimizer steps so far, this one included
        visits : int array, how many times each of these coordinates has been touched
                 (what a per-row counter would hold; 1 <= visits <= t)

        Which counter belongs in the bias correction? Return the update (a float
        array shaped like m).
        """
    ),
    reference=_bias_corrected_reference,
    cases=_bias_corrected_cases(),
    outputs=(Output("update"),),
    solution_source=source(
        """
        def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):
            # the global step t, as dense Adam and torch use; a visit count would give
            # a rarely touched row the corrections of a fresh optimizer
            m_hat = m / (1 - beta1**t)
            v_hat = v / (1 - beta2**t)
            return lr * m_hat / (np.sqrt(v_hat) + eps)
        """
    ),
    stub_source=source(
        """
        def bias_corrected_update(m, v, t, visits, lr, beta1, beta2, eps):
            \"\"\"lr * m_hat / (sqrt(v_hat) + eps) for the touched coordinates.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "the bias correction undoes the zeros the moments started from; dense Adam applies it with its step "
        "count, the same for every coordinate.",
        "a lazy Adam must match dense Adam on a coordinate touched at every step, and also on one first touched "
        "late: use the global step t for both corrections, not visits.",
        "m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t), then lr * m_hat / (np.sqrt(v_hat) + eps): "
        "eps outside the square root.",
    ),
    diagnoses=(
        Diagnosis(
            "bias correction uses the coordinate's visit count, not the global step: correct every coordinate "
            "with 1 - beta**t, t the optimizer's step count, as dense Adam and torch do",
            _flawed_update("visits"),
        ),
        Diagnosis(_EPS_ON_SQRT_V, _flawed_update("eps_on_sqrt_v")),
        Diagnosis(_EPS_IN_ROOT, _flawed_update("eps_in_root")),
        Diagnosis(_NO_CORRECTION, _flawed_update("no_correction")),
        Diagnosis("v must be bias-corrected too: v_hat = v / (1 - beta2**t)", _flawed_update("v_uncorrected")),
        Diagnosis(
            "the correction of v goes inside the square root: sqrt(v / (1 - beta2**t)), not sqrt(v) / (1 - beta2**t)",
            _flawed_update("root_outside"),
        ),
    ),
)

# ---------------------------------------------------------------- dormancy_decay_moments


def _dormancy_reference(m: np.ndarray, v: np.ndarray, g: np.ndarray, gap: int | np.ndarray, beta1: float,
                        beta2: float) -> tuple[np.ndarray, np.ndarray]:
    m, v, g = (np.array(x, dtype=np.float64) for x in (m, v, g))
    gaps = np.broadcast_to(np.asarray(gap, dtype=np.int64), m.shape)
    step = int(gaps.max())
    last = (step - gaps).astype(np.int64)  # the coordinates' previous touches, gap steps before `step`
    sparse_adam_update(np.zeros_like(m), m, v, last, np.arange(m.size), g, step=step, lr=0.0,
                       beta1=beta1, beta2=beta2, eps=1e-8, mode=LazyMode.DORMANCY_DECAY)
    return m, v


def _flawed_moments(flaw: str) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def dormancy_decay_moments(m: np.ndarray, v: np.ndarray, g: np.ndarray, gap: int | np.ndarray, beta1: float,
                               beta2: float) -> tuple[np.ndarray, np.ndarray]:
        k = np.asarray(gap, dtype=np.float64) + {"minus_1": -1, "plus_1": 1}.get(flaw, 0)
        decay1 = beta1 if flaw == "lazy" else beta1**k
        decay2 = beta2 if flaw in ("lazy", "v_once") else beta2**k
        w1, w2 = (1 - decay1, 1 - decay2) if flaw == "new_weight" else (1 - beta1, 1 - beta2)
        square = g if flaw == "v_of_g" else g**2
        return decay1 * m + w1 * g, decay2 * v + w2 * square

    return dormancy_decay_moments


def _dormancy_cases() -> list[Case]:
    def case(name: str, m: list[float], v: list[float], g: list[float], gap: int | list[int],
             beta1: float = 0.9, beta2: float = 0.999) -> Case:
        gaps = gap if isinstance(gap, int) else np.array(gap, dtype=np.int64)
        return Case(name, {"m": np.array(m), "v": np.array(v), "g": np.array(g), "gap": gaps,
                           "beta1": beta1, "beta2": beta2})

    cases = [
        case("gap 1: an ordinary Adam moment update", [0.1, -0.2], [0.01, 0.04], [1.0, -1.0], 1),
        case("the lesson's example: touches at steps 1 and 5 (gap 4)", [0.1], [0.001], [1.0], 4),
        case("a different gap for each coordinate", [0.1, -0.2, 0.05], [0.01, 0.04, 0.002], [1.0, -1.0, 0.5],
             [1, 3, 10]),
        case("a zero gradient: only the decay", [0.1, -0.2], [0.01, 0.04], [0.0, 0.0], 5),
        case("a long gap (1000): the old moments fade", [0.1, -0.2], [0.01, 0.04], [1.0, -1.0], 1000,
             beta2=0.99),
        case("beta1 = 0", [0.1, -0.2], [0.01, 0.04], [1.0, -1.0], 3, beta1=0.0),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        m, v = _moment_arrays(rng, 4)
        cases.append(Case(f"random (seed {seed})", {
            "m": m, "v": v, "g": rng.standard_normal(4), "gap": rng.integers(1, 60, size=4),
            "beta1": float(rng.uniform(0.5, 0.95)), "beta2": float(rng.choice([0.9, 0.99, 0.999])),
        }))
    return cases


DORMANCY_DECAY_MOMENTS = Exercise(
    name="dormancy_decay_moments",
    lesson="03",
    title="DORMANCY_DECAY's moments at the touch that ends a gap",
    statement=source(
        """
        dormancy_decay_moments(m, v, g, gap, beta1, beta2) -> (m, v)

        A coordinate last touched at step s is touched again at step t = s + gap
        with gradient g. DORMANCY_DECAY first applies the decay dense Adam applied
        on the dormant steps, then the usual moment update:

            m = beta1**gap * m + (1 - beta1) * g
            v = beta2**gap * v + (1 - beta2) * g**2

        m, v, g : float arrays of one shape (the moments stored at step s, the new gradient)
        gap     : int >= 1, or an int array with one gap per coordinate

        Return the new (m, v) as new arrays; do not modify the inputs.
        """
    ),
    reference=_dormancy_reference,
    cases=_dormancy_cases(),
    outputs=(Output("m"), Output("v")),
    solution_source=source(
        """
        def dormancy_decay_moments(m, v, g, gap, beta1, beta2):
            # dense Adam fed zeros multiplies m by beta1 on each of the gap - 1 dormant
            # steps and once more at the touch: beta1**gap in all
            m = beta1**gap * m + (1 - beta1) * g
            v = beta2**gap * v + (1 - beta2) * g**2
            return m, v
        """
    ),
    stub_source=source(
        """
        def dormancy_decay_moments(m, v, g, gap, beta1, beta2):
            \"\"\"The moments (m, v) after a touch that ends a gap of `gap` steps.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "dense Adam fed zero gradients multiplies m by beta1 and v by beta2 on every step, and adds nothing.",
        "from step s to step t = s + gap there are gap - 1 dormant steps, plus the decay of the touch itself: "
        "count how many times beta1 multiplies m.",
        "only the old moments decay by the gap; the new gradient enters with its usual weight: "
        "m = beta1**gap * m + (1 - beta1) * g (and the same with beta2 and g**2 for v).",
    ),
    diagnoses=(
        Diagnosis(
            "the gap is off by one: beta**(gap - 1); the moments decay once per step from the last touch to "
            "this one, gap times: beta**gap",
            _flawed_moments("minus_1"),
        ),
        Diagnosis(
            "the gap is off by one: beta**(gap + 1); the moments decay once per step from the last touch to "
            "this one, gap times: beta**gap",
            _flawed_moments("plus_1"),
        ),
        Diagnosis(
            "the moments decayed only once: that is LAZY; DORMANCY_DECAY multiplies them by beta1**gap and "
            "beta2**gap",
            _flawed_moments("lazy"),
        ),
        Diagnosis("v must decay by beta2**gap too, not once", _flawed_moments("v_once")),
        Diagnosis(
            "the new gradient keeps its usual weight, 1 - beta1 (and 1 - beta2): only the old moments are "
            "decayed by the gap",
            _flawed_moments("new_weight"),
        ),
        Diagnosis("v averages the squared gradient: (1 - beta2) * g**2", _flawed_moments("v_of_g")),
    ),
)

# ---------------------------------------------------------------- adam_catch_up


def _catch_up_reference(p: np.ndarray, m: np.ndarray, v: np.ndarray, s: int, t: int, lr: float, beta1: float,
                        beta2: float, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p, m, v = (np.array(x, dtype=np.float64) for x in (p, m, v))
    coasting = AdamCoasting(lr, beta1, beta2, eps, 0.0, np.dtype(np.float64))
    return coasting(p, m, v, np.full(p.shape, s, dtype=np.int64), t)


def _flawed_catch_up(flaw: str) -> Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]:
    def adam_catch_up(p: np.ndarray, m: np.ndarray, v: np.ndarray, s: int, t: int, lr: float, beta1: float,
                      beta2: float, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        last = {"fewer": t - 1, "more": t + 1}.get(flaw, t)
        for j in range(s + 1, last + 1):
            old_m, old_v = m, v
            m, v = beta1 * m, beta2 * v
            if flaw == "no_coasting":
                continue
            used_m, used_v = (old_m, old_v) if flaw == "old_moments" else (m, v)
            step = j - s if flaw == "local_step" else j
            u = _update(used_m, used_v, step, lr, beta1, beta2, eps, flaw)
            p = p + u if flaw == "sign" else p - u
        return p, m, v

    return adam_catch_up


def _catch_up_cases() -> list[Case]:
    g = np.array([0.5, -2.0, 0.1])

    def case(name: str, m: np.ndarray, v: np.ndarray, s: int, t: int, lr: float = 0.01, eps: float = 1e-8) -> Case:
        return Case(name, {"p": np.array([1.0, -1.0, 0.5]), "m": m, "v": v, "s": s, "t": t, "lr": lr,
                           "beta1": 0.9, "beta2": 0.999, "eps": eps})

    m, v = np.array([0.05, -0.2, 0.01]), np.array([0.002, 0.03, 1e-4])
    cases = [
        case("s == t: nothing to apply", m, v, 5, 5),
        case("one dormant step", m, v, 3, 4),
        case("the lesson's example: touched at step 1, current through step 4", 0.1 * g, 0.001 * g**2, 1, 4),
        case("never touched (m = v = 0): p does not move", np.zeros(3), np.zeros(3), 0, 10),
        case("a long gap: s = 10, t = 510", m, v, 10, 510),
        case("late in training: s = 1000, t = 1010", m, v, 1000, 1010),
        case("a large eps (0.1): where it is added matters", np.array([0.02, -0.05, 0.01]),
             np.array([1e-4, 4e-4, 1e-5]), 2, 6, eps=0.1),
    ]
    for seed in range(1, 3):
        rng = np.random.default_rng(seed)
        m, v = _moment_arrays(rng, 4)
        s = int(rng.integers(1, 100))
        cases.append(Case(f"random (seed {seed})", {
            "p": rng.standard_normal(4), "m": m, "v": v, "s": s, "t": s + int(rng.integers(1, 40)),
            "lr": float(rng.uniform(1e-3, 0.1)), "beta1": 0.9, "beta2": float(rng.choice([0.99, 0.999])),
            "eps": float(rng.choice([1e-8, 1e-3])),
        }))
    return cases


ADAM_CATCH_UP = Exercise(
    name="adam_catch_up",
    lesson="03",
    title="bring a dormant coordinate current: dense Adam's zero-gradient steps s+1..t",
    statement=source(
        """
        adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps) -> (p, m, v)

        A coordinate was last brought current at global step s and had no gradient
        since. Return what dense Adam (fed zero gradients) holds for it after step
        t: apply the dormant steps j = s + 1, ..., t, each one

            m = beta1 * m,  v = beta2 * v          (gradient 0)
            p = p - lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1**j),  v_hat = v / (1 - beta2**j)

        This is the DENSE_EQUIVALENT catch-up (opt.catch_up(ids)).

        p, m, v : float arrays of one shape
        s, t    : ints, 0 <= s <= t (s = 0: never touched)

        Return the new (p, m, v) as new arrays; do not modify the inputs. A loop is fine.
        """
    ),
    reference=_catch_up_reference,
    cases=_catch_up_cases(),
    outputs=(Output("p"), Output("m"), Output("v")),
    solution_source=source(
        """
        def adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps):
            p, m, v = (np.array(x, dtype=float) for x in (p, m, v))
            for j in range(s + 1, t + 1):  # the dormant steps, by their global number
                m = beta1 * m  # a zero gradient: the moments only decay ...
                v = beta2 * v
                m_hat = m / (1 - beta1**j)
                v_hat = v / (1 - beta2**j)
                p = p - lr * m_hat / (np.sqrt(v_hat) + eps)  # ... and p keeps coasting
            return p, m, v
        """
    ),
    stub_source=source(
        """
        def adam_catch_up(p, m, v, s, t, lr, beta1, beta2, eps):
            \"\"\"(p, m, v) after dense Adam's zero-gradient steps s + 1 .. t.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "a dormant step is a dense Adam step with g = 0: the moments decay, and p still moves, because m is "
        "not zero (it coasts).",
        "loop over the global step numbers j = s + 1 .. t (range(s + 1, t + 1)); each step's bias correction "
        "uses its own j.",
        "in each step decay m and v first, then p = p - lr * m_hat / (np.sqrt(v_hat) + eps) with the new "
        "moments; start from copies so the inputs stay as they were.",
    ),
    diagnoses=(
        Diagnosis(
            "bias correction uses the steps since the last touch (1, 2, ...), not the global steps s + 1 .. t: "
            "dense Adam corrects step j with 1 - beta**j",
            _flawed_catch_up("local_step"),
        ),
        Diagnosis(
            "one step too few: bringing a coordinate current through step t applies s + 1 .. t (t - s steps); "
            "s + 1 .. t - 1 is what a touch at step t applies before its own gradient step",
            _flawed_catch_up("fewer"),
        ),
        Diagnosis(
            "one step too many: the dormant steps are s + 1 .. t (t - s of them); yours applies t - s + 1",
            _flawed_catch_up("more"),
        ),
        Diagnosis(
            "the moments decayed but p did not coast: that is DORMANCY_DECAY; dense Adam keeps moving p by "
            "lr * m_hat / (sqrt(v_hat) + eps) on every dormant step",
            _flawed_catch_up("no_coasting"),
        ),
        Diagnosis(
            "p coasted with the moments before their decay: on each dormant step decay m and v first, then move "
            "p with the new m_hat and v_hat",
            _flawed_catch_up("old_moments"),
        ),
        Diagnosis(_EPS_ON_SQRT_V, _flawed_catch_up("eps_on_sqrt_v")),
        Diagnosis("the sign is flipped: p must coast along -m_hat (p = p - lr * ...)", _flawed_catch_up("sign")),
    ),
)

EXERCISES: tuple[Exercise, ...] = (ADAM_STEP, BIAS_CORRECTED_UPDATE, DORMANCY_DECAY_MOMENTS, ADAM_CATCH_UP)
