"""Write golden vectors for the Adam family from the real PyTorch optimizers.

This script runs ``torch.optim.Adam`` and ``torch.optim.SparseAdam`` on small,
seeded problems and stores every step's inputs and results in ``.npz`` files
beside it; ``tests/test_torch_golden_adam.py`` replays them through
``sparse_opt`` without needing torch. Each case is written in float64 and in
float32 (``<case>_<dtype>.npz``):

``dense_adam``
    ``torch.optim.Adam(foreach=False, fused=False)`` on a dense 1-D parameter
    with random dense gradients: the oracle for ``so.DenseAdam``.
``dormancy_decay``
    ``torch.optim.Adam(foreach=False, fused=False)`` on a 1-D parameter where
    on each step only a random subset of coordinates (the ``mask``) has a
    non-zero gradient and every other coordinate gets an explicit zero. Its
    ``exp_avg``/``exp_avg_sq`` at a touched coordinate are what
    ``so.SparseAdam(mode=DORMANCY_DECAY)`` must hold after that step.
``lazy_sparse_adam``
    ``torch.optim.SparseAdam`` with uncoalesced ``torch.sparse_coo_tensor``
    gradients (repeated indices, any order, one step with nnz 0): the oracle
    for ``so.SparseAdam(mode=LAZY)`` fed ``so.CooGradient.from_unsorted``.
``lazy_sparse_adam_table``
    ``torch.optim.SparseAdam`` on the weight of an
    ``nn.Embedding.from_pretrained(..., freeze=False, sparse=True)`` whose
    gradient comes from a real lookup with repeated row ids (one step with no
    lookups): the oracle for ``so.SparseAdamTable`` fed
    ``so.CsrGradient.from_rows``.

Why ``foreach=False``: on CPU, ``torch.optim.Adam``'s default (``foreach=None``)
resolves to this single-tensor for-loop implementation, because foreach kernels
are only the default on cuda/xpu/mtia devices; passing it explicitly pins the
implementation so the files do not depend on that heuristic.

Why ``eps = 1e-20`` for SparseAdam: ``torch.optim.SparseAdam`` adds eps to
``sqrt(v)`` and rescales by ``sqrt(1 - beta2**t)``, while ``sparse_opt`` (like
``torch.optim.Adam``) adds eps to ``sqrt(v_hat)``. Every touched gradient here
has ``|g| >= 0.1``, so every touched coordinate has
``sqrt(v) >= sqrt(1 - beta2) * 0.1 > 3e-3`` and ``sqrt(v_hat) >= sqrt(v)``;
half an ulp of 3e-3 is about 2e-19 in float64 (1e-10 in float32), so adding
1e-20 rounds back to the same number on both sides and in both dtypes. The
placement of eps then has no effect at all, and the two updates agree up to the
order of the remaining floating point operations. The script asserts this
(``sqrt(v) + eps == sqrt(v)`` at every touched coordinate) on torch's state.
An exactly-zero touched gradient (0/0 with so small an eps) cannot occur: the
values of repeated indices share their sign, so coalesced sums keep ``|g| >= 0.1``.

Every file also stores plain metadata arrays (loadable with
``allow_pickle=False``): ``torch_version``, ``torch_call``, ``dtype``, ``lr``,
``beta1``, ``beta2``, ``eps``, ``seed``, ``num_steps``.

The committed files were made with torch 2.13.0+cpu and numpy 2.4.6. Run with a
Python that has torch and numpy installed, from anywhere::

    /path/to/venv-with-torch/bin/python tests/golden/make_torch_adam.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

OUT_DIR = Path(__file__).resolve().parent
SEED = 20240611
DTYPES: tuple[str, ...] = ("float64", "float32")
BETA1, BETA2 = 0.9, 0.999
ADAM_LR, ADAM_EPS = 1e-2, 1e-8
SPARSE_LR, SPARSE_EPS = 1e-2, 1e-20
MIN_ABS_GRAD = 0.1
ADAM_CALL = (
    f"torch.optim.Adam([p], lr={ADAM_LR}, betas=({BETA1}, {BETA2}), eps={ADAM_EPS}, weight_decay=0.0, "
    "amsgrad=False, foreach=False, fused=False)"
)
SPARSE_ADAM_CALL = f"torch.optim.SparseAdam([p], lr={SPARSE_LR}, betas=({BETA1}, {BETA2}), eps={SPARSE_EPS})"
TABLE_CALL = (
    f"torch.optim.SparseAdam([emb.weight], lr={SPARSE_LR}, betas=({BETA1}, {BETA2}), eps={SPARSE_EPS}) with "
    "emb = torch.nn.Embedding.from_pretrained(p0, freeze=False, sparse=True) and "
    "loss = (emb(row_ids) * row_grads).sum()"
)


def _torch_dtype(dtype: str) -> torch.dtype:
    """Return the torch dtype named ``dtype`` ("float64" or "float32")."""
    return {"float64": torch.float64, "float32": torch.float32}[dtype]


def _metadata(
    dtype: str, torch_call: str, lr: float, eps: float, case_id: int, num_steps: int
) -> dict[str, np.ndarray]:
    """Return the metadata arrays every golden file stores.

    Parameters
    ----------
    dtype : str
        Parameter dtype of the case, "float64" or "float32".
    torch_call : str
        The torch constructor call that produced the reference trajectory.
    lr, eps : float
        Learning rate and epsilon given to torch (betas are ``BETA1``, ``BETA2``).
    case_id : int
        Second entry of the seed sequence ``[SEED, case_id]`` of the case.
    num_steps : int
        Number of optimizer steps recorded.

    Returns
    -------
    dict of str to numpy.ndarray
        0-d arrays (strings as numpy unicode, numbers as float64/int64).
    """
    return {
        "torch_version": np.array(torch.__version__),
        "torch_call": np.array(torch_call),
        "dtype": np.array(dtype),
        "lr": np.array(lr, dtype=np.float64),
        "beta1": np.array(BETA1, dtype=np.float64),
        "beta2": np.array(BETA2, dtype=np.float64),
        "eps": np.array(eps, dtype=np.float64),
        "seed": np.array([SEED, case_id], dtype=np.int64),
        "num_steps": np.array(num_steps, dtype=np.int64),
    }


def _signed_magnitudes(rng: np.random.Generator, signs: np.ndarray, high: float) -> np.ndarray:
    """Return ``signs * U(MIN_ABS_GRAD, high)`` (float64): never zero, never tiny.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the magnitudes.
    signs : numpy.ndarray
        Array of +1/-1; the result has its shape.
    high : float
        Upper bound of the magnitudes.

    Returns
    -------
    numpy.ndarray
        float64 values with ``MIN_ABS_GRAD <= |x| < high``.
    """
    return signs * rng.uniform(MIN_ABS_GRAD, high, size=signs.shape)


def _adam_trajectory(
    p0: np.ndarray, grads: np.ndarray, dtype: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run ``torch.optim.Adam`` on dense gradients and record every step.

    Parameters
    ----------
    p0 : numpy.ndarray
        Initial 1-D parameters, already in ``dtype``.
    grads : numpy.ndarray
        ``(num_steps, n)`` dense gradients, already in ``dtype``.
    dtype : str
        "float64" or "float32".

    Returns
    -------
    params, exp_avg, exp_avg_sq : numpy.ndarray
        ``(num_steps, n)`` torch's values after each step.
    step : numpy.ndarray
        ``(num_steps,)`` int64, torch's ``state["step"]`` after each step.
    """
    p = torch.nn.Parameter(torch.tensor(p0, dtype=_torch_dtype(dtype)))
    opt = torch.optim.Adam(
        [p], lr=ADAM_LR, betas=(BETA1, BETA2), eps=ADAM_EPS, weight_decay=0.0, amsgrad=False, foreach=False, fused=False
    )
    params, exp_avg, exp_avg_sq, step = [], [], [], []
    for g in grads:
        p.grad = torch.tensor(g, dtype=_torch_dtype(dtype))
        opt.step()
        state = opt.state[p]
        params.append(p.detach().numpy().copy())
        exp_avg.append(state["exp_avg"].numpy().copy())
        exp_avg_sq.append(state["exp_avg_sq"].numpy().copy())
        step.append(int(state["step"].item()))
    return np.stack(params), np.stack(exp_avg), np.stack(exp_avg_sq), np.array(step, dtype=np.int64)


