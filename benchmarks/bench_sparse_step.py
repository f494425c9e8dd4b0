"""One optimizer step on an embedding table: sparse_opt against torch, side by side.

Every contender does the same work per step on the same seeded data: a batch of
Zipf-distributed row ids (repeats included) and one gradient row per id; it
builds its gradient from them (``CsrGradient.from_rows`` for sparse_opt, an
uncoalesced ``torch.sparse_coo_tensor`` that ``torch.optim.SparseAdam``
coalesces inside its step, dense scatter-adds for the dense optimizers) and
steps. Gradient building and step are timed together; the table reports
medians over repeated steps after a warm-up. State arrays are written once
before timing so page faults of freshly allocated zeros are not charged to the
steps (torch zero-fills its state explicitly; numpy's ``np.zeros`` maps pages
lazily).

Sections: machine, the main comparison, a sweep over table rows at a fixed
batch (a lazy step must stay flat), a sweep over batch sizes at a fixed table
(time grows with nnz), and what a step allocates (tracemalloc, sparse_opt only)
with the bytes of state per parameter.

Run from the repository root::

    .venv/bin/python benchmarks/bench_sparse_step.py            # sparse_opt only
    /path/to/venv-with-torch/bin/python benchmarks/bench_sparse_step.py   # adds torch
    .venv/bin/python benchmarks/bench_sparse_step.py --quick    # small sizes, about a minute

The full default run needs about 9 GB of free memory: the rows sweep keeps one
optimizer's 100,000-, 1,000,000- and 10,000,000-row tables alive at once
(parameters, m and v: 8 bytes of state per float32 parameter for torch's
SparseAdam, 8 + 8 / 64 for ``SparseAdamTable``, whose last_step is one int64 per
row). It takes about 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sparse_opt.demos.performance import (
    Contender,
    StepTiming,
    Workload,
    batch_sweep,
    batch_workloads,
    format_machine_info,
    format_memory,
    format_timings,
    load_torch,
    machine_info,
    rows_sweep,
    rows_workloads,
    sparse_opt_contenders,
    state_bytes_per_param,
    step_memory,
    time_steps,
    torch_contenders,
)

REFERENCE = "torch SparseAdam"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` replaces the defaults of the sizes and repeats."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats: rows 100000, batch 1024, sweeps to 1e6 rows and 4096 ids (under a minute)")
    p.add_argument("--rows", type=int, default=None, help="table rows of the main comparison [1000000]")
    p.add_argument("--cols", type=int, default=64, help="embedding width [64]")
    p.add_argument("--batch", type=int, default=None, help="ids looked up per step [4096]")
    p.add_argument("--skew", type=float, default=1.0, help="Zipf exponent of the ids [1.0]")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="table, gradient and state dtype [float32]")
    p.add_argument("--repeats", type=int, default=None, help="timed steps per sparse contender [300]")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first [20]")
    p.add_argument("--dense-repeats", type=int, default=None, help="timed steps per dense contender [5]")
    p.add_argument("--sweep-rows", type=int, nargs="*", default=None, help="table sizes of the rows sweep [1e5 1e6 1e7]")
    p.add_argument("--sweep-batch", type=int, nargs="*", default=None, help="batch sizes of the batch sweep [256 ... 65536]")
    p.add_argument("--no-torch", action="store_true", help="leave torch out even if it is installed")
    p.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads(N) before timing [torch's default]")
    p.add_argument("--no-dense", action="store_true", help="leave the dense optimizers out")
    p.add_argument("--seed", type=int, default=0, help="seeds tables and batches [0]")
    args = p.parse_args(argv)
    defaults = {
        "rows": (1_000_000, 100_000),
        "batch": (4096, 1024),
        "repeats": (300, 30),
        "warmup": (20, 5),
        "dense_repeats": (5, 3),
        "sweep_rows": ([100_000, 1_000_000, 10_000_000], [10_000, 100_000, 1_000_000]),
        "sweep_batch": ([256, 1024, 4096, 16384, 65536], [256, 1024, 4096]),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def section(title: str) -> None:
    """Print a section heading."""
    print(f"\n## {title}\n", flush=True)


def growth_summary(timings: Sequence[StepTiming]) -> str:
    """For each contender, how the median time (and nnz) change between consecutive table sizes.

    The batch is fixed, but a Zipf law over more rows has a longer tail, so the
    same number of lookups hits somewhat more distinct rows: nnz grows a little
    with the table, and the time per 1,000 entries shows what is left.
    """
    lines = []
    by_name: dict[str, list[StepTiming]] = {}
    for t in timings:
        by_name.setdefault(t.contender, []).append(t)
    for name, ts in by_name.items():
        ts = sorted(ts, key=lambda t: t.workload.rows)
        steps = [
            f"{b.workload.rows / a.workload.rows:g}x rows -> {b.median_ms / a.median_ms:.2f}x time"
            f" ({b.nnz / a.nnz:.2f}x nnz)"
            for a, b in zip(ts, ts[1:])
        ]
        per_entry = ", ".join(f"{1e3 * t.median_ms / t.nnz:.4f}" for t in ts)
        lines.append(f"{name:<32} " + "; ".join(steps) + f"; ms per 1,000 entries: {per_entry}")
    return "\n".join(lines)


def speedups(timings: Sequence[StepTiming], reference: str) -> str:
    """One line per contender: how many times faster than ``reference`` on the same workload."""
    ref = {t.workload: t.median_ms for t in timings if t.contender == reference}
    return "\n".join(
        f"{t.contender:<32} {ref[t.workload] / t.median_ms:6.2f}x faster than {reference}"
        for t in timings
        if t.contender != reference and t.workload in ref
    )


def show(timings: Sequence[StepTiming]) -> None:
    """Print one progress line per timing."""
    for t in timings:
        print(f"  {t.contender:<32} rows {t.workload.rows:>10,}  batch {t.workload.batch:>6}  {t.median_ms:10.3f} ms", flush=True)


def time_dense(contenders: Sequence[Contender], workloads: Sequence[Workload], repeats: int) -> list[StepTiming]:
    """Dense contenders one at a time (their steps take long; one warm-up step each)."""
    out = []
    for w in workloads:
        for c in contenders:
            out += time_steps([(c, w)], repeats, warmup=1, num_batches=max(repeats, 1))
            show(out[-1:])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and print it; returns the process exit code."""
    args = parse_args(argv)
    base = Workload(args.rows, args.cols, args.batch, args.skew, args.dtype, args.seed)
    with_dense = not args.no_dense
    ours = sparse_opt_contenders(dense=with_dense)
    theirs = [] if args.no_torch else torch_contenders(dense=with_dense)
    if theirs and args.torch_threads is not None:
        load_torch().set_num_threads(args.torch_threads)
    sparse = [c for c in ours + theirs if not c.dense]
    dense = [c for c in ours + theirs if c.dense]
    reference = REFERENCE if theirs else None

    section("Machine")
    print(format_machine_info(machine_info()))
    print(f"\nworkload: {base}")
    print(f"timing: median of {args.repeats} steps after {args.warmup} warm-up steps, sparse contenders interleaved step by step")
    if not theirs:
        print("torch: not compared (not importable here, or --no-torch)")

    section(f"Main comparison: {base.rows:,} x {base.cols} {base.dtype}, batches of {base.batch} ids")
    main_timings = time_steps([(c, base) for c in sparse], args.repeats, args.warmup)
    show(main_timings)
    main_timings += time_dense(dense, [base], args.dense_repeats)
    print()
    print(format_timings(main_timings, reference))
    if reference:
        print()
        print(speedups(main_timings, reference))

    section(f"Table rows sweep at batch {base.batch} (a lazy step should not depend on the table)")
    rows_timings = rows_sweep(sparse, base, args.sweep_rows, args.repeats, args.warmup)
    show(rows_timings)
    rows_timings += time_dense(dense, [w for w in rows_workloads(base, args.sweep_rows) if w.rows <= base.rows], args.dense_repeats)
    print()
    print(format_timings(rows_timings, reference))
    print()
    print(growth_summary(rows_timings))
    if dense:
        print(f"(dense optimizers only up to {base.rows:,} rows: they cost O(table) per step)")

    section(f"Batch sweep on {base.rows:,} rows (time grows with nnz)")
    batch_timings = batch_sweep(sparse, base, args.sweep_batch, args.repeats, args.warmup)
    show(batch_timings)
    print()
    print(format_timings(batch_timings, reference))

    section(f"Memory: peak bytes a step allocates (tracemalloc; sparse_opt on {base.rows:,} rows)")
    points = [step_memory(c, w) for w in batch_workloads(base, args.sweep_batch) for c in ours if not c.dense]
    print(format_memory(points))
    print("\nstep peak: inside optimizer.step(grad) with the gradient built; +from_rows: building it too.")
    print(f"\nState bytes per parameter ({base.dtype}):")
    for c in ours + theirs:
        print(f"  {c.name:<32} {state_bytes_per_param(c, cols=base.cols, dtype=base.dtype):7.3f}")

    section("After the run")
    print("load average (1, 5, 15 min):", machine_info()["load average (1, 5, 15 min)"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
