"""Write the round-2 golden vectors (DENSE_EQUIVALENT Adam(W) and SGD, Adagrad) from the real PyTorch.

``tests/test_torch_golden_round2.py`` replays these files through ``sparse_opt``
with numpy only. Regenerate them from the repository root with::

    /work/venvs/torch/bin/python tests/golden/make_torch_round2.py

(any Python with torch 2.13.0 and numpy works, from anywhere). The script is
seeded and idempotent: a file whose arrays would not change is not rewritten,
and a rerun prints ``unchanged`` for every file.

Every problem is a 6 x 3 table (float64 unless the case says float32). Rows
have their own touch schedule (``_touch_mask``) and receive exactly zero
gradient on their dormant steps, densely for the dense optimizers:

- row 0 on every step (except the case's ``empty_steps``, where no row is touched);
- row 1 on every odd step (1, 3, 5, ...);
- row 2 on steps 1, 11, 21, ... (every 10);
- row 3 first at the late step ``T - 8``, then at ``T - 7`` and ``T - 5``;
- row 4 at step 1 and at step ``1 + gap``, dormant between and after
  (``gap`` is longer than ``1 / (1 - beta2)`` in every Adam case but the
  ``beta2 = 0.9999`` grid entry; see ``ADAM_CASES``);
- row 5 never.

Rows 0, 1, 2 and 4 are all touched on step 1: with ``eps = 0`` torch's first
step computes ``0 / 0 = NaN`` on every row with zero moments, which stays NaN
for good, so only rows 3 and 5 are NaN there and the other rows' coasting is
still measured.

Gradient values are dyadic (``k * 2**-e`` with an integer ``k``), so they are
exact in float32 and compress well, and each entry keeps one sign across all
steps, pointing away from zero (``-sign(p0)``; ``+sign(p0)`` with
``maximize``): parameters move away from zero and moments never cancel, so an
entry-wise relative error measures the semantics, not the rounding of terms
that cancelled.

Files (``round2_<case>.npz``; all arrays load with ``allow_pickle=False``):

``round2_adam_<case>``, ``round2_adamw_<case>``
    ``torch.optim.Adam`` (``weight_decay = 0``) or ``torch.optim.AdamW``
    (decoupled decay), ``foreach=False, fused=False`` (the CPU default, pinned),
    fed dense gradients. Arrays: ``p0`` (6, 3); ``touch_mask`` (T, 6) bool --
    step ``t``'s touched rows are ``flatnonzero(touch_mask[t - 1])``;
    ``touch_grads`` (n, 3) -- their gradient rows, step by step, rows ascending
    within a step; ``checkpoints`` (C,) -- the steps after which torch's
    ``params``, ``exp_avg``, ``exp_avg_sq`` (C, 6, 3) and ``step`` (C,) were
    recorded. Long runs keep only these checkpoints, never every step.
``round2_sgd_<case>``
    ``torch.optim.SGD(dampening=0, nesterov=False, foreach=False, fused=False)``
    with coupled weight decay and/or momentum, same layout, with
    ``momentum_buffer`` instead of the moments (absent without momentum).
``round2_adagrad_<case>``
    ``torch.optim.Adagrad(foreach=False)`` twice from the same ``p0``: on the
    weight of ``nn.Embedding.from_pretrained(p0, freeze=False, sparse=True)``
    with the lookup's uncoalesced sparse gradient (``loss = (emb(row_ids) *
    row_grads).sum()``: repeated ids, any order, one step with no lookup), and
    on a plain parameter fed that gradient coalesced and densified (explicit
    zeros on the rows not looked up). Arrays: ``p0``; ``lookup_offsets``
    (T + 1,), ``row_ids``, ``row_grads`` -- step ``t``'s lookup is
    ``row_ids[lookup_offsets[t - 1]:lookup_offsets[t]]`` with the same rows of
    ``row_grads``, in torch's order; ``params_sparse``, ``sum_sparse``,
    ``params_dense``, ``sum_dense`` (T, 6, 3) after every step; ``step`` (T,).
    The 60 lookups (``_adagrad_lookup``): row 0 one to three times a step,
    row 1 on about half the steps (once or twice), row 2 every 5 steps, row 3
    twice on every third step from step 45 (first touched late: its rate is
    decayed by the global step), row 4 at steps 2 and 50, row 5 never; step
    20 looks up nothing (torch still counts it).

Every file also stores 0-d metadata: ``torch_version``, ``numpy_version``,
``torch_call``, ``dtype``, ``seed`` (``[SEED, case_id]``), ``num_steps`` and
the hyper-parameters (``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``,
``maximize``, ``momentum``, ``lr_decay``, ``initial_accumulator_value`` as they
apply), plus ``long_gap`` for the Adam and SGD cases.

The committed files were made with torch 2.13.0+cpu and numpy 2.4.6.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

OUT_DIR = Path(__file__).resolve().parent
SEED = 20250302
ROWS, COLS = 6, 3
#: Row 4 is first touched at this step, then ``gap`` steps later.
EARLY_STEP = 1
#: Steps after row 4's second touch: the run has ``T = EARLY_STEP + gap + TAIL`` steps.
TAIL = 20
#: Row 3's first touch is at ``T - LATE_BEFORE_END``.
LATE_BEFORE_END = 8


# -- schedules, gradients and checkpoints -----------------------------------------------------------------
def _touch_mask(num_steps: int, gap: int, empty_steps: tuple[int, ...]) -> np.ndarray:
    """``(num_steps, ROWS)`` bool: ``mask[t - 1, r]`` says row ``r`` is touched on step ``t`` (module docstring).

    Parameters
    ----------
    num_steps : int
        ``T``.
    gap : int
        Row 4's dormant gap: touched at ``EARLY_STEP`` and ``EARLY_STEP + gap``.
    empty_steps : tuple of int
        Steps on which no row is touched (1-based).

    Returns
    -------
    numpy.ndarray
    """
    t = np.arange(1, num_steps + 1)
    late = num_steps - LATE_BEFORE_END
    mask = np.zeros((num_steps, ROWS), dtype=bool)
    mask[:, 0] = True
    mask[:, 1] = t % 2 == 1
    mask[:, 2] = t % 10 == 1
    mask[[late - 1, late, late + 2], 3] = True
    mask[[EARLY_STEP - 1, EARLY_STEP + gap - 1], 4] = True
    for step in empty_steps:
        mask[step - 1] = False
    assert EARLY_STEP + gap < late and late + 3 <= num_steps
    return mask


def _initial_table(rng: np.random.Generator, dtype: str) -> np.ndarray:
    """``p0``: entries of magnitude ``U(0.5, 1.5)``, random signs, in ``dtype``."""
    sign = rng.choice([-1.0, 1.0], size=(ROWS, COLS))
    return (sign * rng.uniform(0.5, 1.5, size=(ROWS, COLS))).astype(dtype)


def _dyadic_rows(rng: np.random.Generator, sign: np.ndarray, k_range: tuple[int, int], exponent: int) -> np.ndarray:
    """``sign * k * 2**exponent`` (float64) with integer ``k`` uniform in ``k_range`` (inclusive).

    Parameters
    ----------
    rng : numpy.random.Generator
    sign : numpy.ndarray
        +1/-1 per entry; the result has its shape.
    k_range : (int, int)
        Smallest and largest numerator.
    exponent : int
        Power of two of the scale.

    Returns
    -------
    numpy.ndarray
        Values exact in float32 (``k`` has at most 24 bits).
    """
    k = rng.integers(k_range[0], k_range[1] + 1, size=sign.shape)
    return sign * np.ldexp(k.astype(np.float64), exponent)


def _checkpoints(num_steps: int, gap: int) -> np.ndarray:
    """The steps after which torch's state is recorded: early steps, around each special touch, powers of ten, the end."""
    late = num_steps - LATE_BEFORE_END
    again = EARLY_STEP + gap
    wanted = {1, 2, 3, 5, 11, 30, 100, 300, 1000, 3000, 10000}
    wanted |= {again - 1, again, again + 1, late - 1, late, late + 2, num_steps}
    return np.array(sorted(s for s in wanted if 1 <= s <= num_steps), dtype=np.int64)