def make_dense_adam(dtype: str) -> dict[str, np.ndarray]:
    """Case a: ``torch.optim.Adam`` on a dense 1-D parameter, 30 random gradients.

    Gradients are standard normal times a per-coordinate scale spread over
    ``1e-3 .. 1e1``, so eps matters for some coordinates and not for others.

    Parameters
    ----------
    dtype : str
        "float64" or "float32".

    Returns
    -------
    dict of str to numpy.ndarray
        ``p0`` (n,), ``grads``, ``params``, ``exp_avg``, ``exp_avg_sq``
        (num_steps, n), ``step`` (num_steps,), plus the metadata.
    """
    case_id, n, num_steps = 1, 16, 30
    rng = np.random.default_rng([SEED, case_id])
    p0 = rng.standard_normal(n).astype(dtype)
    scale = 10.0 ** rng.uniform(-3.0, 1.0, size=n)
    grads = (rng.standard_normal((num_steps, n)) * scale).astype(dtype)
    params, exp_avg, exp_avg_sq, step = _adam_trajectory(p0, grads, dtype)
    return {
        **_metadata(dtype, ADAM_CALL, ADAM_LR, ADAM_EPS, case_id, num_steps),
        "p0": p0,
        "grads": grads,
        "params": params,
        "exp_avg": exp_avg,
        "exp_avg_sq": exp_avg_sq,
        "step": step,
    }


