"""Write the round-3 low-precision golden vectors from the real torch 2.13 and FBGEMM's CPU TBE.

``tests/test_lowp_golden.py`` replays these files through ``sparse_opt`` with
numpy only (and ``ml_dtypes`` for the bfloat16 cases) and asserts bit for bit.
Regenerate them from the repository root with::

    /work/venvs/torch/bin/python tests/golden/make_torch_lowp.py

(any Python with torch 2.13.0, ml_dtypes and, for the ``fbgemm_*`` files,
fbgemm-gpu-cpu 1.8.0). The script is seeded and idempotent: a file whose
arrays would not change is not rewritten (a rerun prints ``unchanged``).

Every problem is an 8 x 4 table (width a multiple of 4 for FBGEMM's TBE) trained
for ``T = 40`` steps. Values are stored as float32 (every float16 and bfloat16
value is exact in float32); ``dtype`` names the dtype they belong to.

Files ``round3_lowp_<case>.npz``:

``torch_adagrad_<dtype>[_decay]``
    ``torch.optim.Adagrad(foreach=False)`` on the weight of a float16 / bfloat16
    ``nn.Embedding(8, 4, sparse=True)`` (state in the weight's dtype), trained by
    lookups: step ``t`` looks up ``ids[offsets[t-1]:offsets[t]]`` (distinct ids,
    any order; step 17 looks up nothing) with ``loss = (emb(ids) * grads).sum()``,
    ``grads`` in the weight's dtype. ``_decay``: ``lr_decay = 0.01``,
    ``initial_accumulator_value = 0.1``, ``eps = 1e-6``.
``torch_sparse_adam_<dtype>``
    ``torch.optim.SparseAdam`` on the same lookups (state in the weight's dtype).
``torch_sgd_<dtype>``
    ``torch.optim.SGD(foreach=False)`` (no momentum: the sparse path) on the lookups.
``torch_adam_<dtype>``, ``torch_adamw_<dtype>``, ``torch_sgd_momentum_<dtype>``
    ``torch.optim.Adam`` / ``AdamW(weight_decay=0.1)`` / ``SGD(momentum=0.9,
    weight_decay=0.01)`` (``foreach=False, fused=False``) on a float16 / bfloat16
    table held as one parameter per row, fed a gradient on every row every step
    (``ids`` lists all rows each step): what the kit's lazy optimizers do when
    every row is touched, and what ``DenseAdam`` does, with the state in the
    parameters' dtype. One parameter per row because torch's CPU ``add(...,
    alpha=a)`` on a half tensor rounds ``a * other`` to the half type on its
    per-element path (a 4-wide row, an embedding row's update) but not on its
    vectorised path (32 or more elements), where it rounds once: measured on
    3000 random rows, ``tests/test_lowp.py`` documents it.
``fbgemm_<optimizer>_fp16``
    FBGEMM's ``SplitTableBatchedEmbeddingBagsCodegen`` (CPU, ``EmbeddingLocation.HOST``,
    pooling NONE) with ``weights_precision=SparseType.FP16`` (float32 optimizer
    state), ``stochastic_rounding=False``, trained on the lookups through the
    :mod:`sparse_opt.conformance.adapters.fbgemm` adapters: ``exact_rowwise_adagrad``,
    ``exact_adagrad``, ``exact_sgd``; gradients float32 (the TBE's output dtype).

Arrays: ``p0`` (8, 4); ``offsets`` (T + 1,), ``ids``, ``grads`` (n, 4);
``params`` (T, 8, 4) after every step; the state after every step where the
library exposes it (``sum`` (T, 8, 4) or, row-wise, (T, 8); ``exp_avg``,
``exp_avg_sq``; ``momentum_buffer``); 0-d metadata ``library``, ``call``,
``dtype``, ``seed``, the hyper-parameters, ``torch_version``, ``numpy_version``.

The committed files were made with torch 2.13.0+cpu, fbgemm-gpu-cpu 1.8.0,
ml_dtypes 0.7.0 and numpy 2.4.6.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

OUT_DIR = Path(__file__).resolve().parent
SEED = 20261202
ROWS, COLS, T = 8, 4, 40
EMPTY_STEP = 17
TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def _lookups(rng: np.random.Generator, every_row: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, ids)``: distinct ids per step in random order (all rows when ``every_row``), one empty step."""
    offsets, ids = [0], []
    for t in range(1, T + 1):
        if every_row:
            step = rng.permutation(ROWS)
        elif t == EMPTY_STEP:
            step = np.zeros(0, dtype=np.int64)
        else:
            # row 0 every step, row 7 never, the others at random
            k = rng.integers(1, ROWS - 1)
            step = rng.permutation(np.concatenate([[0], rng.choice(np.arange(1, ROWS - 1), size=k - 1, replace=False)]))
        ids.extend(int(i) for i in step)
        offsets.append(len(ids))
    return np.array(offsets, dtype=np.int64), np.array(ids, dtype=np.int64)


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scale: float) -> np.ndarray:
    """Random signs times ``scale * (0.1 + |normal|)``, rounded to ``dtype`` (returned as exact float32).

    Bounded away from zero: torch's float16 Adam with a gradient of 6e-4 computes
    ``v = 0.001 * g**2`` below float16's smallest subnormal (0), then ``m / (0 + 0)
    = inf`` (the kit refuses that step; ``tests/test_lowp.py`` checks it).
    """
    x = rng.choice([-1.0, 1.0], size=shape) * (0.1 + np.abs(rng.normal(size=shape)))
    x = torch.from_numpy((x * scale).astype(np.float32))
    return x.to(TORCH_DTYPES.get(dtype, torch.float32)).float().numpy()


