"""Lesson 09 exercises (learning-rate schedules): what dense Adam(W) does on a row's skipped steps.

``skipped_displacement`` is what ``DENSE_EQUIVALENT`` applies to one coordinate
under a schedule: dense Adam's zero-gradient steps ``j = last+1 .. touch-1``,
each at its own rate ``lr_j`` (:mod:`sparse_opt.demos.schedules` derives it
and checks it against :class:`~sparse_opt.DenseAdam`; the reference here is the
same formula, vectorised, so that the checkers need numpy only). The
diagnoses are the shortcuts production catch-ups and first attempts take: the
current rate for every skipped step, the touch step counted as skipped, bias
corrections by the steps since the touch instead of the global step, none at
all, ``eps`` under the square root, and an ``m`` that does not decay.
``decay_over_gap`` is AdamW's decoupled decay over a gap, ``prod_j (1 - lr_j wd)``,
as ``DORMANCY_DECAY`` and ``DENSE_EQUIVALENT`` apply it under a schedule.
"""

from __future__ import annotations

import numpy as np

from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source

BETAS = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def _reference(m: float, v: float, last: int, touch: int, rates: np.ndarray) -> float:
    beta1, beta2, eps = BETAS["beta1"], BETAS["beta2"], BETAS["eps"]
    j = np.arange(last + 1, touch, dtype=np.float64)  # the skipped steps
    k = j - last
    m_hat = beta1**k * m / (1.0 - beta1**j)
    v_hat = beta2**k * v / (1.0 - beta2**j)
    rates = np.asarray(rates, dtype=np.float64)[: j.size]
    return -float(np.dot(rates, m_hat / (np.sqrt(v_hat) + eps)))


def _flawed(flaw: str):
    def skipped_displacement(m: float, v: float, last: int, touch: int, rates: np.ndarray) -> float:
        beta1, beta2, eps = BETAS["beta1"], BETAS["beta2"], BETAS["eps"]
        rates = np.asarray(rates, dtype=np.float64)
        stop = touch + 1 if flaw == "touch_included" else touch
        total = 0.0
        for j in range(last + 1, stop):
            k = j - last
            step = k if flaw == "local_steps" else j
            m_j = m if flaw == "m_not_decayed" else beta1**k * m
            v_j = beta2**k * v
            if flaw == "no_bias_correction":
                m_hat, v_hat = m_j, v_j
            else:
                m_hat, v_hat = m_j / (1 - beta1**step), v_j / (1 - beta2**step)
            denom = np.sqrt(v_hat + eps) if flaw == "eps_inside" else np.sqrt(v_hat) + eps
            rate = rates[-1] if flaw == "current_rate" else rates[k - 1]
            total += rate * m_hat / denom
        return -float(total)

    return skipped_displacement


def _cases() -> list[Case]:
    def case(name: str, m: float, v: float, last: int, touch: int, rates: list[float] | np.ndarray) -> Case:
        return Case(name, {"m": m, "v": v, "last": last, "touch": touch, "rates": np.asarray(rates, dtype=np.float64)})

    warmup = [0.01 * min(1.0, j / 10) for j in range(4, 21)]  # steps 4..20 of a 10-step warm-up to 0.01
    cases = [
        case("no skipped step: nothing moves", 0.2, 0.04, 5, 6, [0.01]),
        case("one skipped step at a constant rate", 0.2, 0.04, 5, 7, [0.01, 0.01]),
        case("a gap across the end of a 10-step warm-up", 0.2, 0.04, 3, 20, warmup),
        case("a step decay inside the gap", -0.1, 0.01, 40, 60, [0.1] * 10 + [0.01] * 10),
        case("early steps: bias correction matters", 0.3, 0.09, 1, 8, np.linspace(0.05, 0.02, 7)),
    ]
    for seed in range(1, 4):
        r = np.random.default_rng(seed)
        last = int(r.integers(1, 30))
        touch = last + int(r.integers(2, 25))
        rates = r.uniform(0.001, 0.05, touch - last)
        cases.append(case(f"random (seed {seed})", float(r.normal(0, 0.3)), float(r.uniform(0.001, 0.2)), last, touch, rates))
    return cases