def make_dormancy_decay(dtype: str) -> dict[str, np.ndarray]:
    """Case b: ``torch.optim.Adam`` fed explicit zeros on the untouched coordinates.

    ``mask[t, i]`` says coordinate ``i`` is touched on step ``t + 1`` (a
    non-zero gradient, ``|g| >= 0.1``); elsewhere the gradient is exactly 0.
    Coordinate 0 is touched on every step; coordinate 1 first at step 25, then
    26 and 29 (gaps 1 and 3); coordinate 2 every fifth step (gap 5);
    coordinate 3 at steps 1 and 30 (gap 29); the last coordinate never; the
    others with probability 0.3 each.

    Parameters
    ----------
    dtype : str
        "float64" or "float32".

    Returns
    -------
    dict of str to numpy.ndarray
        ``p0`` (n,), ``mask`` (num_steps, n) bool, ``grads``, ``params``,
        ``exp_avg``, ``exp_avg_sq`` (num_steps, n), ``step`` (num_steps,),
        plus the metadata.
    """
    case_id, n, num_steps = 2, 12, 30
    rng = np.random.default_rng([SEED, case_id])
    p0 = rng.standard_normal(n).astype(dtype)
    mask = rng.random((num_steps, n)) < 0.3
    mask[:, 0] = True
    mask[:, 1] = False
    mask[[24, 25, 28], 1] = True
    mask[:, 2] = np.arange(num_steps) % 5 == 0
    mask[:, 3] = False
    mask[[0, num_steps - 1], 3] = True
    mask[:, n - 1] = False
    signs = rng.choice([-1.0, 1.0], size=(num_steps, n))
    grads = np.where(mask, _signed_magnitudes(rng, signs, 2.0), 0.0).astype(dtype)
    params, exp_avg, exp_avg_sq, step = _adam_trajectory(p0, grads, dtype)
    return {
        **_metadata(dtype, ADAM_CALL, ADAM_LR, ADAM_EPS, case_id, num_steps),
        "p0": p0,
        "mask": mask,
        "grads": grads,
        "params": params,
        "exp_avg": exp_avg,
        "exp_avg_sq": exp_avg_sq,
        "step": step,
    }


def _check_eps_is_negligible(exp_avg_sq: torch.Tensor, touched: torch.Tensor) -> None:
    """Assert ``sqrt(v) + SPARSE_EPS == sqrt(v)`` at every touched coordinate.

    Parameters
    ----------
    exp_avg_sq : torch.Tensor
        torch's second moment after the step.
    touched : torch.Tensor
        Boolean mask of the coordinates the step touched, same shape.
    """
    root = exp_avg_sq[touched].sqrt()
    assert torch.equal(root + SPARSE_EPS, root), "eps is not negligible: raise MIN_ABS_GRAD or lower eps"


