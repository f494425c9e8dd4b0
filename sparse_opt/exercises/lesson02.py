"""Lesson 02 exercises (lazy SGD): one lazy step with decay and momentum, and the catch-up of dormant steps.

References: :func:`sparse_opt.sparse_sgd.sparse_sgd_update` (the functional core
of ``SparseSgd``) and :func:`sparse_opt.sparse_sgd.sgd_coast` (its
``DENSE_EQUIVALENT`` catch-up).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparse_opt.exercises._compare import Output
from sparse_opt.exercises._core import Case, Diagnosis, Exercise, source
from sparse_opt.sparse_sgd import sgd_coast, sparse_sgd_update

#: p and buf of sgd_catch_up: floats or float arrays.
Scalars = float | np.ndarray

# ---------------------------------------------------------------- lazy_sgd_step


def _lazy_sgd_reference(
    p: np.ndarray,
    buf: np.ndarray | None,
    index: np.ndarray,
    grad: np.ndarray,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> None:
    sparse_sgd_update(
        p, buf, np.asarray(index, dtype=np.int64), np.asarray(grad, dtype=p.dtype),
        lr=lr, weight_decay=weight_decay, momentum=momentum,
    )


def _flawed_step(flaw: str) -> Callable[..., None]:
    """A lazy SGD step with one known mistake (the names below say which)."""

    def step(p: np.ndarray, buf: np.ndarray | None, index: np.ndarray, grad: np.ndarray, lr: float,
             momentum: float, weight_decay: float) -> None:
        if flaw == "dense":  # every coordinate steps, with gradient 0 where there is none
            full = np.zeros_like(p)
            full[index] = grad
            index, grad = np.arange(p.size), full
        g = grad if flaw == "no_decay" else grad + weight_decay * p[index]
        if buf is None:
            p[index] -= lr * g
            return
        old = buf[index].copy()
        if flaw == "decoupled":
            buf[index] = momentum * old + grad
            p[index] -= lr * buf[index] + lr * weight_decay * p[index]
            return
        buf[index] = momentum * old + ((1 - momentum) * g if flaw == "dampened" else g)
        push = {"gradient": g, "old_buffer": old}.get(flaw, buf[index])
        p[index] += lr * push if flaw == "sign" else -lr * push

    return step


def _lazy_sgd_cases() -> list[Case]:
    def case(name: str, p: list[float], buf: list[float] | None, index: list[int], grad: list[float],
             lr: float, momentum: float, weight_decay: float) -> Case:
        return Case(name, {
            "p": np.array(p), "buf": None if buf is None else np.array(buf),
            "index": np.array(index, dtype=np.int64), "grad": np.array(grad, dtype=np.float64),
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay,
        })

    p0 = [1.0, 2.0, -1.0, 0.5, 3.0, -2.0]
    cases = [
        case("momentum, no weight decay", p0, [0.0] * 6, [1, 4], [0.5, -1.0], 0.1, 0.9, 0.0),
        case("untouched coordinates keep their buffer", p0, [0.1, -0.2, 0.3, 0.4, -0.5, 0.6], [0, 3],
             [1.0, -0.5], 0.1, 0.9, 0.01),
        case("weight decay without momentum (buf is None)", p0, None, [2, 5], [0.25, 1.0], 0.5, 0.0, 0.1),
        case("an explicit zero gradient still decays and pushes", p0, [0.2, 0.2, -0.4, 0.2, 0.2, 0.2], [2],
             [0.0], 0.1, 0.8, 0.05),
        case("no coordinate touched", p0, [0.1] * 6, [], [], 0.1, 0.9, 0.1),
        case("every coordinate touched", p0, [0.3, -0.1, 0.0, 0.2, 0.5, -0.4], [0, 1, 2, 3, 4, 5],
             [0.5, -0.5, 1.0, -1.0, 0.25, 0.0], 0.05, 0.5, 0.2),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        n = 10
        index = np.sort(rng.choice(n, size=int(rng.integers(1, n)), replace=False))
        cases.append(Case(f"random (seed {seed})", {
            "p": rng.standard_normal(n), "buf": rng.standard_normal(n), "index": index.astype(np.int64),
            "grad": rng.standard_normal(index.size), "lr": float(rng.uniform(0.01, 0.5)),
            "momentum": float(rng.choice([0.5, 0.9])), "weight_decay": float(rng.uniform(0.01, 0.1)),
        }))
    return cases


LAZY_SGD_STEP = Exercise(
    name="lazy_sgd_step",
    lesson="02",
    title="one lazy SGD step with coupled weight decay and momentum, in place",
    statement=source(
        """
        lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay) -> None

        One step of torch.optim.SGD (dampening 0, no Nesterov) on the touched
        coordinates only, updating p and buf in place:

            g = grad + weight_decay * p[index]       (coupled weight decay)
            buf[index] = momentum * buf[index] + g   (with momentum)
            p[index] -= lr * buf[index]              (without momentum: p[index] -= lr * g)

        p     : 1-D float array, the parameters (updated in place)
        buf   : 1-D float array, the momentum buffer (updated in place), or None when momentum == 0
        index : 1-D int64 array, the touched coordinates (ascending, distinct)
        grad  : 1-D float array, their gradient values

        Every other coordinate of p and buf must stay exactly as it was.
        """
    ),
    reference=_lazy_sgd_reference,
    cases=_lazy_sgd_cases(),
    outputs=(Output("p"), Output("buf")),
    in_place=("p", "buf"),
    solution_source=source(
        """
        def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
            g = grad + weight_decay * p[index]  # coupled decay, touched coordinates only
            if buf is None:  # no momentum
                p[index] -= lr * g
            else:
                buf[index] = momentum * buf[index] + g
                p[index] -= lr * buf[index]
        """
    ),
    stub_source=source(
        """
        def lazy_sgd_step(p, buf, index, grad, lr, momentum, weight_decay):
            \"\"\"One lazy SGD step on p[index] (and buf[index]), in place.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "work on p[index] and buf[index] only: a lazy step never reads or writes the other coordinates.",
        "the decay is added to the gradient first, g = grad + weight_decay * p[index]; the buffer then "
        "accumulates g, and p moves by the new buffer.",
        "assign into the arrays (`buf[index] = ...`, `p[index] -= ...`) so the caller's arrays change; "
        "with buf None (no momentum) p moves by lr * g.",
    ),
    diagnoses=(
        Diagnosis(
            "coordinates outside index changed: a lazy step writes only p[index] and buf[index] (a dense step "
            "would decay and push every coordinate)",
            _flawed_step("dense"),
        ),
        Diagnosis(
            "weight decay belongs in the gradient, before the momentum buffer: g = grad + weight_decay * p[index], "
            "then buf = momentum * buf + g (torch.optim.SGD's coupled decay), not added after the buffer",
            _flawed_step("decoupled"),
        ),
        Diagnosis("weight_decay was ignored: g = grad + weight_decay * p[index]", _flawed_step("no_decay")),
        Diagnosis(
            "the buffer is momentum * buf + g, without a (1 - momentum) factor (torch's dampening = 0)",
            _flawed_step("dampened"),
        ),
        Diagnosis(
            "p must move by the new buffer, p[index] -= lr * buf[index], not by the gradient alone",
            _flawed_step("gradient"),
        ),
        Diagnosis(
            "p moved by the old buffer: update buf[index] first, then p[index] -= lr * buf[index]",
            _flawed_step("old_buffer"),
        ),
        Diagnosis("the sign is flipped: p moved up the gradient (p[index] -= lr * buf[index])", _flawed_step("sign")),
    ),
)

