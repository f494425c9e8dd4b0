"""Write golden trajectories of ``torch.optim.Adafactor`` for ``so.Adafactor``.

This script runs the real ``torch.optim.Adafactor(..., foreach=False)`` (the
single-tensor implementation, torch's default for Adafactor on every device)
on small seeded problems and stores every step's inputs and results in
``adafactor_<case>_<dtype>.npz`` beside it; ``tests/test_adafactor.py``
replays them through ``sparse_opt`` without needing torch. Each case is
written in float64 and in float32:

``shapes``
    Default options over a 0-d, a 1-d (zero-initialised, so ``eps2`` floors
    ``RMS(p)`` at first), a 2-d and a 3-d parameter (leading dim a batch).
    Gradient scales jump from step to step, so update clipping (``d = 1``) is
    active on some steps and not on others. Two more parameters (1-d and 2-d)
    get gradients of the order of the dtype's epsilon, the ``eps1 = None``
    default, so both ``eps1`` floors act on non-zero gradients and their value
    (float32's or float64's epsilon) shows in the result.
``options``
    ``weight_decay > 0``, ``maximize``, an explicit ``eps1``, ``beta2_decay =
    -0.5``, ``d = 1`` with clipping active, and ``lr = 0.3``: ``rho =
    min(lr, 1/sqrt(t))`` switches from ``lr`` to ``1/sqrt(t)`` at ``t = 12``.
``skips``
    Three parameters where two get ``None`` gradients on some steps, so their
    step counts lag (and ``rho`` switches at a different step for each);
    ``lr = 0.5``, ``d = 2``, ``weight_decay > 0``. The matrix gradient is
    entirely zero on its first step (the row-factor mean is floored at
    ``eps1``) and has zero rows afterwards (``V`` floored at ``eps1**2``, with
    a zero gradient there, so ``U = 0`` whatever ``eps1`` is).
``clamps``
    Tiny gradients against a large ``eps1 = 1e-2`` (both ``eps1`` floors
    active), ``beta2_decay = 0`` (no averaging: ``V`` is the last ``g**2``),
    ``d = inf`` (clipping off).

The script asserts that each case exercises what it claims (clipping on and
off, the ``rho`` switch, the ``eps1``/``eps2`` floors), using torch's state.

Keys of every file (loadable with ``allow_pickle=False``), for parameter ``i``
and ``T`` steps: ``p0.{i}`` initial values; ``grads.{i}`` ``(T, *shape)``
(zeros where skipped); ``has_grad.{i}`` ``(T,)`` bool (False: the gradient
was ``None``); ``params.{i}`` ``(T, *shape)`` after each step; ``step.{i}``
``(T,)`` int64, torch's ``state["step"]``; ``row_var.{i}`` and ``col_var.{i}``
or ``variance.{i}`` ``(T, *state_shape)`` (zeros and step 0 before torch
creates the state). Metadata as 0-d arrays: ``torch_version``, ``torch_call``,
``dtype``, ``lr``, ``beta2_decay``, ``eps1`` (NaN for ``None``), ``eps2``,
``d``, ``weight_decay``, ``maximize``, ``seed``, ``num_steps``,
``num_params``.

The committed files were made with torch 2.13.0+cpu and numpy 2.4.6. Run with a
Python that has torch and numpy installed, from anywhere::

    /path/to/venv-with-torch/bin/python tests/golden/make_torch_adafactor.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

OUT_DIR = Path(__file__).resolve().parent
SEED = 20240612
DTYPES: tuple[str, ...] = ("float64", "float32")
NUM_STEPS = 25


@dataclass(frozen=True)
class Case:
    """One golden problem: the optimizer's options and how gradients are drawn.

    Attributes
    ----------
    case_id : int
        Second entry of the seed sequence ``[SEED, case_id]``.
    shapes : tuple of tuple of int
        Parameter shapes.
    lr, beta2_decay, eps1, eps2, d, weight_decay, maximize
        ``torch.optim.Adafactor`` options (``eps1`` None or a float).
    zero_init : tuple of int
        Parameters initialised to zeros instead of standard normal values.
    grad_scale : float
        Gradients are ``grad_scale * lognormal(0, 1) * standard_normal``.
    skip_every : dict of int to int
        ``{i: k}``: parameter ``i`` gets ``None`` on steps ``t`` with ``t % k == 0``.
    skip_first : dict of int to int
        ``{i: n}``: parameter ``i`` gets ``None`` on its first ``n`` steps.
    eps_scaled : tuple of int
        Parameters whose gradients are further scaled by the dtype's epsilon.
    zero_first : tuple of int
        Parameters whose first gradient is all zeros.
    zero_rows : tuple of int
        Matrix parameters whose later gradients have random all-zero rows.
    expect : frozenset of str
        Behaviours the case must exercise (checked): ``"clip"``, ``"no_clip"``,
        ``"rho_lr"`` and ``"rho_t"`` (which term of ``min(lr, 1/sqrt(t))`` is
        smaller), ``"eps2"``, and ``"eps1_mean"``/``"eps1_var"`` (a floor
        acting where the gradient is non-zero, so its value matters).
    """

    case_id: int
    shapes: tuple[tuple[int, ...], ...]
    lr: float = 1e-2
    beta2_decay: float = -0.8
    eps1: float | None = None
    eps2: float = 1e-3
    d: float = 1.0
    weight_decay: float = 0.0
    maximize: bool = False
    zero_init: tuple[int, ...] = ()
    grad_scale: float = 1.0
    skip_every: dict[int, int] = field(default_factory=dict)
    skip_first: dict[int, int] = field(default_factory=dict)
    eps_scaled: tuple[int, ...] = ()
    zero_first: tuple[int, ...] = ()
    zero_rows: tuple[int, ...] = ()
    expect: frozenset[str] = frozenset()

    def torch_call(self) -> str:
        """The constructor call that produced the trajectory, as text."""
        return (
            f"torch.optim.Adafactor(params, lr={self.lr}, beta2_decay={self.beta2_decay}, "
            f"eps=({self.eps1}, {self.eps2}), d={self.d}, weight_decay={self.weight_decay}, "
            f"foreach=False, maximize={self.maximize})"
        )


CASES: dict[str, Case] = {
    "shapes": Case(
        case_id=1,
        shapes=((), (7,), (5, 4), (3, 4, 6), (6,), (3, 5)),
        zero_init=(1,),
        eps_scaled=(4, 5),
        expect=frozenset({"clip", "no_clip", "eps2", "eps1_mean", "eps1_var"}),
    ),
    "options": Case(
        case_id=2,
        shapes=((6,), (4, 5), (2, 3, 3)),
        lr=0.3,
        beta2_decay=-0.5,
        eps1=1e-3,
        eps2=1e-2,
        weight_decay=0.1,
        maximize=True,
        expect=frozenset({"clip", "no_clip", "rho_lr", "rho_t"}),
    ),
    "skips": Case(
        case_id=3,
        shapes=((8,), (6, 3), (4,)),
        lr=0.5,
        d=2.0,
        weight_decay=0.05,
        skip_every={1: 3},
        skip_first={2: 5},
        zero_first=(1,),
        zero_rows=(1,),
        expect=frozenset({"clip", "no_clip", "rho_lr", "rho_t"}),
    ),
    "clamps": Case(
        case_id=4,
        shapes=((5,), (4, 6), (2, 2, 3)),
        beta2_decay=0.0,
        eps1=1e-2,
        d=math.inf,
        grad_scale=1e-3,
        expect=frozenset({"no_clip", "eps1_mean", "eps1_var"}),
    ),
}


def _torch_dtype(dtype: str) -> torch.dtype:
    """Return the torch dtype named ``dtype`` ("float64" or "float32")."""
    return {"float64": torch.float64, "float32": torch.float32}[dtype]


def _has_grad(case: Case, i: int, num_steps: int) -> np.ndarray:
    """Return ``(num_steps,)`` bools: whether parameter ``i`` gets a gradient on step ``t + 1``."""
    t = np.arange(1, num_steps + 1)
    mask = np.ones(num_steps, dtype=bool)
    if i in case.skip_every:
        mask &= t % case.skip_every[i] != 0
    if i in case.skip_first:
        mask &= t > case.skip_first[i]
    return mask


def _draw_grads(
    case: Case, rng: np.random.Generator, shape: tuple[int, ...], i: int, has_grad: np.ndarray, dtype: str
) -> np.ndarray:
    """Return ``(num_steps, *shape)`` gradients for parameter ``i`` in ``dtype`` (zeros where skipped).

    Each step's gradient is standard normal times ``case.grad_scale`` times a
    log-normal factor drawn per step, so the gradient scale jumps around.
    """
    num_steps = has_grad.size
    scale = case.grad_scale * np.exp(rng.standard_normal(num_steps))
    if i in case.eps_scaled:
        scale *= np.finfo(dtype).eps
    grads = rng.standard_normal((num_steps, *shape)) * scale.reshape(-1, *([1] * len(shape)))
    if i in case.zero_rows:
        keep = rng.random((num_steps, *shape[:-1], 1)) < 0.6
        grads = np.where(keep, grads, 0.0)
    if i in case.zero_first:
        grads[np.flatnonzero(has_grad)[0]] = 0.0
    grads[~has_grad] = 0.0
    return grads.astype(dtype)


def _observe(state: dict[str, torch.Tensor], grad: torch.Tensor, eps1: float, d: float, seen: set[str]) -> None:
    """Add to ``seen`` the behaviours torch's just-finished update exercised.

    Recomputes, from torch's new state, the quantities the update compared:
    the row-factor mean against ``eps1`` and ``V`` against ``eps1**2`` (where
    the gradient is non-zero), and ``RMS(U)`` against ``d``.
    """
    live = grad != 0
    if "row_var" in state:
        row_mean = state["row_var"].mean(dim=-2, keepdim=True)
        if bool(((row_mean < eps1) & live).any()):
            seen.add("eps1_mean")
        var = state["row_var"] @ state["col_var"] / row_mean.clamp(min=eps1)
    else:
        var = state["variance"]
    if bool(((var < eps1 * eps1) & live).any()):
        seen.add("eps1_var")
    update = grad * var.clamp(min=eps1 * eps1).rsqrt()
    ratio = update.norm(2).item() / (update.numel() ** 0.5) / d
    seen.add("clip" if ratio > 1.0 else "no_clip")


def make_case(case: Case, dtype: str) -> dict[str, np.ndarray]:
    """Run ``torch.optim.Adafactor`` on ``case`` in ``dtype`` and record every step.

    Parameters
    ----------
    case : Case
        The problem.
    dtype : str
        "float64" or "float32" (all parameters share it).

    Returns
    -------
    dict of str to numpy.ndarray
        The arrays described in the module docstring.
    """
    rng = np.random.default_rng([SEED, case.case_id])
    tdtype = _torch_dtype(dtype)
    eps1 = torch.finfo(tdtype).eps if case.eps1 is None else case.eps1
    p0 = [
        np.zeros(shape, dtype) if i in case.zero_init else rng.standard_normal(shape).astype(dtype)
        for i, shape in enumerate(case.shapes)
    ]
    has_grad = [_has_grad(case, i, NUM_STEPS) for i in range(len(p0))]
    grads = [_draw_grads(case, rng, p.shape, i, has_grad[i], dtype) for i, p in enumerate(p0)]
    params = [torch.nn.Parameter(torch.tensor(p, dtype=tdtype)) for p in p0]
    opt = torch.optim.Adafactor(
        params,
        lr=case.lr,
        beta2_decay=case.beta2_decay,
        eps=(case.eps1, case.eps2),
        d=case.d,
        weight_decay=case.weight_decay,
        foreach=False,
        maximize=case.maximize,
    )
    records: dict[str, list[np.ndarray]] = {}
    seen: set[str] = set()
    for t in range(NUM_STEPS):
        for i, p in enumerate(params):
            p.grad = torch.tensor(grads[i][t], dtype=tdtype) if has_grad[i][t] else None
            if has_grad[i][t] and max(case.eps2, p.detach().norm(2).item() / p.numel() ** 0.5) == case.eps2:
                seen.add("eps2")
            if has_grad[i][t]:
                step = opt.state[p]["step"].item() + 1 if opt.state[p] else 1.0
                seen.add("rho_lr" if case.lr <= 1 / step**0.5 else "rho_t")
        opt.step()
        for i, p in enumerate(params):
            state = opt.state[p]
            if has_grad[i][t]:
                _observe(state, -p.grad if case.maximize else p.grad, eps1, case.d, seen)
            records.setdefault(f"params.{i}", []).append(p.detach().numpy().copy())
            records.setdefault(f"step.{i}", []).append(np.int64(state["step"].item() if state else 0))
            names = ("row_var", "col_var") if p.ndim > 1 else ("variance",)
            for name in names:
                value = state[name].numpy().copy() if state else np.zeros(_state_shape(p.shape, name), dtype)
                records.setdefault(f"{name}.{i}", []).append(value)
    missing = case.expect - seen
    assert not missing, f"case {case.case_id} ({dtype}) does not exercise {sorted(missing)}"
    out = {
        "torch_version": np.array(torch.__version__),
        "torch_call": np.array(case.torch_call()),
        "dtype": np.array(dtype),
        "lr": np.array(case.lr, dtype=np.float64),
        "beta2_decay": np.array(case.beta2_decay, dtype=np.float64),
        "eps1": np.array(math.nan if case.eps1 is None else case.eps1, dtype=np.float64),
        "eps2": np.array(case.eps2, dtype=np.float64),
        "d": np.array(case.d, dtype=np.float64),
        "weight_decay": np.array(case.weight_decay, dtype=np.float64),
        "maximize": np.array(case.maximize),
        "seed": np.array([SEED, case.case_id], dtype=np.int64),
        "num_steps": np.array(NUM_STEPS, dtype=np.int64),
        "num_params": np.array(len(p0), dtype=np.int64),
    }
    for i in range(len(p0)):
        out[f"p0.{i}"] = p0[i]
        out[f"grads.{i}"] = grads[i]
        out[f"has_grad.{i}"] = has_grad[i]
    out.update({key: np.stack(values) for key, values in records.items()})
    return out


def _state_shape(shape: torch.Size, name: str) -> tuple[int, ...]:
    """Shape torch gives state ``name`` of a parameter of ``shape``."""
    dims = list(shape)
    if name == "row_var":
        dims[-1] = 1
    elif name == "col_var":
        dims[-2] = 1
    return tuple(dims)


def main() -> None:
    """Write ``adafactor_<case>_<dtype>.npz`` for every case and dtype into ``OUT_DIR``."""
    torch.set_num_threads(1)
    for name, case in CASES.items():
        for dtype in DTYPES:
            path = OUT_DIR / f"adafactor_{name}_{dtype}.npz"
            np.savez_compressed(path, **make_case(case, dtype))
            print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