def _scalar(x: object, dtype: type = np.float64) -> np.ndarray:
    """A 0-d array of ``x`` (numbers as float64 unless told, strings as numpy unicode)."""
    return np.array(x) if isinstance(x, str) else np.array(x, dtype=dtype)


def _torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype named ``dtype`` ("float64" or "float32")."""
    return {"float64": torch.float64, "float32": torch.float32}[dtype]


# -- Adam / AdamW ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AdamCase:
    """One Adam(W) problem: hyper-parameters, dtype, row 4's gap and the gradient scale."""

    case_id: int
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    gap: int
    maximize: bool = False
    dtype: str = "float64"
    empty_steps: tuple[int, ...] = ()
    #: Gradient numerators and power of two: |g| in [k0, k1] * 2**e.
    k_range: tuple[int, int] = (13, 255)
    exponent: int = -7


def _adam_grid() -> dict[str, AdamCase]:
    """beta1 in {0, 0.5, 0.99} x beta2 in {0, 0.5, 0.9, 0.9999}, short runs (gap 40), AdamW on alternate entries."""
    cases = {}
    for i, beta1 in enumerate((0.0, 0.5, 0.99)):
        for j, beta2 in enumerate((0.0, 0.5, 0.9, 0.9999)):
            decoupled = (i + j) % 2 == 0
            name = f"{'adamw' if decoupled else 'adam'}_grid_b1_{beta1:g}_b2_{beta2:g}".replace(".", "")
            cases[name] = AdamCase(
                case_id=100 + 10 * i + j,
                lr=1e-2,
                beta1=beta1,
                beta2=beta2,
                eps=1e-8,
                weight_decay=0.5 if decoupled else 0.0,  # lr * wd = 5e-3
                gap=40,
                empty_steps=(6,),
            )
    return cases


