"""The kit's row-wise Adagrad and SGD steps against FBGEMM's CPU TBE (backward with the fused update): the speed anchor.

Same float32 table, same ids and gradients; the two are timed interleaved (kit, FBGEMM, kit, ...) so a change in
machine load hits both; torch runs on one thread, as numpy does. FBGEMM cannot update without a forward lookup
(its fused backward needs the forward's saved inputs), so its step is timed as forward + backward, and the forward
alone is timed too: ``FBGEMM update = step - forward``; at the end both tables must agree (within 1e-5 of
the largest entry) or the script stops. The kit's step is ``CsrGradient.from_rows`` (coalescing the
ids) + ``step``. Run with a Python that has torch 2.13.0 and fbgemm-gpu-cpu 1.8.0 (``make test-live``'s
``.venv-live``)::

    .venv-live/bin/python benchmarks/bench_fbgemm.py [--rows 100000] [--dim 64] [--batch 4096] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    EmbeddingLocation,
    SplitTableBatchedEmbeddingBagsCodegen,
)

from sparse_opt import CsrGradient, SparseAdagradConfig, SparseAdagradTable, SparseSgdConfig, SparseSgdTable


def _tbe(table: np.ndarray, optimizer: str) -> SplitTableBatchedEmbeddingBagsCodegen:
    rows, dim = table.shape
    emb = SplitTableBatchedEmbeddingBagsCodegen(
        [(rows, dim, EmbeddingLocation.HOST, ComputeDevice.CPU)], optimizer=EmbOptimType[optimizer],
        learning_rate=0.01, eps=1e-8, pooling_mode=PoolingMode.NONE, weights_precision=SparseType.FP32,
        stochastic_rounding=False,
    )
    with torch.no_grad():
        emb.split_embedding_weights()[0].copy_(torch.from_numpy(table))
    return emb


def _time_ms(fn: Callable[[], object], times: list[float]) -> None:
    start = time.perf_counter()
    fn()
    times.append(1e3 * (time.perf_counter() - start))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    ids = rng.integers(0, args.rows, size=args.batch)
    grads = rng.standard_normal((args.batch, args.dim)).astype(np.float32)
    t_ids, t_offsets, t_grads = torch.from_numpy(ids), torch.arange(args.batch + 1), torch.from_numpy(grads)
    print(f"table {args.rows} x {args.dim} float32, batch {args.batch} ids ({np.unique(ids).size} distinct), "
          f"{args.repeats} interleaved repeats, torch {torch.__version__}, 1 thread; medians in ms")
    print(f"{'optimizer':24s} {'kit step':>9s} {'FBGEMM fwd+bwd':>15s} {'FBGEMM fwd':>11s} "
          f"{'kit / (fwd+bwd)':>16s} {'kit / update':>13s} {'same table':>11s}")
    for label, optimizer, kit in (
        ("row-wise Adagrad", "EXACT_ROWWISE_ADAGRAD",
         lambda p: SparseAdagradTable(p, SparseAdagradConfig(lr=0.01, eps=1e-8, rowwise=True))),
        ("SGD (no momentum)", "EXACT_SGD", lambda p: SparseSgdTable(p, SparseSgdConfig(lr=0.01))),
    ):
        params = table.copy()
        opt, emb = kit(params), _tbe(table, optimizer)
        kit_ms, step_ms, fwd_ms = [], [], []
        for _ in range(args.repeats + 1):  # the first round warms both up and is dropped
            _time_ms(lambda: opt.step(CsrGradient.from_rows(ids, grads, args.rows)), kit_ms)
            _time_ms(lambda: (emb(t_ids, t_offsets) * t_grads).sum().backward(), step_ms)
            with torch.no_grad():
                _time_ms(lambda: emb(t_ids, t_offsets), fwd_ms)
        k, s, f = (statistics.median(x[1:]) for x in (kit_ms, step_ms, fwd_ms))
        # both took the same steps: their tables must agree (float32 rounding apart), or the timing compares nothing
        theirs = emb.split_embedding_weights()[0].detach().numpy()
        rel = float(np.max(np.abs(theirs - params)) / np.max(np.abs(params)))
        if rel > 1e-5:
            raise SystemExit(f"{label}: the kit's table and FBGEMM's differ by {rel:.1e} (relative): not the same update")
        print(f"{label:24s} {k:9.3f} {s:15.3f} {f:11.3f} {k / s:16.2f} {k / max(s - f, 1e-9):13.2f} "
              f"{'< 1e-5 rel':>11s}")


if __name__ == "__main__":
    main()