SKIPPED_DISPLACEMENT = Exercise(
    name="skipped_displacement",
    lesson="09",
    title="the exact displacement of a row's skipped steps under a schedule",
    statement=source(
        """
        skipped_displacement(m, v, last, touch, rates) -> float

        A coordinate was last updated at global step `last`, leaving moments m and
        v, and is next touched at step `touch`. Return how far dense Adam moves it on
        the skipped steps j = last+1 .. touch-1 (zero gradients, no weight decay):

            m_j = beta1**(j - last) * m          v_j = beta2**(j - last) * v
            m_hat = m_j / (1 - beta1**j)         v_hat = v_j / (1 - beta2**j)
            displacement = -sum_j lr_j * m_hat / (sqrt(v_hat) + eps)

        rates[k] is the learning rate of step last + 1 + k, for k = 0 .. touch-last-1
        (the last entry is the rate of the touch step itself, which is not skipped).
        beta1 = 0.9, beta2 = 0.999, eps = 1e-8. Return a float.
        """
    ),
    reference=_reference,
    cases=_cases(),
    outputs=(Output("displacement"),),
    solution_source=source(
        """
        def skipped_displacement(m, v, last, touch, rates):
            beta1, beta2, eps = 0.9, 0.999, 1e-8
            total = 0.0
            for j in range(last + 1, touch):  # the skipped steps, not the touch
                k = j - last  # steps since the last update: the moments' decay
                m_hat = beta1**k * m / (1 - beta1**j)  # bias corrections by the global step j
                v_hat = beta2**k * v / (1 - beta2**j)
                total += rates[k - 1] * m_hat / (np.sqrt(v_hat) + eps)  # each step at its own rate
            return -float(total)
        """
    ),
    stub_source=source(
        """
        def skipped_displacement(m, v, last, touch, rates):
            \"\"\"Dense Adam's displacement over the skipped steps last+1 .. touch-1, each at its own rate.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "loop over the skipped steps j = last + 1 .. touch - 1; rates[j - last - 1] is the rate of step j.",
        "the moments decay by the steps since the last update, beta1**(j - last); the bias corrections use the "
        "global step j, 1 - beta1**j.",
        "eps is added to sqrt(v_hat), outside the square root, and the displacement is minus the sum.",
    ),
    diagnoses=(
        Diagnosis(
            "every skipped step used the touch step's rate (rates[-1]): that is the current-rate catch-up of "
            "FBGEMM (DECOUPLE_GLOBAL) and HugeCTR (LazyGlobal), not dense Adam; step j runs at rates[j - last - 1]",
            _flawed("current_rate"),
        ),
        Diagnosis(
            "the touch step is not skipped: the sum runs over j = last+1 .. touch-1 (range(last + 1, touch))",
            _flawed("touch_included"),
        ),
        Diagnosis(
            "the bias corrections use the global step j, 1 - beta**j, not the steps since the last update",
            _flawed("local_steps"),
        ),
        Diagnosis("the bias corrections are missing: divide m_j by 1 - beta1**j and v_j by 1 - beta2**j",
                  _flawed("no_bias_correction")),
        Diagnosis("eps goes outside the square root: sqrt(v_hat) + eps", _flawed("eps_inside")),
        Diagnosis("m decays on the skipped steps too: m_j = beta1**(j - last) * m", _flawed("m_not_decayed")),
    ),
)

# ---------------------------------------------------------------- decay_over_gap


def _decay_reference(rates: np.ndarray, weight_decay: float) -> float:
    return float(np.prod(1.0 - np.asarray(rates, dtype=np.float64) * weight_decay))


def _flawed_decay(flaw: str):
    def decay_over_gap(rates: np.ndarray, weight_decay: float) -> float:
        rates = np.asarray(rates, dtype=np.float64)
        if flaw == "current_rate":
            return float((1.0 - rates[-1] * weight_decay) ** rates.size)
        if flaw == "touch_excluded":
            return float(np.prod(1.0 - rates[:-1] * weight_decay))
        if flaw == "linearised":
            return float(1.0 - weight_decay * rates.sum())
        if flaw == "once":
            return float(1.0 - rates[-1] * weight_decay)
        raise AssertionError(flaw)

    return decay_over_gap


def _decay_cases() -> list[Case]:
    def case(name: str, rates: list[float] | np.ndarray, weight_decay: float) -> Case:
        return Case(name, {"rates": np.asarray(rates, dtype=np.float64), "weight_decay": weight_decay})

    cases = [
        case("touched at the next step: one factor", [0.1], 0.5),
        case("a constant rate over 5 steps", [0.1] * 5, 0.5),
        case("a warm-up inside the gap", [0.01 * k for k in range(1, 11)], 2.0),
        case("a step decay inside the gap", [0.1] * 4 + [0.01] * 4, 1.0),
        case("no weight decay: nothing shrinks", [0.3, 0.2, 0.1], 0.0),
    ]
    for seed in range(1, 4):
        r = np.random.default_rng(seed)
        cases.append(case(f"random (seed {seed})", r.uniform(0.0, 0.1, int(r.integers(2, 30))), float(r.uniform(0, 5))))
    return cases


DECAY_OVER_GAP = Exercise(
    name="decay_over_gap",
    lesson="09",
    title="AdamW's weight decay over a gap under a schedule (DORMANCY_DECAY, DENSE_EQUIVALENT)",
    statement=source(
        """
        decay_over_gap(rates, weight_decay) -> float

        A row last updated at step s is touched at step t. Dense AdamW shrinks it by
        1 - lr_j * weight_decay on every step j = s+1 .. t, the touch included, and
        DORMANCY_DECAY applies that whole product at the touch. Return the product.

        rates : 1-D float array, rates[k] = lr of step s + 1 + k (its last entry is
                the touch step's rate)
        weight_decay : float >= 0
        """
    ),
    reference=_decay_reference,
    cases=_decay_cases(),
    outputs=(Output("factor"),),
    solution_source=source(
        """
        def decay_over_gap(rates, weight_decay):
            return float(np.prod(1.0 - np.asarray(rates) * weight_decay))  # one factor per step, each at its rate
        """
    ),
    stub_source=source(
        """
        def decay_over_gap(rates, weight_decay):
            \"\"\"prod over the steps s+1 .. t of (1 - lr_j * weight_decay).\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "one factor per step of the gap, the touch step included: len(rates) factors.",
        "each factor uses its own step's rate: 1 - rates[k] * weight_decay.",
        "np.prod(1.0 - rates * weight_decay).",
    ),
    diagnoses=(
        Diagnosis(
            "every step used the touch step's rate, (1 - lr_t * wd)**gap: the current-rate shortcut; step j "
            "shrinks by its own rate, 1 - lr_j * wd",
            _flawed_decay("current_rate"),
        ),
        Diagnosis("the touch step decays too: the product runs over s+1 .. t, all of rates", _flawed_decay("touch_excluded")),
        Diagnosis(
            "the factors multiply: prod(1 - lr_j * wd), not 1 - wd * sum(lr_j) (close only when every lr_j * wd "
            "is tiny)",
            _flawed_decay("linearised"),
        ),
        Diagnosis(
            "that is LAZY's decay, one factor at the touch; DORMANCY_DECAY applies every step's factor",
            _flawed_decay("once"),
        ),
    ),
)

EXERCISES: tuple[Exercise, ...] = (SKIPPED_DISPLACEMENT, DECAY_OVER_GAP)