ADAM_CASES: dict[str, AdamCase] = {
    # default betas and eps, gap 3000 > 1 / (1 - 0.999), with and without decoupled decay
    "adam_default": AdamCase(1, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, gap=3000),
    "adamw_default": AdamCase(2, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, gap=3000),
    # beta2 = 0.99, gap 400 > 100, lr * wd = 1e-2
    "adamw_beta2_099": AdamCase(
        3, lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=1.0, gap=400, empty_steps=(25,)
    ),
    # eps = 0: torch computes 0 / 0 = NaN on rows whose moments are still zero
    "adam_eps0": AdamCase(4, lr=1e-2, beta1=0.9, beta2=0.999, eps=0.0, weight_decay=0.0, gap=1200, empty_steps=(25,)),
    "adamw_eps0": AdamCase(5, lr=1e-2, beta1=0.9, beta2=0.99, eps=0.0, weight_decay=0.5, gap=150, empty_steps=(6,)),
    # eps = 1e-3 dominates sqrt(v_hat) ~ |g| ~ 1e-5
    "adamw_eps_large": AdamCase(
        6, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-3, weight_decay=0.2, gap=1200, k_range=(84, 336), exponent=-24
    ),
    "adamw_maximize": AdamCase(
        7, lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.5, gap=150, maximize=True, empty_steps=(6,)
    ),
    # beta2 = 0.9999 with a gap longer than 1 / (1 - beta2) = 10000 (and than sparse_opt's coasting window,
    # about 770 steps here; beta1 = 0.99 would make that window ~8900 steps and the replay ~10x slower). No
    # weight decay: (1 - lr * wd)**10500 would shrink row 4's coasting below what its next update can show.
    "adam_b2_09999_long": AdamCase(8, lr=1e-2, beta1=0.9, beta2=0.9999, eps=1e-8, weight_decay=0.0, gap=10500),
    # the float32 case: gap 1200 > 1000
    "adamw_float32": AdamCase(
        9, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, gap=1200, dtype="float32"
    ),
    **_adam_grid(),
}


def _adam_call(case: AdamCase) -> str:
    """The torch constructor call of ``case``, as text."""
    head = "torch.optim.AdamW" if case.weight_decay else "torch.optim.Adam"
    return (
        f"{head}([p], lr={case.lr}, betas=({case.beta1}, {case.beta2}), eps={case.eps}, "
        f"weight_decay={case.weight_decay}, amsgrad=False, maximize={case.maximize}, foreach=False, fused=False)"
    )