# ---------------------------------------------------------------- sgd_catch_up


def _sgd_catch_up_reference(
    p: Scalars, buf: Scalars | None, k: int, lr: float, momentum: float, weight_decay: float
) -> tuple[np.ndarray, np.ndarray | None]:
    p_arr = np.array(p, dtype=np.float64)
    buf_arr = None if buf is None else np.array(buf, dtype=np.float64)
    # sgd_coast applies the dormant steps last + 1 .. through: here last = -k, through = 0
    return sgd_coast(p_arr, buf_arr, np.full(p_arr.shape, -k, dtype=np.int64), 0,
                     lr=lr, weight_decay=weight_decay, momentum=momentum)


def _flawed_catch_up(flaw: str) -> Callable[..., tuple[np.ndarray, np.ndarray | None]]:
    """The dense loop of dormant SGD steps with one known mistake."""

    def catch_up(p: Scalars, buf: Scalars | None, k: int, lr: float, momentum: float,
                 weight_decay: float) -> tuple[np.ndarray, np.ndarray | None]:
        p = np.array(p, dtype=np.float64)
        buf = None if buf is None else np.array(buf, dtype=np.float64)
        steps = {"fewer": max(k - 1, 0), "more": k + 1}.get(flaw, k)
        if flaw == "decay_only":
            return p * (1 - lr * weight_decay) ** k, buf
        for _ in range(steps):
            g = 0.0 * p if flaw == "no_decay" else weight_decay * p
            if buf is None:
                p = p - lr * g
                continue
            old = buf
            buf = momentum * buf + g
            p = p - lr * (old if flaw == "old_buffer" else buf) * (-1 if flaw == "sign" else 1)
        return p, buf

    return catch_up


