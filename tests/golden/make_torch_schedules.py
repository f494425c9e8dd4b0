"""Write the round-3 golden vectors for learning-rate schedules from the real PyTorch.

Regenerate from the repository root with::

    /work/venvs/torch/bin/python tests/golden/make_torch_schedules.py

(any Python with torch 2.13.0, numpy and mpmath works). The script does not
import ``sparse_opt``: the schedules of the SPEC are written out below
(:func:`spec_rate`) so that the goldens are an oracle for ``so.schedules``, not
a copy of it. It is seeded and idempotent: a file whose arrays would not change
is not rewritten, and a rerun prints ``unchanged`` for every file. It prints
the measured rate errors quoted below.

Two kinds of files (all arrays load with ``allow_pickle=False``):

``round3_schedules_rates.npz`` -- the rates of torch's schedulers, one case per scheduler set-up
    ``cases`` lists the case names; for each case ``c``: ``c__torch`` (N,) the
    rate of epochs ``0 .. N - 1`` (``group["lr"]`` before each ``opt.step()``;
    step ``t = epoch + 1``), ``c__exact`` (N,) the SPEC's closed form evaluated
    in mpmath at 50 digits from the float64 arguments, as decimal strings of 30
    significant digits (so a test measures a float64 rate's error exactly,
    not against a second rounding), ``c__scheduler`` the
    torch constructor call as text, ``c__kit`` the equal ``so.schedules`` call
    as JSON (``{"function": ..., "args": {...}}``), and ``c__equal_until`` the
    last step up to which torch's scheduler equals it (``N`` except for the
    cosine schedulers, which rise again after ``T_max``; the kit's stays at
    ``final_lr``). Cases ``lambda_*`` are ``LambdaLR(opt, lambda e: f(e + 1))``
    on base lr 1.0 with ``f`` written from the SPEC here; the others are torch's
    own ``LinearLR``, ``CosineAnnealingLR``, ``SequentialLR(LinearLR,
    CosineAnnealingLR)``, ``StepLR`` and ``ExponentialLR`` on the base lr.

``round3_schedules_<opt>_<schedule>[_<variant>].npz`` -- optimizer trajectories under a schedule
    ``torch.optim.Adam``, ``AdamW``, ``SGD`` (momentum 0.9, coupled weight decay,
    ``dampening=0, nesterov=False``) and ``Adagrad`` (``lr_decay > 0``,
    ``weight_decay = 0``), ``foreach=False`` (and ``fused=False`` where it
    exists), each followed by its scheduler: ``opt.step(); sched.step()``. With
    ``LambdaLR`` the base lr is 1.0 and the case's ``f`` gives the rate; with
    torch's own schedulers the base lr is the peak rate. A 6 x 4 table is fed
    dense gradients that are exactly zero on the rows not touched that step
    (what DENSE_EQUIVALENT must equal), for ``NUM_STEPS = 300`` steps:

    - row 0 on every step but ``EMPTY_STEP`` (77), on which no row is touched;
    - row 1 on steps 1, 4, 7, ... (``t % 3 == 1``);
    - row 2 on steps 1, 40, 130, 270: its gaps cross the end of the warm-up
      (50), step-decay boundaries (61, 121, 181, 241) and the cosine's end (250);
    - row 3 first on step 75 (after the warm-up), then 76 and 200;
    - row 4 on steps 1 and 2, then 299 (a gap of 297 steps over everything);
    - row 5 never.

    Gradients are dyadic and point away from zero as in ``make_torch_round2.py``
    (exact in float32, no cancellation). With ``eps = 0`` torch's step 1
    computes ``0 / 0 = NaN`` on rows 3 and 5 (zero moments), which stay NaN.

    Arrays: ``p0`` (6, 4); ``touch_mask`` (T, 6) bool; ``touch_grads`` (n, 4),
    step by step, rows ascending; ``lrs`` (T,) float64, ``group["lr"]`` at each
    ``opt.step()`` (the rate of step ``t`` is ``lrs[t - 1]``); ``checkpoints``
    (C,) and, after each, ``params`` (C, 6, 4) and the optimizer state: Adam's
    ``exp_avg``, ``exp_avg_sq``, SGD's ``momentum_buffer``, Adagrad's ``sum``,
    with torch's ``step`` (C,) for Adam and Adagrad. Metadata as in round 2
    (``torch_version``, ``numpy_version``, ``torch_call``, ``dtype``, ``seed``,
    ``num_steps``), the hyper-parameters (``lr`` is the base lr: 1.0 under
    ``LambdaLR``), ``scheduler`` (the class name: ``LambdaLR``, ``LinearLR``,
    ``CosineAnnealingLR``, ``SequentialLR``, ``StepLR``, ``ExponentialLR``),
    ``scheduler_call`` (text) and ``kit_schedule`` (JSON of the equal
    ``so.schedules`` call, whose rates are the closed forms; with torch's own
    schedulers they differ from ``lrs`` by the recursion's rounding, below).

Torch's recursive rates against the closed forms. Torch computes each epoch's
rate from the previous one (``get_lr``, the "chainable" form): ``LinearLR`` as
``lr * (1 + (end - start) / (total * start + (e - 1) * (end - start)))``,
``StepLR`` and ``ExponentialLR`` as ``lr * gamma``, ``CosineAnnealingLR`` as
``eta_min + (1 + cos(pi e / T)) / (1 + cos(pi (e - 1) / T)) * (lr - eta_min)``,
so one rounding (or a few) per epoch accumulates, while the kit evaluates
each step's closed form with a few roundings. ``LambdaLR`` multiplies the
lambda's value by the base lr 1.0, which is exact. Measured by this script
(printed by every run; largest relative error of torch's rate against the
exact value, over each case's compared steps):

- ``LambdaLR`` with the SPEC's formulas written literally: 0 to 2.2e-16 (one
  or two roundings), except the cosine: 5.5e-15, where ``1 + cos(x)`` cancels
  near ``x = pi`` (the end of the cosine, where the rate is smallest);
- ``LinearLR``: 0 (warm-up of 2), 3.3e-16 (7), 1.26e-15 (50);
- ``StepLR``: 0 (gamma 0.5), 1.7e-16 (0.1, 13 decays), 6.1e-16 (0.9, every step);
- ``ExponentialLR``: 0 (gamma 0.5), 2.5e-15 (0.99, 1000 epochs), 5.4e-15
  (0.999, 3000 epochs): the product of as many roundings;
- ``CosineAnnealingLR`` / ``SequentialLR`` with ``eta_min > 0``: 2.8e-15 to
  4.3e-15; with ``eta_min = 0``: 1.0e-13 and 1.4e-13, at the last steps, where
  the rate goes to 0 and the recursion's ratio of ``1 + cos`` terms near ``cos
  = -1`` loses digits.

The kit's closed forms are within 6 units of float64 roundoff (``2**-53``) of
the exact rates on every recorded step (``tests/test_schedules.py`` bounds each
by its count of roundings). So the kit equals ``LambdaLR`` with the literal
formulas bit for bit except the cosine, and torch's own schedulers to their own
error above; a trajectory driven by a rate off by ``r`` relative has each
update off by ``r`` relative, so over the trajectory goldens (``eta_min > 0``,
largest ``r`` 4.3e-15) the kit's closed-form schedule stays far inside 1e-12 of
torch's runs (``tests/test_schedules.py`` checks it on a float64 transcription
of torch's update rules).

The committed files were made with torch 2.13.0+cpu, numpy 2.4.6 and mpmath 1.3.0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mpmath
import numpy as np
import torch
from make_torch_round2 import _dyadic_rows, _scalar, _torch_dtype, content_digest

OUT_DIR = Path(__file__).resolve().parent
SEED = 20250317
ROWS, COLS = 6, 4
NUM_STEPS = 300
EMPTY_STEP = 77
#: Steps on which rows 2, 3 and 4 are touched (module docstring).
ROW_TOUCHES = {2: (1, 40, 130, 270), 3: (75, 76, 200), 4: (1, 2, 299)}
#: The trajectory schedules' warm-up length, cosine end (``lambda_warmup_cosine``) and decay period.
WARMUP, COSINE_END, DECAY_STEPS = 50, 250, 60


# -- the SPEC's schedules, written out independently of sparse_opt -----------------------------------------
def spec_rate(function: str, args: dict[str, float], t: int) -> float:
    """The SPEC's rate of step ``t`` (1-based) for ``so.schedules.<function>(**args)``, in Python floats."""
    lr = args["lr"]
    if function == "constant":
        return lr
    if function == "linear_warmup":
        return lr * min(1, t / args["warmup_steps"])
    if function == "warmup_cosine":
        w, total, final = args["warmup_steps"], args["total_steps"], args["final_lr"]
        if t <= w:
            return lr * (t / w)
        if t >= total:
            return final
        return final + (lr - final) * (1 + math.cos(math.pi * (t - w) / (total - w))) / 2
    if function == "step_decay":
        return lr * args["gamma"] ** ((t - 1) // args["step_size"])
    if function == "exponential":
        return lr * args["gamma"] ** (t - 1)
    raise ValueError(function)


def exact_rate(function: str, args: dict[str, float], t: int) -> str:
    """The SPEC's rate of step ``t`` in mpmath at 50 digits (from the float64 arguments), as 30 significant digits."""
    with mpmath.workdps(50):
        lr = mpmath.mpf(args["lr"])
        if function == "constant":
            value = lr
        elif function == "linear_warmup":
            value = lr * min(mpmath.mpf(1), mpmath.mpf(t) / args["warmup_steps"])
        elif function == "warmup_cosine":
            w, total, final = args["warmup_steps"], args["total_steps"], mpmath.mpf(args["final_lr"])
            if t <= w:
                value = lr * t / w
            elif t >= total:
                value = final
            else:
                value = final + (lr - final) * (1 + mpmath.cos(mpmath.pi * (t - w) / (total - w))) / 2
        elif function == "step_decay":
            value = lr * mpmath.mpf(args["gamma"]) ** ((t - 1) // args["step_size"])
        elif function == "exponential":
            value = lr * mpmath.mpf(args["gamma"]) ** (t - 1)
        else:
            raise ValueError(function)
        return mpmath.nstr(value, 30, min_fixed=1, max_fixed=0)


def kit_json(function: str, args: dict[str, float]) -> np.ndarray:
    """``{"function": ..., "args": ...}`` as a 0-d unicode array."""
    return _scalar(json.dumps({"function": function, "args": args}, sort_keys=True))


# -- torch schedulers ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchedulerCase:
    """A torch scheduler set-up and the kit schedule it equals (up to step ``equal_until``)."""

    scheduler: str
    kwargs: dict[str, float] = field(default_factory=dict)
    kit_function: str = "constant"
    kit_args: dict[str, float] = field(default_factory=dict)
    equal_until: int | None = None

    @property
    def base_lr(self) -> float:
        """1.0 under ``LambdaLR``, else the kit schedule's ``lr``."""
        return 1.0 if self.scheduler == "LambdaLR" else self.kit_args["lr"]


def build_scheduler(case: SchedulerCase, opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    """Construct ``case``'s torch scheduler on ``opt`` (whose lr is ``case.base_lr``)."""
    sched = torch.optim.lr_scheduler
    kw = case.kwargs
    if case.scheduler == "LambdaLR":
        return sched.LambdaLR(opt, lambda e: spec_rate(case.kit_function, case.kit_args, e + 1))
    if case.scheduler == "LinearLR":
        return sched.LinearLR(opt, start_factor=kw["start_factor"], end_factor=1.0, total_iters=kw["total_iters"])
    if case.scheduler == "CosineAnnealingLR":
        return sched.CosineAnnealingLR(opt, T_max=kw["T_max"], eta_min=kw["eta_min"])
    if case.scheduler == "SequentialLR":
        warm = sched.LinearLR(opt, start_factor=kw["start_factor"], end_factor=1.0, total_iters=kw["total_iters"])
        cosine = sched.CosineAnnealingLR(opt, T_max=kw["T_max"], eta_min=kw["eta_min"])
        return sched.SequentialLR(opt, [warm, cosine], milestones=[kw["milestone"]])
    if case.scheduler == "StepLR":
        return sched.StepLR(opt, step_size=kw["step_size"], gamma=kw["gamma"])
    if case.scheduler == "ExponentialLR":
        return sched.ExponentialLR(opt, gamma=kw["gamma"])
    raise ValueError(case.scheduler)


def scheduler_call(case: SchedulerCase) -> str:
    """The scheduler's construction as text."""
    kw = case.kwargs
    if case.scheduler == "LambdaLR":
        return f"LambdaLR(opt, lambda e: f(e + 1)) with f = so.schedules.{case.kit_function}(**{case.kit_args})"
    if case.scheduler == "SequentialLR":
        return (
            f"SequentialLR(opt, [LinearLR(opt, start_factor={kw['start_factor']!r}, end_factor=1.0, "
            f"total_iters={kw['total_iters']}), CosineAnnealingLR(opt, T_max={kw['T_max']}, "
            f"eta_min={kw['eta_min']!r})], milestones=[{kw['milestone']}])"
        )
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    extra = ", end_factor=1.0" if case.scheduler == "LinearLR" else ""
    return f"{case.scheduler}(opt, {args}{extra})"


def linear_lr(lr: float, warmup: int) -> SchedulerCase:
    """``LinearLR`` equal to ``linear_warmup(lr, warmup)``."""
    return SchedulerCase(
        "LinearLR",
        {"start_factor": 1.0 / warmup, "total_iters": warmup - 1},
        "linear_warmup",
        {"lr": lr, "warmup_steps": warmup},
    )


def sequential_lr(lr: float, warmup: int, total: int, final: float) -> SchedulerCase:
    """``SequentialLR(LinearLR, CosineAnnealingLR, milestones=[warmup - 1])``: ``warmup_cosine`` up to ``total``."""
    kwargs = {"start_factor": 1.0 / warmup, "total_iters": warmup - 1, "T_max": total - warmup, "eta_min": final}
    return SchedulerCase(
        "SequentialLR",
        {**kwargs, "milestone": warmup - 1},
        "warmup_cosine",
        {"lr": lr, "warmup_steps": warmup, "total_steps": total, "final_lr": final},
        equal_until=total,
    )


def cosine_lr(lr: float, total: int, final: float) -> SchedulerCase:
    """``CosineAnnealingLR(T_max=total - 1)`` equal to ``warmup_cosine(lr, 1, total, final)`` up to ``total``."""
    return SchedulerCase(
        "CosineAnnealingLR",
        {"T_max": total - 1, "eta_min": final},
        "warmup_cosine",
        {"lr": lr, "warmup_steps": 1, "total_steps": total, "final_lr": final},
        equal_until=total,
    )


def step_lr(lr: float, step_size: int, gamma: float) -> SchedulerCase:
    """``StepLR`` equal to ``step_decay``."""
    return SchedulerCase(
        "StepLR",
        {"step_size": step_size, "gamma": gamma},
        "step_decay",
        {"lr": lr, "step_size": step_size, "gamma": gamma},
    )


def exponential_lr(lr: float, gamma: float) -> SchedulerCase:
    """``ExponentialLR`` equal to ``exponential``."""
    return SchedulerCase("ExponentialLR", {"gamma": gamma}, "exponential", {"lr": lr, "gamma": gamma})


def lambda_lr(function: str, **args: float) -> SchedulerCase:
    """``LambdaLR(lambda e: f(e + 1))`` on base lr 1.0 with ``f`` the SPEC's ``function(**args)``."""
    return SchedulerCase("LambdaLR", {}, function, args)


#: The rate cases: (case, number of epochs recorded).
RATE_CASES: dict[str, tuple[SchedulerCase, int]] = {
    "linear_w2": (linear_lr(0.3, 2), 40),
    "linear_w7": (linear_lr(0.0123, 7), 40),
    "linear_w50": (linear_lr(0.01, 50), 80),
    "sequential_w7_t53": (sequential_lr(0.0123, 7, 53, 1e-4), 63),
    "sequential_w50_t300": (sequential_lr(0.01, 50, 300, 1e-4), 320),
    "sequential_w50_t300_min0": (sequential_lr(0.01, 50, 300, 0.0), 320),
    "cosine_t100_min0": (cosine_lr(0.1, 100, 0.0), 110),
    "cosine_t300": (cosine_lr(0.01, 300, 1e-4), 300),
    "step_30_01": (step_lr(0.1, 30, 0.1), 400),
    "step_7_05": (step_lr(0.0123, 7, 0.5), 400),
    "step_1_09": (step_lr(1.0, 1, 0.9), 400),
    "exponential_099": (exponential_lr(0.01, 0.99), 1000),
    "exponential_05": (exponential_lr(1.0, 0.5), 300),
    "exponential_0999": (exponential_lr(0.1, 0.999), 3000),
    "lambda_constant": (lambda_lr("constant", lr=0.05), 20),
    "lambda_linear_warmup": (lambda_lr("linear_warmup", lr=0.0123, warmup_steps=7), 40),
    "lambda_warmup_cosine": (lambda_lr("warmup_cosine", lr=0.0123, warmup_steps=7, total_steps=53, final_lr=1e-4), 80),
    "lambda_warmup_cosine_w0": (lambda_lr("warmup_cosine", lr=0.1, warmup_steps=0, total_steps=40, final_lr=0.0), 60),
    "lambda_step_decay": (lambda_lr("step_decay", lr=0.1, step_size=30, gamma=0.1), 400),
    "lambda_exponential": (lambda_lr("exponential", lr=0.01, gamma=0.99), 1000),
}


def record_rates(case: SchedulerCase, epochs: int) -> np.ndarray:
    """``group["lr"]`` at epochs ``0 .. epochs - 1`` of ``case``'s scheduler (``opt.step(); sched.step()``)."""
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=case.base_lr)
    sched = build_scheduler(case, opt)
    rates = []
    for _ in range(epochs):
        rates.append(opt.param_groups[0]["lr"])
        p.grad = torch.zeros_like(p)
        opt.step()
        sched.step()
    return np.array(rates, dtype=np.float64)


def make_rates() -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The arrays of ``round3_schedules_rates.npz`` and the largest relative error of torch's rates per case."""
    out: dict[str, np.ndarray] = {
        "torch_version": _scalar(torch.__version__),
        "numpy_version": _scalar(np.__version__),
        "mpmath_version": _scalar(mpmath.__version__),
        "cases": np.array(sorted(RATE_CASES)),
    }
    errors = {}
    for name, (case, epochs) in sorted(RATE_CASES.items()):
        torch_rates = record_rates(case, epochs)
        exact = np.array([exact_rate(case.kit_function, case.kit_args, t) for t in range(1, epochs + 1)])
        exact_float = exact.astype(np.float64)
        until = case.equal_until or epochs
        out[f"{name}__torch"] = torch_rates
        out[f"{name}__exact"] = exact
        out[f"{name}__scheduler"] = _scalar(scheduler_call(case))
        out[f"{name}__kit"] = kit_json(case.kit_function, case.kit_args)
        out[f"{name}__equal_until"] = _scalar(until, np.int64)
        t, e = torch_rates[:until], exact_float[:until]
        errors[name] = float(np.max(np.abs(t - e) / np.where(e == 0.0, 1.0, np.abs(e))))
    return out, errors


# -- optimizer trajectories -------------------------------------------------------------------------------
def touch_mask() -> np.ndarray:
    """``(NUM_STEPS, ROWS)`` bool: ``mask[t - 1, r]`` says row ``r`` is touched on step ``t`` (module docstring)."""
    t = np.arange(1, NUM_STEPS + 1)
    mask = np.zeros((NUM_STEPS, ROWS), dtype=bool)
    mask[:, 0] = True
    mask[:, 1] = t % 3 == 1
    for row, steps in ROW_TOUCHES.items():
        mask[np.array(steps) - 1, row] = True
    mask[EMPTY_STEP - 1] = False
    return mask


def checkpoints() -> np.ndarray:
    """The steps after which torch's state is recorded: around every touch of rows 2-4, the boundaries, every 25."""
    wanted = {1, 2, 3, WARMUP - 1, WARMUP, WARMUP + 1, EMPTY_STEP, COSINE_END, NUM_STEPS}
    wanted |= {s + d for steps in ROW_TOUCHES.values() for s in steps for d in (-1, 0, 1)}
    wanted |= {k * DECAY_STEPS + d for k in range(1, 5) for d in (0, 1)}
    wanted |= set(range(25, NUM_STEPS + 1, 25))
    return np.array(sorted(s for s in wanted if 1 <= s <= NUM_STEPS), dtype=np.int64)


def trajectory_schedule(name: str, lr: float) -> SchedulerCase:
    """The schedule ``name`` of a trajectory case at peak rate ``lr`` (``lambda_*``: base lr 1.0, the SPEC's ``f``)."""
    final = lr / 100.0
    return {
        "lambda_linear_warmup": lambda_lr("linear_warmup", lr=lr, warmup_steps=WARMUP),
        "lambda_warmup_cosine": lambda_lr(
            "warmup_cosine", lr=lr, warmup_steps=WARMUP, total_steps=COSINE_END, final_lr=final
        ),
        "lambda_step_decay": lambda_lr("step_decay", lr=lr, step_size=DECAY_STEPS, gamma=0.5),
        "lambda_exponential": lambda_lr("exponential", lr=lr, gamma=0.99),
        "torch_linear": linear_lr(lr, WARMUP),
        "torch_cosine": cosine_lr(lr, NUM_STEPS, final),
        "torch_sequential": sequential_lr(lr, WARMUP, NUM_STEPS, final),
        "torch_step": step_lr(lr, DECAY_STEPS, 0.5),
        "torch_exponential": exponential_lr(lr, 0.99),
    }[name]


@dataclass(frozen=True)
class TrajectoryCase:
    """One optimizer run under a schedule."""

    case_id: int
    optimizer: str  # "adam", "adamw", "sgd", "adagrad"
    schedule: str  # a key of trajectory_schedule
    peak_lr: float
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    dtype: str = "float64"
    beta1: float = 0.9
    momentum: float = 0.9
    lr_decay: float = 0.01
    initial_accumulator_value: float = 0.1


TRAJECTORY_CASES: dict[str, TrajectoryCase] = {
    # Adam / AdamW: beta2 in {0.999, 0.9999}, eps in {1e-8, 0}, every schedule
    "adam_lambda_linear_warmup": TrajectoryCase(1, "adam", "lambda_linear_warmup", 1e-2),
    "adamw_lambda_linear_warmup_b2_09999": TrajectoryCase(
        2, "adamw", "lambda_linear_warmup", 1e-2, beta2=0.9999, weight_decay=0.2
    ),
    "adamw_lambda_warmup_cosine": TrajectoryCase(3, "adamw", "lambda_warmup_cosine", 1e-2, weight_decay=0.1),
    "adam_lambda_warmup_cosine_eps0": TrajectoryCase(4, "adam", "lambda_warmup_cosine", 1e-2, beta2=0.9999, eps=0.0),
    "adam_lambda_step_decay_b2_09999": TrajectoryCase(5, "adam", "lambda_step_decay", 1e-2, beta2=0.9999),
    "adamw_lambda_exponential_eps0": TrajectoryCase(
        6, "adamw", "lambda_exponential", 1e-2, beta2=0.9999, eps=0.0, weight_decay=0.5
    ),
    "adam_torch_linear_b2_09999": TrajectoryCase(7, "adam", "torch_linear", 1e-2, beta2=0.9999),
    "adamw_torch_cosine": TrajectoryCase(8, "adamw", "torch_cosine", 1e-2, weight_decay=0.1),
    "adamw_torch_sequential_eps0": TrajectoryCase(9, "adamw", "torch_sequential", 1e-2, eps=0.0, weight_decay=0.1),
    "adam_torch_step": TrajectoryCase(10, "adam", "torch_step", 1e-2),
    "adamw_torch_exponential_b2_09999": TrajectoryCase(
        11, "adamw", "torch_exponential", 1e-2, beta2=0.9999, weight_decay=0.1
    ),
    "adamw_lambda_warmup_cosine_float32": TrajectoryCase(
        12, "adamw", "lambda_warmup_cosine", 1e-2, weight_decay=0.1, dtype="float32"
    ),
    "adam_torch_sequential_float32": TrajectoryCase(13, "adam", "torch_sequential", 1e-2, dtype="float32"),
    # SGD: momentum 0.9, coupled weight decay 0.01, dampening 0, nesterov False
    **{
        f"sgd_{name}": TrajectoryCase(100 + i, "sgd", name, 0.05, weight_decay=0.01)
        for i, name in enumerate(
            (
                "lambda_linear_warmup",
                "lambda_warmup_cosine",
                "lambda_step_decay",
                "lambda_exponential",
                "torch_linear",
                "torch_cosine",
                "torch_sequential",
                "torch_step",
                "torch_exponential",
            )
        )
    },
    "sgd_lambda_warmup_cosine_float32": TrajectoryCase(
        120, "sgd", "lambda_warmup_cosine", 0.05, weight_decay=0.01, dtype="float32"
    ),
    # Adagrad: lr_decay 0.01 on top of the schedule, weight_decay 0
    **{
        f"adagrad_{name}": TrajectoryCase(200 + i, "adagrad", name, 0.1)
        for i, name in enumerate(
            (
                "lambda_linear_warmup",
                "lambda_warmup_cosine",
                "lambda_step_decay",
                "lambda_exponential",
                "torch_sequential",
                "torch_step",
            )
        )
    },
    "adagrad_lambda_warmup_cosine_float32": TrajectoryCase(
        220, "adagrad", "lambda_warmup_cosine", 0.1, dtype="float32"
    ),
}


def build_optimizer(case: TrajectoryCase, p: torch.nn.Parameter, base_lr: float) -> tuple[torch.optim.Optimizer, str]:
    """``case``'s torch optimizer on ``p`` at ``base_lr`` and its construction as text."""
    if case.optimizer in ("adam", "adamw"):
        cls = torch.optim.AdamW if case.optimizer == "adamw" else torch.optim.Adam
        kwargs = {
            "lr": base_lr,
            "betas": (case.beta1, case.beta2),
            "eps": case.eps,
            "weight_decay": case.weight_decay,
            "amsgrad": False,
            "maximize": False,
            "foreach": False,
            "fused": False,
        }
    elif case.optimizer == "sgd":
        cls = torch.optim.SGD
        kwargs = {
            "lr": base_lr,
            "momentum": case.momentum,
            "dampening": 0.0,
            "weight_decay": case.weight_decay,
            "nesterov": False,
            "maximize": False,
            "foreach": False,
            "fused": False,
        }
    else:
        cls = torch.optim.Adagrad
        kwargs = {
            "lr": base_lr,
            "lr_decay": case.lr_decay,
            "weight_decay": 0.0,
            "initial_accumulator_value": case.initial_accumulator_value,
            "eps": 1e-10,
            "foreach": False,
            "maximize": False,
        }
    text = f"torch.optim.{cls.__name__}([p], " + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"
    return cls([p], **kwargs), text


#: Optimizer state recorded per optimizer: (torch key, file key).
STATE_KEYS = {
    "adam": (("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")),
    "adamw": (("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")),
    "sgd": (("momentum_buffer", "momentum_buffer"),),
    "adagrad": (("sum", "sum"),),
}


def make_trajectory(case: TrajectoryCase) -> dict[str, np.ndarray]:
    """Run ``case`` in torch and return the file's arrays (module docstring)."""
    rng = np.random.default_rng([SEED, case.case_id])
    sign = rng.choice([-1.0, 1.0], size=(ROWS, COLS))
    p0 = (sign * rng.uniform(0.5, 1.5, size=(ROWS, COLS))).astype(case.dtype)
    mask = touch_mask()
    away = -np.sign(p0)
    tdtype = _torch_dtype(case.dtype)
    sched_case = trajectory_schedule(case.schedule, case.peak_lr)
    p = torch.nn.Parameter(torch.tensor(p0, dtype=tdtype))
    opt, call = build_optimizer(case, p, sched_case.base_lr)
    sched = build_scheduler(sched_case, opt)
    marks = checkpoints()
    grads, lrs = [], []
    record: dict[str, list[np.ndarray]] = {"params": []} | {key: [] for _, key in STATE_KEYS[case.optimizer]}
    steps = []
    for t in range(1, NUM_STEPS + 1):
        ids = np.flatnonzero(mask[t - 1])
        rows = _dyadic_rows(rng, away[ids], (13, 255), -7).astype(case.dtype)
        dense = np.zeros((ROWS, COLS), dtype=case.dtype)
        dense[ids] = rows
        p.grad = torch.tensor(dense, dtype=tdtype)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        grads.append(rows)
        if t in marks:
            state = opt.state[p]
            record["params"].append(p.detach().numpy().copy())
            for torch_key, key in STATE_KEYS[case.optimizer]:
                record[key].append(state[torch_key].numpy().copy())
            if "step" in state:
                steps.append(int(state["step"].item()))
    out = {
        "torch_version": _scalar(torch.__version__),
        "numpy_version": _scalar(np.__version__),
        "torch_call": _scalar(call),
        "dtype": _scalar(case.dtype),
        "seed": np.array([SEED, case.case_id], dtype=np.int64),
        "num_steps": _scalar(NUM_STEPS, np.int64),
        "lr": _scalar(sched_case.base_lr),
        "weight_decay": _scalar(case.weight_decay),
        "scheduler": _scalar(sched_case.scheduler),
        "scheduler_call": _scalar(scheduler_call(sched_case)),
        "kit_schedule": kit_json(sched_case.kit_function, sched_case.kit_args),
        "p0": p0,
        "touch_mask": mask,
        "touch_grads": np.concatenate(grads).astype(case.dtype),
        "lrs": np.array(lrs, dtype=np.float64),
        "checkpoints": marks,
        **{key: np.stack(value) for key, value in record.items()},
    }
    if case.optimizer in ("adam", "adamw"):
        out |= {"beta1": _scalar(case.beta1), "beta2": _scalar(case.beta2), "eps": _scalar(case.eps)}
    elif case.optimizer == "sgd":
        out |= {"momentum": _scalar(case.momentum)}
    else:
        out |= {
            "lr_decay": _scalar(case.lr_decay),
            "initial_accumulator_value": _scalar(case.initial_accumulator_value),
            "eps": _scalar(1e-10),
        }
    if steps:
        out["step"] = np.array(steps, dtype=np.int64)
    return out


# -- writing -----------------------------------------------------------------------------------------------
def _write(name: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``OUT_DIR / f"round3_schedules_{name}.npz"`` unless it already holds exactly these arrays."""
    path = OUT_DIR / f"round3_schedules_{name}.npz"
    digest = content_digest(arrays)
    if path.exists():
        with np.load(path, allow_pickle=False) as old:
            if content_digest({key: old[key] for key in old.files}) == digest:
                print(f"unchanged {path.name} ({path.stat().st_size} bytes) {digest}")
                return
    np.savez_compressed(path, **arrays)
    print(f"wrote     {path.name} ({path.stat().st_size} bytes) {digest}")


def main() -> None:
    """Write ``round3_schedules_rates.npz`` and every trajectory file, and print torch's measured rate errors."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rates, errors = make_rates()
    _write("rates", rates)
    for name, err in sorted(errors.items()):
        print(f"  torch rate vs exact closed form, {name:26s} {err:.2e}")
    for name, case in TRAJECTORY_CASES.items():
        _write(name, make_trajectory(case))


if __name__ == "__main__":
    main()