def make_adam(case: AdamCase) -> dict[str, np.ndarray]:
    """Run ``torch.optim.Adam``/``AdamW`` on ``case``'s schedule and return the file's arrays.

    Parameters
    ----------
    case : AdamCase

    Returns
    -------
    dict of str to numpy.ndarray
        See the module docstring.
    """
    rng = np.random.default_rng([SEED, case.case_id])
    num_steps = EARLY_STEP + case.gap + TAIL
    p0 = _initial_table(rng, case.dtype)
    mask = _touch_mask(num_steps, case.gap, case.empty_steps)
    away = np.sign(p0) if case.maximize else -np.sign(p0)
    tdtype = _torch_dtype(case.dtype)
    p = torch.nn.Parameter(torch.tensor(p0, dtype=tdtype))
    kwargs = {
        "lr": case.lr,
        "betas": (case.beta1, case.beta2),
        "eps": case.eps,
        "amsgrad": False,
        "maximize": case.maximize,
        "foreach": False,
        "fused": False,
    }
    if case.weight_decay:
        opt = torch.optim.AdamW([p], weight_decay=case.weight_decay, **kwargs)
    else:
        opt = torch.optim.Adam([p], weight_decay=0.0, **kwargs)
    checkpoints = _checkpoints(num_steps, case.gap)
    grads, params, exp_avg, exp_avg_sq, steps = [], [], [], [], []
    for t in range(1, num_steps + 1):
        ids = np.flatnonzero(mask[t - 1])
        rows = _dyadic_rows(rng, away[ids], case.k_range, case.exponent).astype(case.dtype)
        dense = np.zeros((ROWS, COLS), dtype=case.dtype)
        dense[ids] = rows
        p.grad = torch.tensor(dense, dtype=tdtype)
        opt.step()
        grads.append(rows)
        if t in checkpoints:
            state = opt.state[p]
            params.append(p.detach().numpy().copy())
            exp_avg.append(state["exp_avg"].numpy().copy())
            exp_avg_sq.append(state["exp_avg_sq"].numpy().copy())
            steps.append(int(state["step"].item()))
    return {
        **_metadata(case.dtype, _adam_call(case), case.case_id, num_steps),
        "lr": _scalar(case.lr),
        "beta1": _scalar(case.beta1),
        "beta2": _scalar(case.beta2),
        "eps": _scalar(case.eps),
        "weight_decay": _scalar(case.weight_decay),
        "maximize": _scalar(case.maximize, np.bool_),
        "long_gap": _scalar(case.gap, np.int64),
        "p0": p0,
        "touch_mask": mask,
        "touch_grads": np.concatenate(grads).astype(case.dtype),
        "checkpoints": checkpoints,
        "params": np.stack(params),
        "exp_avg": np.stack(exp_avg),
        "exp_avg_sq": np.stack(exp_avg_sq),
        "step": np.array(steps, dtype=np.int64),
    }


# -- SGD ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SgdCase:
    """One SGD problem (``dampening = 0``, ``nesterov = False``)."""

    case_id: int
    lr: float
    momentum: float
    weight_decay: float
    gap: int
    empty_steps: tuple[int, ...] = ()


SGD_CASES: dict[str, SgdCase] = {
    "momentum_wd": SgdCase(201, lr=0.05, momentum=0.9, weight_decay=0.01, gap=3000),
    "momentum": SgdCase(202, lr=0.05, momentum=0.9, weight_decay=0.0, gap=2000, empty_steps=(25,)),
    "wd": SgdCase(203, lr=0.05, momentum=0.0, weight_decay=0.01, gap=2000, empty_steps=(25,)),
}


def _sgd_call(case: SgdCase) -> str:
    """The torch constructor call of ``case``, as text."""
    return (
        f"torch.optim.SGD([p], lr={case.lr}, momentum={case.momentum}, dampening=0.0, "
        f"weight_decay={case.weight_decay}, nesterov=False, maximize=False, foreach=False, fused=False)"
    )


def make_sgd(case: SgdCase) -> dict[str, np.ndarray]:
    """Run ``torch.optim.SGD`` on ``case``'s schedule and return the file's arrays (module docstring)."""
    rng = np.random.default_rng([SEED, case.case_id])
    num_steps = EARLY_STEP + case.gap + TAIL
    p0 = _initial_table(rng, "float64")
    mask = _touch_mask(num_steps, case.gap, case.empty_steps)
    away = -np.sign(p0)
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = torch.optim.SGD(
        [p],
        lr=case.lr,
        momentum=case.momentum,
        dampening=0.0,
        weight_decay=case.weight_decay,
        nesterov=False,
        maximize=False,
        foreach=False,
        fused=False,
    )
    checkpoints = _checkpoints(num_steps, case.gap)
    grads, params, buffers = [], [], []
    for t in range(1, num_steps + 1):
        ids = np.flatnonzero(mask[t - 1])
        rows = _dyadic_rows(rng, away[ids], (13, 255), -7)
        dense = np.zeros((ROWS, COLS))
        dense[ids] = rows
        p.grad = torch.tensor(dense, dtype=torch.float64)
        opt.step()
        grads.append(rows)
        if t in checkpoints:
            params.append(p.detach().numpy().copy())
            if case.momentum:
                buffers.append(opt.state[p]["momentum_buffer"].numpy().copy())
    out = {
        **_metadata("float64", _sgd_call(case), case.case_id, num_steps),
        "lr": _scalar(case.lr),
        "momentum": _scalar(case.momentum),
        "weight_decay": _scalar(case.weight_decay),
        "long_gap": _scalar(case.gap, np.int64),
        "p0": p0,
        "touch_mask": mask,
        "touch_grads": np.concatenate(grads),
        "checkpoints": checkpoints,
        "params": np.stack(params),
    }
    if case.momentum:
        out["momentum_buffer"] = np.stack(buffers)
    return out