def _sparse_adam_step(opt: torch.optim.SparseAdam, p: torch.nn.Parameter) -> tuple[np.ndarray, ...]:
    """Take one ``SparseAdam`` step on ``p`` (whose ``.grad`` is set) and record it.

    Parameters
    ----------
    opt : torch.optim.SparseAdam
        The optimizer over ``[p]``.
    p : torch.nn.Parameter
        The dense parameter, with a sparse COO ``.grad``.

    Returns
    -------
    params, exp_avg, exp_avg_sq : numpy.ndarray
        Copies of torch's values after the step.
    step : int
        torch's ``state["step"]`` after the step.
    """
    touched = torch.zeros(p.shape, dtype=torch.bool)
    grad = p.grad.coalesce()
    touched[tuple(grad.indices())] = True
    opt.step()
    state = opt.state[p]
    _check_eps_is_negligible(state["exp_avg_sq"], touched)
    return (
        p.detach().numpy().copy(),
        state["exp_avg"].numpy().copy(),
        state["exp_avg_sq"].numpy().copy(),
        int(state["step"]),
    )


def make_lazy_sparse_adam(dtype: str) -> dict[str, np.ndarray]:
    """Case c (1-D): ``torch.optim.SparseAdam`` with uncoalesced COO gradients.

    Step ``t + 1`` draws 1 to 8 indices with replacement (so repeats occur, in
    any order) from ``[0, min(n - 1, 8 + t // 2))``: later coordinates are
    first touched late and the last coordinate never. Step 11 has nnz 0. The
    values of one index within a step share a sign, so coalesced sums are
    never zero. The gradient of step ``t + 1`` is
    ``grad_indices[grad_offsets[t]:grad_offsets[t + 1]]`` and the same slice of
    ``grad_values``, in the order torch received them.

    Parameters
    ----------
    dtype : str
        "float64" or "float32".

    Returns
    -------
    dict of str to numpy.ndarray
        ``p0`` (n,), ``grad_offsets`` (num_steps + 1,), ``grad_indices``,
        ``grad_values`` (total nnz,), ``params``, ``exp_avg``, ``exp_avg_sq``
        (num_steps, n), ``step`` (num_steps,), plus the metadata.
    """
    case_id, n, num_steps, empty_step = 3, 20, 30, 10
    rng = np.random.default_rng([SEED, case_id])
    p0 = rng.standard_normal(n).astype(dtype)
    tdtype = _torch_dtype(dtype)
    p = torch.nn.Parameter(torch.tensor(p0, dtype=tdtype))
    opt = torch.optim.SparseAdam([p], lr=SPARSE_LR, betas=(BETA1, BETA2), eps=SPARSE_EPS)
    offsets, indices, values, records = [0], [], [], []
    for t in range(num_steps):
        k = 0 if t == empty_step else int(rng.integers(1, 9))
        idx = rng.integers(0, min(n - 1, 8 + t // 2), size=k)
        signs = rng.choice([-1.0, 1.0], size=n)
        val = _signed_magnitudes(rng, signs[idx], 1.0).astype(dtype)
        index = torch.tensor(idx, dtype=torch.int64).reshape(1, k)
        p.grad = torch.sparse_coo_tensor(index, torch.tensor(val, dtype=tdtype), (n,), check_invariants=True)
        records.append(_sparse_adam_step(opt, p))
        offsets.append(offsets[-1] + k)
        indices.append(idx)
        values.append(val)
    params, exp_avg, exp_avg_sq, step = zip(*records)
    assert sum(len(np.unique(i)) < len(i) for i in indices) >= 5, "too few steps with repeated indices"
    return {
        **_metadata(dtype, SPARSE_ADAM_CALL, SPARSE_LR, SPARSE_EPS, case_id, num_steps),
        "p0": p0,
        "grad_offsets": np.array(offsets, dtype=np.int64),
        "grad_indices": np.concatenate(indices).astype(np.int64),
        "grad_values": np.concatenate(values).astype(dtype),
        "params": np.stack(params),
        "exp_avg": np.stack(exp_avg),
        "exp_avg_sq": np.stack(exp_avg_sq),
        "step": np.array(step, dtype=np.int64),
    }


def make_lazy_sparse_adam_table(dtype: str) -> dict[str, np.ndarray]:
    """Case c (2-D): ``torch.optim.SparseAdam`` on an ``nn.Embedding(sparse=True)`` table.

    Step ``t + 1`` looks up 1 to 6 row ids with replacement (repeats, any
    order) from ``[0, min(rows - 1, 6 + t // 3))``; step 8 looks up nothing.
    The loss is ``(embedding(row_ids) * upstream).sum()``, so torch's sparse
    gradient has exactly the row ids as indices and ``upstream`` as values
    (checked). Repeated rows share the sign of each column within a step, so
    coalesced sums are never zero. The lookup of step ``t + 1`` is
    ``row_ids[lookup_offsets[t]:lookup_offsets[t + 1]]`` with the same rows of
    ``row_grads``.

    Parameters
    ----------
    dtype : str
        "float64" or "float32".

    Returns
    -------
    dict of str to numpy.ndarray
        ``p0`` (rows, cols), ``lookup_offsets`` (num_steps + 1,), ``row_ids``
        (total lookups,), ``row_grads`` (total lookups, cols), ``params``,
        ``exp_avg``, ``exp_avg_sq`` (num_steps, rows, cols), ``step``
        (num_steps,), plus the metadata.
    """
    case_id, rows, cols, num_steps, empty_step = 4, 10, 4, 20, 7
    rng = np.random.default_rng([SEED, case_id])
    p0 = rng.standard_normal((rows, cols)).astype(dtype)
    tdtype = _torch_dtype(dtype)
    emb = torch.nn.Embedding.from_pretrained(torch.tensor(p0, dtype=tdtype), freeze=False, sparse=True)
    opt = torch.optim.SparseAdam([emb.weight], lr=SPARSE_LR, betas=(BETA1, BETA2), eps=SPARSE_EPS)
    offsets, ids, grads, records = [0], [], [], []
    for t in range(num_steps):
        k = 0 if t == empty_step else int(rng.integers(1, 7))
        row_ids = rng.integers(0, min(rows - 1, 6 + t // 3), size=k)
        signs = rng.choice([-1.0, 1.0], size=(rows, cols))
        upstream = _signed_magnitudes(rng, signs[row_ids], 1.0).astype(dtype)
        opt.zero_grad(set_to_none=True)
        upstream_t = torch.tensor(upstream, dtype=tdtype).reshape(k, cols)
        (emb(torch.tensor(row_ids, dtype=torch.int64)) * upstream_t).sum().backward()
        grad = emb.weight.grad
        assert grad.is_sparse and torch.equal(grad._indices()[0], torch.tensor(row_ids, dtype=torch.int64))
        assert torch.equal(grad._values(), upstream_t)
        records.append(_sparse_adam_step(opt, emb.weight))
        offsets.append(offsets[-1] + k)
        ids.append(row_ids)
        grads.append(upstream.reshape(k, cols))
    params, exp_avg, exp_avg_sq, step = zip(*records)
    assert sum(len(np.unique(i)) < len(i) for i in ids) >= 5, "too few steps with repeated row ids"
    return {
        **_metadata(dtype, TABLE_CALL, SPARSE_LR, SPARSE_EPS, case_id, num_steps),
        "p0": p0,
        "lookup_offsets": np.array(offsets, dtype=np.int64),
        "row_ids": np.concatenate(ids).astype(np.int64),
        "row_grads": np.concatenate(grads).astype(dtype),
        "params": np.stack(params),
        "exp_avg": np.stack(exp_avg),
        "exp_avg_sq": np.stack(exp_avg_sq),
        "step": np.array(step, dtype=np.int64),
    }


CASES = {
    "dense_adam": make_dense_adam,
    "dormancy_decay": make_dormancy_decay,
    "lazy_sparse_adam": make_lazy_sparse_adam,
    "lazy_sparse_adam_table": make_lazy_sparse_adam_table,
}


def main() -> None:
    """Write ``<case>_<dtype>.npz`` for every case and dtype into ``OUT_DIR``."""
    torch.set_num_threads(1)
    for name, make in CASES.items():
        for dtype in DTYPES:
            path = OUT_DIR / f"{name}_{dtype}.npz"
            np.savez_compressed(path, **make(dtype))
            print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