def _meta(**kw: object) -> dict[str, np.ndarray]:
    return {k: np.array(v) for k, v in kw.items()}


def _save(name: str, arrays: dict[str, np.ndarray]) -> None:
    path = OUT_DIR / f"round3_lowp_{name}.npz"
    if path.exists():
        old = np.load(path, allow_pickle=False)
        if set(old.files) == set(arrays) and all(
            old[k].dtype == np.asarray(arrays[k]).dtype
            and np.array_equal(old[k], arrays[k], equal_nan=old[k].dtype.kind == "f")
            for k in arrays
        ):
            print(f"unchanged {path.name}")
            return
    np.savez_compressed(path, **arrays)
    print(f"wrote {path.name}")


def _state_array(opt: torch.optim.Optimizer, param: torch.Tensor, key: str) -> np.ndarray:
    return opt.state[param][key].detach().float().numpy().copy()


def _run_torch(case: str, dtype: str, make_opt, dense: bool, state_keys: tuple[str, ...], rng, meta) -> None:
    """Train an embedding (sparse) or a parameter (dense) of ``dtype`` with the optimizer ``make_opt(params)``."""
    torch_dtype = TORCH_DTYPES[dtype]
    offsets, ids = _lookups(rng, every_row=dense)
    p0 = _values(rng, (ROWS, COLS), dtype, 1.0)
    grads = _values(rng, (ids.size, COLS), dtype, 0.5)
    if dense:  # one parameter per row: every torch kernel takes its scalar (per-element) path, as on a row
        rows = [torch.nn.Parameter(torch.from_numpy(p0[r]).to(torch_dtype)) for r in range(ROWS)]
        params = rows
    else:
        emb = torch.nn.Embedding(ROWS, COLS, sparse=True, dtype=torch_dtype)
        with torch.no_grad():
            emb.weight.copy_(torch.from_numpy(p0).to(torch_dtype))
        weight = emb.weight
        params = list(emb.parameters())
    opt = make_opt(params)
    out: dict[str, list[np.ndarray]] = {"params": [], **{k: [] for k in state_keys}}
    for t in range(1, T + 1):
        lo, hi = offsets[t - 1], offsets[t]
        opt.zero_grad(set_to_none=True)
        g = torch.from_numpy(grads[lo:hi]).to(torch_dtype)
        if dense:
            for k, r in enumerate(ids[lo:hi]):
                rows[r].grad = g[k].clone()
        else:
            (emb(torch.from_numpy(ids[lo:hi])) * g).sum().backward()
        opt.step()
        tensors = rows if dense else [weight]
        out["params"].append(np.concatenate([w.detach().float().numpy()[None] for w in tensors]).reshape(ROWS, COLS))
        for k in state_keys:
            out[k].append(np.concatenate([_state_array(opt, w, k)[None] for w in tensors]).reshape(ROWS, COLS))
    arrays = {"p0": p0, "offsets": offsets, "ids": ids, "grads": grads, **{k: np.stack(v) for k, v in out.items()}}
    arrays |= _meta(library="torch", dtype=dtype, torch_version=torch.__version__, numpy_version=np.__version__, **meta)
    _save(f"torch_{case}_{dtype}", arrays)