# -- Adagrad -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AdagradCase:
    """One Adagrad problem."""

    case_id: int
    lr: float
    lr_decay: float
    initial_accumulator_value: float
    eps: float = 1e-10
    maximize: bool = False
    dtype: str = "float64"


ADAGRAD_CASES: dict[str, AdagradCase] = {
    "decay_init": AdagradCase(301, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    "maximize": AdagradCase(302, lr=0.1, lr_decay=0.05, initial_accumulator_value=0.0, maximize=True),
    "decay_init_float32": AdagradCase(303, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, dtype="float32"),
}
ADAGRAD_STEPS, ADAGRAD_EMPTY_STEP, ADAGRAD_LATE, ADAGRAD_GAP = 60, 20, 45, 48


def _adagrad_call(case: AdagradCase) -> str:
    """The torch constructor call of ``case``, as text."""
    return (
        f"torch.optim.Adagrad([w], lr={case.lr}, lr_decay={case.lr_decay}, weight_decay=0.0, "
        f"initial_accumulator_value={case.initial_accumulator_value}, eps={case.eps}, foreach=False, "
        f"maximize={case.maximize}) with w = nn.Embedding.from_pretrained(p0, freeze=False, sparse=True).weight "
        "and loss = (emb(row_ids) * row_grads).sum(); and on a dense parameter fed grad.coalesce().to_dense()"
    )


def _adagrad_lookup(rng: np.random.Generator, t: int) -> np.ndarray:
    """Row ids looked up on step ``t`` (repeats, shuffled): rows 0-2 often, 3 from ``ADAGRAD_LATE``, 4 twice, 5 never."""
    if t == ADAGRAD_EMPTY_STEP:
        return np.zeros(0, dtype=np.int64)
    ids = [0] * int(rng.integers(1, 4))
    if rng.random() < 0.5:
        ids += [1] * int(rng.integers(1, 3))
    if t % 5 == 0:
        ids.append(2)
    if t >= ADAGRAD_LATE and t % 3 == 0:
        ids += [3, 3]
    if t in (2, 2 + ADAGRAD_GAP):
        ids.append(4)
    return rng.permutation(np.array(ids, dtype=np.int64))


def make_adagrad(case: AdagradCase) -> dict[str, np.ndarray]:
    """Run sparse-gradient and dense-gradient ``torch.optim.Adagrad`` on the same lookups (module docstring)."""
    rng = np.random.default_rng([SEED, case.case_id])
    p0 = _initial_table(rng, case.dtype)
    away = np.sign(p0) if case.maximize else -np.sign(p0)
    tdtype = _torch_dtype(case.dtype)
    kwargs = {
        "lr": case.lr,
        "lr_decay": case.lr_decay,
        "weight_decay": 0.0,
        "initial_accumulator_value": case.initial_accumulator_value,
        "eps": case.eps,
        "foreach": False,
        "maximize": case.maximize,
    }
    emb = torch.nn.Embedding.from_pretrained(torch.tensor(p0, dtype=tdtype), freeze=False, sparse=True)
    sparse_torch = torch.optim.Adagrad([emb.weight], **kwargs)
    w = torch.nn.Parameter(torch.tensor(p0, dtype=tdtype))
    dense_opt = torch.optim.Adagrad([w], **kwargs)
    offsets, all_ids, all_rows = [0], [], []
    record: dict[str, list[np.ndarray]] = {"params_sparse": [], "sum_sparse": [], "params_dense": [], "sum_dense": []}
    steps = []
    for t in range(1, ADAGRAD_STEPS + 1):
        ids = _adagrad_lookup(rng, t)
        upstream = _dyadic_rows(rng, away[ids], (13, 255), -7).astype(case.dtype).reshape(ids.size, COLS)
        upstream_t = torch.tensor(upstream, dtype=tdtype)
        sparse_torch.zero_grad(set_to_none=True)
        (emb(torch.tensor(ids, dtype=torch.int64)) * upstream_t).sum().backward()
        grad = emb.weight.grad
        assert grad.is_sparse and (ids.size < 2 or not grad.is_coalesced())
        assert torch.equal(grad._indices()[0], torch.tensor(ids, dtype=torch.int64))
        assert torch.equal(grad._values(), upstream_t)
        w.grad = grad.coalesce().to_dense()
        sparse_torch.step()
        dense_opt.step()
        record["params_sparse"].append(emb.weight.detach().numpy().copy())
        record["sum_sparse"].append(sparse_torch.state[emb.weight]["sum"].numpy().copy())
        record["params_dense"].append(w.detach().numpy().copy())
        record["sum_dense"].append(dense_opt.state[w]["sum"].numpy().copy())
        steps.append(int(sparse_torch.state[emb.weight]["step"].item()))
        assert steps[-1] == int(dense_opt.state[w]["step"].item()) == t
        offsets.append(offsets[-1] + ids.size)
        all_ids.append(ids)
        all_rows.append(upstream)
    assert sum(len(np.unique(i)) < len(i) for i in all_ids) >= 20, "too few lookups with repeated ids"
    return {
        **_metadata(case.dtype, _adagrad_call(case), case.case_id, ADAGRAD_STEPS),
        "lr": _scalar(case.lr),
        "lr_decay": _scalar(case.lr_decay),
        "initial_accumulator_value": _scalar(case.initial_accumulator_value),
        "eps": _scalar(case.eps),
        "maximize": _scalar(case.maximize, np.bool_),
        "p0": p0,
        "lookup_offsets": np.array(offsets, dtype=np.int64),
        "row_ids": np.concatenate(all_ids).astype(np.int64),
        "row_grads": np.concatenate(all_rows).astype(case.dtype),
        **{key: np.stack(value) for key, value in record.items()},
        "step": np.array(steps, dtype=np.int64),
    }


# -- writing -----------------------------------------------------------------------------------------
def _metadata(dtype: str, torch_call: str, case_id: int, num_steps: int) -> dict[str, np.ndarray]:
    """The metadata every file stores (module docstring)."""
    return {
        "torch_version": _scalar(torch.__version__),
        "numpy_version": _scalar(np.__version__),
        "torch_call": _scalar(torch_call),
        "dtype": _scalar(dtype),
        "seed": np.array([SEED, case_id], dtype=np.int64),
        "num_steps": _scalar(num_steps, np.int64),
    }


def content_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the name, dtype, shape and bytes of every array, by sorted name (zip timestamps excluded).

    The same function is in ``tests/test_torch_golden_round2.py``.
    """
    h = hashlib.sha256()
    for key in sorted(arrays):
        a = arrays[key]
        h.update(f"{key}|{a.dtype.str}|{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _write(name: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``OUT_DIR / f"round2_{name}.npz"`` unless it already holds exactly these arrays."""
    path = OUT_DIR / f"round2_{name}.npz"
    digest = content_digest(arrays)
    if path.exists():
        with np.load(path, allow_pickle=False) as old:
            if content_digest({key: old[key] for key in old.files}) == digest:
                print(f"unchanged {path.name} ({path.stat().st_size} bytes) {digest}")
                return
    np.savez_compressed(path, **arrays)
    print(f"wrote     {path.name} ({path.stat().st_size} bytes) {digest}")


def main() -> None:
    """Write every ``round2_*.npz`` file into ``OUT_DIR``."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.sparse.check_sparse_tensor_invariants.enable()  # validate every sparse gradient torch builds
    for name, case in ADAM_CASES.items():
        _write(name, make_adam(case))
    for name, sgd_case in SGD_CASES.items():
        _write(f"sgd_{name}", make_sgd(sgd_case))
    for name, adagrad_case in ADAGRAD_CASES.items():
        _write(f"adagrad_{name}", make_adagrad(adagrad_case))


if __name__ == "__main__":
    main()
