"""One optimizer step on an embedding table: sparse_opt against torch, side by side.

Every contender does the same work per step on the same seeded data: a batch of
Zipf-distributed row ids (repeats included) and one gradient row per id; it
builds its gradient from them (``CsrGradient.from_rows`` for sparse_opt, an
uncoalesced ``torch.sparse_coo_tensor`` that ``torch.optim.SparseAdam``
coalesces inside its step, dense scatter-adds for the dense optimizers) and
steps. Gradient building and step are timed together; the tables report
medians over repeated steps after a warm-up. The ``SparseAdamTable
DENSE_EQUIVALENT`` step includes its catch-up of the touched rows' dormant
steps (done inside ``step``). State arrays are written once before timing so
page faults of freshly allocated zeros are not charged to the steps (torch
zero-fills its state explicitly; numpy's ``np.zeros`` maps pages lazily).

Sections: machine; the main comparison, every contender in one run interleaved
step by step (the dense ones, whose steps cost O(table), take
``--dense-repeats`` steps spread over the run), with the speed-ups against
torch's SparseAdam and DENSE_EQUIVALENT's two goals read off that same run
(within 3x of DORMANCY_DECAY, at least 50x faster than dense torch.optim.Adam);
a sweep over table rows at a fixed batch (a lazy step must stay flat); a sweep
over batch sizes at a fixed table (time grows with nnz); what a step allocates
(tracemalloc, sparse_opt only) with the bytes of state per parameter.

Run from the repository root, through make (``BENCH_PYTHON``: the Python to run
it with, torch included if it has torch, sparse_opt found from the checkout;
``BENCH_ARGS``: the options below)::

    make bench                                                  # .venv's Python, sparse_opt only, full size
    make bench BENCH_PYTHON=/path/to/venv-with-torch/bin/python BENCH_ARGS=--quick

or directly::

    .venv/bin/python benchmarks/bench_sparse_step.py            # sparse_opt only
    /path/to/venv-with-torch/bin/python benchmarks/bench_sparse_step.py   # adds torch
    .venv/bin/python benchmarks/bench_sparse_step.py --quick    # small sizes, about a minute

The full default run needs about 9 GB of free memory: the rows sweep keeps one
optimizer's 100,000-, 1,000,000- and 10,000,000-row tables alive at once
(parameters, m and v: 8 bytes of state per float32 parameter for torch's
SparseAdam, 8 + 8 / 64 for ``SparseAdamTable``, whose last_step is one int64 per
row), and the main comparison all contenders' 1,000,000-row tables (about 6 GB
with torch). It takes about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from machine import format_machine_info, load_average, machine_info
from torch_contenders import DENSE_ADAM as TORCH_DENSE_ADAM
from torch_contenders import SPARSE_ADAM as TORCH_SPARSE_ADAM
from torch_contenders import load_torch, torch_contenders

from sparse_opt.demos.contenders import (
    DENSE_ADAM,
    DENSE_EQUIVALENT_ADAM,
    DORMANCY_ADAM,
    Contender,
    select,
    sparse_opt_contenders,
)
from sparse_opt.demos.memory import format_memory, kept_bytes, state_bytes_per_param, step_memories
from sparse_opt.demos.timing import StepTiming, batch_sweep, format_timings, rows_sweep, speedup, time_steps
from sparse_opt.demos.workload import Workload, batch_workloads, rows_workloads

REFERENCE = TORCH_SPARSE_ADAM

#: DENSE_EQUIVALENT's goals, on the benchmark table (:data:`GOAL_WORKLOAD`, the default main comparison):
#: at most this many times DORMANCY_DECAY's step time ...
DENSE_EQUIVALENT_MAX_SLOWDOWN = 3.0
#: ... and at least this many times faster than dense torch.optim.Adam.
DENSE_EQUIVALENT_MIN_SPEEDUP = 50.0


#: The table and batch the goals are set on (the default main comparison; its seed does not matter).
GOAL_WORKLOAD = Workload(rows=1_000_000, cols=64, batch=4096, skew=1.0, dtype="float32", seed=0)


def on_goal_table(workload: Workload) -> bool:
    """Whether ``workload`` is the one the goals are set on, :data:`GOAL_WORKLOAD` (any seed)."""
    fields = ("rows", "cols", "batch", "skew", "dtype")
    return all(getattr(workload, f) == getattr(GOAL_WORKLOAD, f) for f in fields)


def describe_table(workload: Workload) -> str:
    """``workload``'s table and batch in words, e.g. '1,000,000 x 64 float32, 4096 Zipf(1) ids a step'."""
    w = workload
    return f"{w.rows:,} x {w.cols} {w.dtype}, {w.batch} Zipf({w.skew:g}) ids a step"


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
    args.dense_repeats = min(args.dense_repeats, args.repeats)
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
        per_entry = "ms per 1,000 entries: " + ", ".join(f"{1e3 * t.median_ms / t.nnz:.4f}" for t in ts)
        lines.append(f"{name:<32} " + "; ".join([*steps, per_entry]))
    return "\n".join(lines)