def torch_cases() -> None:
    for d, dtype in enumerate(TORCH_DTYPES):
        base = [SEED, d]
        _run_torch(
            "adagrad", dtype, lambda ps: torch.optim.Adagrad(ps, lr=0.1, foreach=False), False, ("sum",),
            np.random.default_rng(base + [1]),
            dict(call="torch.optim.Adagrad(lr=0.1, foreach=False)", lr=0.1, lr_decay=0.0, eps=1e-10,
                 initial_accumulator_value=0.0, seed=base + [1]),
        )
        _run_torch(
            "adagrad_decay", dtype,
            lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-6,
                                           foreach=False),
            False, ("sum",), np.random.default_rng(base + [2]),
            dict(call="torch.optim.Adagrad(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-6, "
                      "foreach=False)", lr=0.1, lr_decay=0.01, eps=1e-6, initial_accumulator_value=0.1,
                 seed=base + [2]),
        )
        _run_torch(
            "sparse_adam", dtype, lambda ps: torch.optim.SparseAdam(ps, lr=0.01), False, ("exp_avg", "exp_avg_sq"),
            np.random.default_rng(base + [3]),
            dict(call="torch.optim.SparseAdam(lr=0.01)", lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, seed=base + [3]),
        )
        _run_torch(
            "sgd", dtype, lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False), False, (),
            np.random.default_rng(base + [4]),
            dict(call="torch.optim.SGD(lr=0.1, foreach=False)", lr=0.1, momentum=0.0, weight_decay=0.0,
                 seed=base + [4]),
        )
        _run_torch(
            "adam", dtype, lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=False, fused=False), True,
            ("exp_avg", "exp_avg_sq"), np.random.default_rng(base + [5]),
            dict(call="torch.optim.Adam(lr=0.01, foreach=False, fused=False)", lr=0.01, beta1=0.9, beta2=0.999,
                 eps=1e-8, weight_decay=0.0, seed=base + [5]),
        )
        _run_torch(
            "adamw", dtype,
            lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=False, fused=False), True,
            ("exp_avg", "exp_avg_sq"), np.random.default_rng(base + [6]),
            dict(call="torch.optim.AdamW(lr=0.01, weight_decay=0.1, foreach=False, fused=False)", lr=0.01,
                 beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, seed=base + [6]),
        )
        _run_torch(
            "sgd_momentum", dtype,
            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, foreach=False), True,
            ("momentum_buffer",), np.random.default_rng(base + [7]),
            dict(call="torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, foreach=False)", lr=0.1,
                 momentum=0.9, weight_decay=0.01, seed=base + [7]),
        )


def fbgemm_cases() -> None:
    """FBGEMM's CPU TBE with fp16 weights and float32 state, through the conformance adapters."""
    try:
        import fbgemm_gpu  # noqa: F401
    except ImportError:
        print("fbgemm_gpu not installed: the fbgemm_* files are not regenerated")
        return
    import fbgemm_gpu as fg

    from sparse_opt.conformance.adapters import fbgemm as adapters
    from sparse_opt.conformance.hyper import Hyper

    cases = {
        "exact_rowwise_adagrad": (adapters.FbgemmRowwiseAdagradFp16, Hyper(lr=0.1, eps=1e-8), 11),
        "exact_adagrad": (adapters.FbgemmExactAdagradFp16, Hyper(lr=0.1, eps=1e-8), 12),
        "exact_sgd": (adapters.FbgemmExactSgdFp16, Hyper(lr=0.1), 13),
    }
    for name, (cls, hyper, k) in cases.items():
        rng = np.random.default_rng([SEED, k])
        offsets, ids = _lookups(rng, every_row=False)
        p0 = _values(rng, (ROWS, COLS), "float16", 1.0)
        grads = _values(rng, (ids.size, COLS), "float32", 0.5)
        tbe = cls(p0.astype(np.float32), hyper)
        params = []
        for t in range(1, T + 1):
            lo, hi = offsets[t - 1], offsets[t]
            tbe.step(ids[lo:hi], grads[lo:hi])
            params.append(tbe.table())
        arrays = {"p0": p0, "offsets": offsets, "ids": ids, "grads": grads, "params": np.stack(params)}
        arrays |= _meta(
            library="fbgemm", call=f"{cls.__name__}: {cls.name}", dtype="float16", lr=hyper.lr, eps=hyper.eps,
            seed=[SEED, k], torch_version=torch.__version__, fbgemm_version=getattr(fg, "__version__", "1.8.0"),
            numpy_version=np.__version__,
        )
        _save(f"fbgemm_{name}_fp16", arrays)


if __name__ == "__main__":
    torch_cases()
    fbgemm_cases()
