"""Bytes per parameter of each optimizer configuration, measured from the real arrays.

For every configuration the script builds the optimizer over a ``rows x cols``
table, takes one step that touches every row with whole rows (an embedding
lookup's gradient: ``last_step`` is then kept per row), and counts

- ``params``: ``table.nbytes``;
- ``state``: the ``nbytes`` of every array in ``opt.state_dict()`` (moments,
  accumulators, momentum buffer, ``last_step``, a stochastic-rounding generator's
  48-byte state; counters and config scalars are not arrays and are left out);

each divided by ``rows * cols``. It then checks the measurement against the
formula printed beside it (``8/cols`` is ``last_step``'s int64 per row,
``4/cols`` row-wise Adagrad's float32 accumulator per row) and stops if they
disagree by more than the generator's 48 bytes. ``DenseAdam`` also keeps two
work arrays of the table's size in the state's work dtype (not in its state dict;
listed in the notes column).

Run from the repository root (numpy; ``ml_dtypes`` adds the bfloat16 rows)::

    .venv/bin/python benchmarks/bench_memory.py [--rows 50000] [--cols 16 64 128]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import sparse_opt as so


@dataclass(frozen=True)
class Config:
    """One row of the table: how to build it, on which dtype, and the bytes per parameter expected."""

    name: str
    dtype: str
    make: Callable[[np.ndarray], object]
    #: ``(params, state)`` bytes per parameter as a function of ``cols``.
    expected: Callable[[int], tuple[float, float]]
    notes: str = ""


def _configs() -> list[Config]:
    adam = lambda **kw: (lambda p: so.SparseAdamTable(p, so.SparseAdamConfig(**kw)))  # noqa: E731
    adagrad = lambda **kw: (lambda p: so.SparseAdagradTable(p, so.SparseAdagradConfig(**kw)))  # noqa: E731
    sgd = lambda **kw: (lambda p: so.SparseSgdTable(p, so.SparseSgdConfig(lr=0.1, **kw)))  # noqa: E731
    out = [
        Config("SparseAdam (any mode)", "float32", adam(), lambda c: (4, 8 + 8 / c), "m, v fp32; last_step per row"),
        Config("SparseAdam, fp32 state", "float16", adam(), lambda c: (2, 8 + 8 / c), "update in fp32, p rounded once"),
        Config("SparseAdam, stochastic", "float16", adam(rounding="stochastic"), lambda c: (2, 8 + 8 / c),
               "+ 48 B generator per table"),
        Config("SparseAdam, state='param'", "float16", adam(state_dtype="param"), lambda c: (2, 4 + 8 / c),
               "torch's fp16 SparseAdam/Adam"),
        Config("SparseAdam, fp32 state", "bfloat16", adam(), lambda c: (2, 8 + 8 / c), ""),
        Config("SparseAdam, state='param'", "bfloat16", adam(state_dtype="param"), lambda c: (2, 4 + 8 / c), ""),
        Config("DenseAdam", "float32", lambda p: so.DenseAdam(p), lambda c: (4, 8), "+ 8 B/param work arrays"),
        Config("DenseAdam, fp32 state", "float16", lambda p: so.DenseAdam(p), lambda c: (2, 8),
               "+ 8 B/param work arrays"),
        Config("SparseAdagrad", "float32", adagrad(), lambda c: (4, 4), "torch's sparse Adagrad"),
        Config("SparseAdagrad, fp32 state", "float16", adagrad(), lambda c: (2, 4), "FBGEMM EXACT_ADAGRAD fp16"),
        Config("SparseAdagrad, state='param'", "float16", adagrad(state_dtype="param"), lambda c: (2, 2),
               "torch's fp16 sparse Adagrad"),
        Config("SparseAdagrad rowwise", "float32", adagrad(rowwise=True), lambda c: (4, 4 / c),
               "FBGEMM EXACT_ROWWISE_ADAGRAD"),
        Config("SparseAdagrad rowwise, fp32 state", "float16", adagrad(rowwise=True), lambda c: (2, 4 / c),
               "FBGEMM fp16 weights"),
        Config("SparseAdagrad rowwise, fp32 state", "bfloat16", adagrad(rowwise=True), lambda c: (2, 4 / c), ""),
        Config("SparseSgd, momentum 0.9", "float32", sgd(momentum=0.9), lambda c: (4, 4), ""),
        Config("SparseSgd, momentum 0.9, fp32 state", "float16", sgd(momentum=0.9), lambda c: (2, 4), ""),
        Config("SparseSgd, no momentum", "float16", sgd(), lambda c: (2, 0), "FBGEMM EXACT_SGD fp16"),
        Config("SparseSgd DENSE_EQUIVALENT, momentum", "float16", sgd(momentum=0.9, mode="dense_equivalent"),
               lambda c: (2, 4 + 8 / c), ""),
    ]
    return out


def _dtype(name: str) -> np.dtype | None:
    if name != "bfloat16":
        return np.dtype(name)
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def measure(config: Config, rows: int, cols: int) -> tuple[float, float] | None:
    """``(params, state)`` bytes per parameter after one whole-row step on every row (None: no ml_dtypes)."""
    dtype = _dtype(config.dtype)
    if dtype is None:
        return None
    table = np.zeros((rows, cols), dtype=dtype)
    opt = config.make(table)
    if isinstance(opt, so.DenseAdam):
        opt.step(np.full((rows, cols), 0.5))
    else:
        opt.step(so.CsrGradient.from_rows(np.arange(rows), np.full((rows, cols), 0.5, np.float32), rows))
    state = sum(v.nbytes for v in opt.state_dict().values() if isinstance(v, np.ndarray))
    n = rows * cols
    return table.nbytes / n, state / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--cols", type=int, nargs="+", default=[16, 64, 128])
    args = parser.parse_args()
    cols_header = " | ".join(f"total @ cols={c}" for c in args.cols)
    print(f"| configuration | params | params B/param | state B/param (formula) | {cols_header} | notes |")
    print("|---|---|---:|---|" + "---:|" * len(args.cols) + "---|")
    for config in _configs():
        totals, formula = [], ""
        params = None
        for cols in args.cols:
            got = measure(config, args.rows, cols)
            if got is None:
                break
            params, state = got
            want_p, want_s = config.expected(cols)
            slack = 48 / (args.rows * cols)  # the generator's state
            if abs(params - want_p) > 1e-12 or not 0 <= state - want_s <= slack + 1e-12:
                raise SystemExit(f"{config.name} {config.dtype} cols={cols}: measured {got}, formula {(want_p, want_s)}")
            totals.append(f"{params + state:.3f}")
        if params is None:
            print(f"| {config.name} | {config.dtype} | (ml_dtypes not installed) | | " + " | " * len(args.cols) + " |")
            continue
        per_row = 2 * (config.expected(1)[1] - config.expected(2)[1])  # state = fixed + per_row / cols
        fixed = config.expected(1)[1] - per_row
        formula = f"{fixed:g}" if not per_row else (f"{per_row:g}/cols" if not fixed else f"{fixed:g} + {per_row:g}/cols")
        print(f"| {config.name} | {config.dtype} | {params:g} | {formula} | " + " | ".join(totals)
              + f" | {config.notes} |")
    print(f"\n(rows = {args.rows}; measured from table.nbytes and the arrays of state_dict(); every entry matched its "
          "formula, the generator's 48 bytes per table aside)")


if __name__ == "__main__":
    main()