def _sgd_catch_up_cases() -> list[Case]:
    def case(name: str, p: object, buf: object, k: int, lr: float, momentum: float, weight_decay: float) -> Case:
        as_array = (lambda x: np.array(x)) if isinstance(p, list) else (lambda x: x)
        return Case(name, {"p": as_array(p), "buf": None if buf is None else as_array(buf), "k": k,
                           "lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    cases = [
        case("k = 0: nothing to apply", [1.0, -2.0], [0.5, 0.1], 0, 0.1, 0.9, 0.01),
        case("one dormant step", [1.0, -2.0], [0.5, 0.1], 1, 0.1, 0.9, 0.01),
        case("no momentum: pure decay (buf is None)", [1.0, -2.0, 0.5], None, 10, 0.1, 0.0, 0.05),
        case("no weight decay: the buffer keeps pushing", [1.0, -2.0], [0.5, -0.25], 5, 0.1, 0.9, 0.0),
        case("decay and momentum, k = 7", [1.0, -2.0, 3.0], [0.0, 0.0, 0.0], 7, 0.2, 0.8, 0.1),
        case("scalars", 1.0, -0.5, 3, 0.1, 0.9, 0.05),
        case("a long gap, k = 200", [1.0, -2.0], [0.3, -0.1], 200, 0.05, 0.9, 0.05),
    ]
    for seed in range(1, 4):
        rng = np.random.default_rng(seed)
        cases.append(Case(f"random (seed {seed})", {
            "p": rng.standard_normal(4), "buf": rng.standard_normal(4), "k": int(rng.integers(1, 40)),
            "lr": float(rng.uniform(0.01, 0.3)), "momentum": float(rng.uniform(0.3, 0.95)),
            "weight_decay": float(rng.uniform(0.01, 0.2)),
        }))
    return cases


SGD_CATCH_UP = Exercise(
    name="sgd_catch_up",
    lesson="02",
    title="the state after k dormant steps of dense SGD with decay and momentum",
    statement=source(
        """
        sgd_catch_up(p, buf, k, lr, momentum, weight_decay) -> (p, buf)

        Dense SGD keeps stepping a coordinate that has no gradient: its gradient is
        0, but weight decay and momentum still act. Return (p, buf) after k such
        dormant steps, as torch.optim.SGD would hold them (the DENSE_EQUIVALENT
        catch-up). On each dormant step:

            g = weight_decay * p                       (gradient 0, plus the coupled decay)
            buf = momentum * buf + g ;  p = p - lr * buf   (without momentum: p = p - lr * g)

        p, buf : floats or float arrays of one shape (buf is None when momentum == 0)
        k      : int >= 0, the number of dormant steps

        Return new values (buf None without momentum); do not modify the inputs.
        Any correct method will do: a loop is fine.
        """
    ),
    reference=_sgd_catch_up_reference,
    cases=_sgd_catch_up_cases(),
    outputs=(Output("p"), Output("buf")),
    solution_source=source(
        """
        def sgd_catch_up(p, buf, k, lr, momentum, weight_decay):
            p = np.array(p, dtype=float)
            buf = None if buf is None else np.array(buf, dtype=float)
            for _ in range(k):
                g = weight_decay * p  # a zero gradient, plus the coupled decay
                if buf is None:
                    p = p - lr * g
                else:
                    buf = momentum * buf + g
                    p = p - lr * buf
            return p, buf
        """
    ),
    stub_source=source(
        """
        def sgd_catch_up(p, buf, k, lr, momentum, weight_decay):
            \"\"\"(p, buf) after k dormant (zero-gradient) steps of dense SGD.\"\"\"
            raise NotImplementedError  # your code here
        """
    ),
    hints=(
        "a dormant step is an ordinary SGD step whose gradient is 0: only the decay term weight_decay * p is left.",
        "loop k times: g = weight_decay * p, then the buffer and the parameter exactly as in lazy_sgd_step.",
        "start from copies (np.array(p, dtype=float)) and rebind, p = p - lr * buf, so the inputs stay as they "
        "were; return (p, buf), with buf None when there is no momentum.",
    ),
    diagnoses=(
        Diagnosis("the gap is off by one: k dormant steps are due, yours applies k - 1", _flawed_catch_up("fewer")),
        Diagnosis("the gap is off by one: k dormant steps are due, yours applies k + 1", _flawed_catch_up("more")),
        Diagnosis(
            "momentum was ignored: the buffer keeps moving p on every dormant step (buf = momentum * buf + "
            "weight_decay * p; p -= lr * buf), not just the decay (1 - lr * weight_decay)**k",
            _flawed_catch_up("decay_only"),
        ),
        Diagnosis(
            "the decay was left out of the dormant steps: their gradient is weight_decay * p, not 0",
            _flawed_catch_up("no_decay"),
        ),
        Diagnosis(
            "p moved by the old buffer: on each step update buf first, then p -= lr * buf",
            _flawed_catch_up("old_buffer"),
        ),
        Diagnosis("the sign is flipped: each step must subtract lr * buf from p", _flawed_catch_up("sign")),
    ),
)

EXERCISES: tuple[Exercise, ...] = (LAZY_SGD_STEP, SGD_CATCH_UP)