def dense_equivalent_goals(timings: Sequence[StepTiming]) -> str:
    """DENSE_EQUIVALENT's step against DORMANCY_DECAY, torch's SparseAdam and the dense optimizers, with its goals.

    All ratios are read off the one interleaved run of the main comparison;
    contenders missing from it (no torch, ``--no-dense``) are said to be. The
    goals are judged only on the table they are set on (:func:`on_goal_table`).
    """
    names = {t.contender for t in timings}
    if DENSE_EQUIVALENT_ADAM not in names:
        return f"{DENSE_EQUIVALENT_ADAM}: not timed"
    lines = [f"{DENSE_EQUIVALENT_ADAM} (its catch-up of the touched rows included), in the same interleaved run:"]
    judged = all(on_goal_table(t.workload) for t in timings)

    def verdict(ok: bool) -> str:
        if not judged:
            return "not judged: this run's table is not the goal's (see below)"
        return "goal met" if ok else "GOAL NOT MET"

    if DORMANCY_ADAM in names:
        slower = 1.0 / speedup(timings, DENSE_EQUIVALENT_ADAM, DORMANCY_ADAM)
        lines.append(
            f"  {slower:8.2f}x the step time of {DORMANCY_ADAM:<32}"
            f" (goal: at most {DENSE_EQUIVALENT_MAX_SLOWDOWN:g}x)  {verdict(slower <= DENSE_EQUIVALENT_MAX_SLOWDOWN)}"
        )
    if TORCH_DENSE_ADAM in names:
        faster = speedup(timings, DENSE_EQUIVALENT_ADAM, TORCH_DENSE_ADAM)
        lines.append(
            f"  {faster:8.1f}x faster than {TORCH_DENSE_ADAM:<40}"
            f" (goal: at least {DENSE_EQUIVALENT_MIN_SPEEDUP:g}x)  {verdict(faster >= DENSE_EQUIVALENT_MIN_SPEEDUP)}"
        )
    else:
        lines.append(f"  {TORCH_DENSE_ADAM}: not timed (no torch, --no-torch or --no-dense): its goal is not checked")
    if DENSE_ADAM in names:
        lines.append(f"  {speedup(timings, DENSE_EQUIVALENT_ADAM, DENSE_ADAM):8.2f}x faster than {DENSE_ADAM}")
    if not judged:
        lines.append(f"  Not judged: the goals are set on {describe_table(GOAL_WORKLOAD)} (the default main comparison,")
        lines.append(f"  make bench without --quick or size options); this run timed {describe_table(timings[0].workload)}.")
        lines.append("  A dense step costs O(table) and a lazy one O(nnz), so the ratios above change with the table")
        lines.append("  and the batch: they are measured, but not comparable with the goals.")
    return "\n".join(lines)


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
    torch = None if args.no_torch else load_torch()
    if torch is not None and args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    ours = sparse_opt_contenders(dense=with_dense)
    theirs = torch_contenders(torch, dense=with_dense)
    everyone = ours + theirs
    sparse = [c for c in everyone if not c.dense]
    dense = [c for c in everyone if c.dense]
    reference = REFERENCE if theirs else None

    section("Machine")
    print(format_machine_info(machine_info(torch)))
    print(f"\nworkload: {base}")
    print(
        f"timing: median of {args.repeats} steps after {args.warmup} warm-up steps, contenders interleaved step by step"
        f" (dense ones: {args.dense_repeats} steps spread over the same run, after 1 warm-up step)"
    )
    if not theirs:
        print("torch: not compared (not importable here, or --no-torch)")

    section(f"Main comparison: {base.rows:,} x {base.cols} {base.dtype}, batches of {base.batch} ids, one interleaved run")
    main_timings = time_steps(
        [(c, base) for c in everyone], args.repeats, args.warmup, dense_repeats=args.dense_repeats, dense_warmup=1
    )
    show(main_timings)
    print()
    print(format_timings(main_timings, reference))
    print()
    print(dense_equivalent_goals(main_timings))

    section(f"Table rows sweep at batch {base.batch} (a lazy step should not depend on the table)")
    rows_timings = rows_sweep(sparse, base, args.sweep_rows, args.repeats, args.warmup)
    show(rows_timings)
    rows_timings += time_dense(dense, [w for w in rows_workloads(base, args.sweep_rows) if w.rows <= base.rows], args.dense_repeats)
    print()
    print(format_timings(rows_timings))
    print("(each contender's table sizes are interleaved, the contenders run one after the other:")
    print(" compare contenders in the main comparison and the batch sweep)")
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
    lazy_ours = [c for c in ours if not c.dense]
    points = step_memories(lazy_ours, batch_workloads(base, args.sweep_batch))
    print(format_memory(points))
    print("\nstep peak: inside optimizer.step(grad) with the gradient built; +from_rows: building it too.")
    print(f"\nState bytes per parameter ({base.dtype}, {base.cols} columns):")
    for c in everyone:
        print(f"  {c.name:<32} {state_bytes_per_param(c, cols=base.cols, dtype=base.dtype):7.3f}")
    small = Workload(10_000, base.cols, min(base.batch, 1024), base.skew, base.dtype, base.seed)
    de, dd = select(ours, DENSE_EQUIVALENT_ADAM, DORMANCY_ADAM)
    extra = kept_bytes(de, small) - kept_bytes(dd, small)
    print(f"\n{DENSE_EQUIVALENT_ADAM} also keeps {extra:,} bytes of catch-up weights by global step (any table size).")

    section("After the run")
    print("load average (1, 5, 15 min):", load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
