"""What DENSE_EQUIVALENT's catch-up costs, over gradient scale x beta1 x beta2 x gap, as ratios to DORMANCY_DECAY.

Two measurements, each one interleaved run of the two modes on the same data
(the same seeded table, Zipf ids and gradients), reported as the ratio of the
median times, DENSE_EQUIVALENT / DORMANCY_DECAY:

1. **Training steps** (``step``, catch-up of the touched rows included): a
   ``rows x cols`` table, ``batch`` Zipf(1) ids a step, row gradients of the
   given scale (standard normal times ``scale``). Both optimizers take
   ``warmup`` untimed steps, then ``repeats`` rounds of one timed step each
   (the first mode of a round alternates). SPEC goal: at most 3x at scales 1
   to 1e-12 and beta1 up to 0.9999.
2. **Gaps**: after ``warmup`` steps, the step counter is moved on by ``gap``
   (a state dict with ``step_count + gap``: nothing else changes), and one step
   touches ``touched`` rows that were touched during the warm-up (so their
   moments are not zero). Each repetition uses a fresh optimizer loaded with
   that state (no cached weights from an earlier repetition), untimed; the
   step is timed. Reported: the ratio to DORMANCY_DECAY's same step, and the
   ratio of the step after the longest gap to the step after the shortest.
   SPEC goal: a catch-up after 10**6 steps costs at most 3x one after 100.
3. **Gaps under a schedule**: the gap grid at one gradient scale with both
   optimizers driven by ``warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)`` (each
   dormant step at its own rate; the gaps cross the warm-up's end), as Adam
   and as AdamW (``weight_decay`` 0.01: each dormant step's own decay too).
4. **Late training**: training steps as in 1, but from a state at step 10**6
   in which every row has been touched and row ``r`` (by Zipf rank) was last
   touched about ``r`` steps ago (times a uniform factor in [0.5, 2]): the
   touched rows' gaps spread from one step to 10**5 and beyond, as a long run's
   would, instead of the few dozen steps of 1. With a schedule grid
   (``--schedule-scales``), also under the schedule of 3, and under the step
   decay and the exponential decay of 5 (a drop just after step 10**6: every
   window crosses it), as Adam. And the
   same for SGD (momentum 0.9, with and without coupled ``weight_decay``
   0.01, at the constant rate and under the schedule), against LAZY. And as
   AdamW (``--late-weight-decay``, 0.01) at gradient scale 1, at the constant
   rate and under the schedule of 3, in each dtype of 5, with 2 warm-up and 5
   timed steps (some of its steps take seconds).
5. **Every optimizer and schedule**: the gap measurement of 2 (the shortest
   and the longest gap, one gradient scale) for Adam, AdamW (``weight_decay``
   0.01) and SGD (momentum 0.9, coupled ``weight_decay`` 0.01; against LAZY,
   SGD's other mode) in float32 and float64, under each built-in schedule
   (:data:`EVERY_SCHEDULES`) and a callable (:func:`inverse_time`): where the
   catch-up's cost still follows the gap, this says for which inputs.

Run from the repository root::

    .venv/bin/python benchmarks/bench_catch_up_cost.py            # the full grid (about 15 minutes)
    .venv/bin/python benchmarks/bench_catch_up_cost.py --quick    # a small table and grid (about 2 minutes)
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
from collections.abc import Callable, Sequence

import numpy as np
from machine import format_machine_info, load_average, machine_info

import sparse_opt as so
from sparse_opt.demos.data import zipf_ids

GOAL_RATIO = 3.0
#: The global step of the late-training state (measurement 4).
LATE_STEP = 10**6
#: The schedule of the third measurement: a warm-up of 1000 steps, then a cosine over two million.
SCHEDULE = so.schedules.warmup_cosine(1e-3, 1000, 2_000_000, 1e-5)


def inverse_time(t: int) -> float:
    """A schedule the kit does not know (measurement 5): ``1e-3 / (1 + 1e-6 t)``, a plain function."""
    return 1e-3 / (1.0 + 1e-6 * t)


#: The schedules of measurement 5: each built-in, and a callable.
EVERY_SCHEDULES = {
    "constant": 1e-3,
    "warmup_cosine": SCHEDULE,
    "step_decay": so.schedules.step_decay(1e-3, 100_000, 0.5),
    "exponential": so.schedules.exponential(1e-3, 0.999999),
    "callable": inverse_time,
}



def make_optimizer(
    table: np.ndarray, mode: str, beta1: float, beta2: float, scheduled: object = False, weight_decay: float = 0.0
) -> so.SparseAdamTable:
    """A SparseAdamTable in ``mode`` with lr 1e-3 (``scheduled``: :data:`SCHEDULE` if True, or that schedule), eps 1e-8
    (torch's defaults), the given betas and decoupled ``weight_decay``."""
    lr: object = 1e-3
    if scheduled is True:
        lr = SCHEDULE
    elif scheduled is not False:
        lr = scheduled
    config = so.SparseAdamConfig(lr=lr, beta1=beta1, beta2=beta2, eps=1e-8, weight_decay=weight_decay, mode=mode)
    return so.SparseAdamTable(table, config)


def batches(rows: int, cols: int, batch: int, count: int, scale: float, dtype: str, seed: int) -> list:
    """``count`` ``(ids, row_grads)`` pairs: Zipf(1) ids, standard normal gradients times ``scale``."""
    rng = np.random.default_rng([seed, 1])
    ids = zipf_ids(rows, count * batch, 1.0, rng).reshape(count, batch)
    grads = (rng.standard_normal((count, batch, cols)) * scale).astype(dtype)
    return [(ids[k], grads[k]) for k in range(count)]


def step(opt: so.SparseAdamTable, ids: np.ndarray, grads: np.ndarray) -> float:
    """Build the gradient and step; seconds taken."""
    start = time.perf_counter()
    opt.step(so.CsrGradient.from_rows(ids, grads, opt.params.shape[0]))
    return time.perf_counter() - start


def train_ratio(args: argparse.Namespace, scale: float, beta1: float, beta2: float) -> tuple[float, float, float]:
    """Median step times of DENSE_EQUIVALENT and DORMANCY_DECAY in one interleaved run, and their ratio."""
    base = np.random.default_rng([args.seed, 0]).standard_normal((args.rows, args.cols)).astype(args.dtype) * 0.01
    modes = ("dense_equivalent", "dormancy_decay")
    opts = [make_optimizer(base.copy(), mode, beta1, beta2) for mode in modes]
    work = batches(args.rows, args.cols, args.batch, 16, scale, args.dtype, args.seed)
    return interleaved(opts, [work[n % len(work)] for n in range(args.warmup + args.repeats)], args.warmup)


def interleaved(opts: Sequence[so.SparseAdamTable], work: Sequence, warmup: int) -> tuple[float, float, float]:
    """Both optimizers take each ``(ids, grads)`` of ``work`` in turn (the first of a round alternating); the median
    times of the steps after ``warmup``, ``(DE, DD, DE / DD)``."""
    times: list[list[float]] = [[], []]
    gc.collect()
    gc.disable()
    try:
        for n, (ids, grads) in enumerate(work):
            for k in (0, 1) if n % 2 == 0 else (1, 0):
                t = step(opts[k], ids, grads)
                if n >= warmup:
                    times[k].append(t)
    finally:
        gc.enable()
    de, dd = (float(np.median(t)) for t in times)
    return de, dd, de / dd


def gap_times(
    args: argparse.Namespace,
    scale: float,
    gap: int,
    make: Callable[[np.ndarray, str], so.SparseAdamTable | so.SparseSgdTable],
    modes: Sequence[str] = ("dense_equivalent", "dormancy_decay"),
) -> list[float]:
    """Median times of the step touching ``touched`` warm rows after ``gap`` dormant steps, one per mode of ``modes``.

    ``make(table, mode)`` builds each optimizer.
    """
    base = np.random.default_rng([args.seed, 0]).standard_normal((args.rows, args.cols)).astype(args.dtype) * 0.01
    work = batches(args.rows, args.cols, args.batch, args.gap_warmup, scale, args.dtype, args.seed)
    warm_ids = np.unique(np.concatenate([ids for ids, _ in work]))
    rng = np.random.default_rng([args.seed, 2])
    touched = np.sort(rng.choice(warm_ids, size=min(args.touched, warm_ids.size), replace=False))
    grads = (rng.standard_normal((touched.size, args.cols)) * scale).astype(args.dtype)
    out = []
    for mode in modes:
        table = base.copy()
        opt = make(table, mode)
        for ids, g in work:
            opt.step(so.CsrGradient.from_rows(ids, g, args.rows))
        state = opt.state_dict()
        state["step_count"] = np.int64(int(state["step_count"]) + gap)
        times = []
        for _ in range(args.gap_repeats):
            fresh = make(table.copy(), mode)
            fresh.load_state_dict(state)
            gc.collect()
            times.append(step(fresh, touched, grads))
        out.append(float(np.median(times)))
    return out


def late_sgd_ratio(args: argparse.Namespace, scheduled: bool, weight_decay: float) -> tuple[float, float, float]:
    """Measurement 4 for SGD (momentum 0.9): median step times of DENSE_EQUIVALENT and LAZY, and their ratio."""
    rng = np.random.default_rng([args.seed, 3])
    base = rng.standard_normal((args.rows, args.cols)).astype(args.dtype) * 0.01
    gaps = np.clip((np.arange(1, args.rows + 1) * rng.uniform(0.5, 2.0, args.rows)).astype(np.int64), 1, LATE_STEP - 1)
    buffer = (rng.standard_normal((args.rows, args.cols)) * 1e-3).astype(args.dtype)
    make = every_optimizer("SGD", SCHEDULE if scheduled else 1e-3, 0.0, weight_decay)
    opts = []
    for mode in ("dense_equivalent", "lazy"):
        opt = make(base.copy(), mode)
        state = opt.state_dict()
        state.update(step_count=np.int64(LATE_STEP), momentum_buffer=buffer.copy())
        if "last_step" in state:
            state["last_step"] = LATE_STEP - gaps
        opt.load_state_dict(state)
        opts.append(opt)
    work = batches(args.rows, args.cols, args.batch, args.warmup + args.repeats, 1.0, args.dtype, args.seed)
    return interleaved(opts, work, args.warmup)


def every_optimizer(
    kind: str, lr: object, beta1: float, weight_decay: float = 0.01
) -> Callable[[np.ndarray, str], so.SparseAdamTable | so.SparseSgdTable]:
    """Measurement 5's ``make(table, mode)`` for ``kind`` (``"Adam"``, ``"AdamW"``, ``"SGD"``) with rate ``lr``
    (``weight_decay`` for AdamW and SGD)."""
    if kind == "SGD":
        config = dict(lr=lr, momentum=0.9, weight_decay=weight_decay)
        return lambda t, mode: so.SparseSgdTable(t, so.SparseSgdConfig(**config, mode=mode))
    wd = weight_decay if kind == "AdamW" else 0.0
    config = dict(lr=lr, beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=wd)
    return lambda t, mode: so.SparseAdamTable(t, so.SparseAdamConfig(**config, mode=mode))


def every_grid(args: argparse.Namespace) -> None:
    """Print measurement 5 (module docstring), and its worst ratio of the longest gap to the shortest."""
    short, long = args.gaps[0], args.gaps[-1]
    print(f"{'optimizer':>9} {'dtype':>8} {'schedule':>14} {'beta1':>7} {'DE ms':>9} {'other ms':>9} {'DE ms':>9} {'other ms':>9} {'/shortest':>9}")
    print(f"{'':>9} {'':>8} {'':>14} {'':>7} {f'gap {short:,}':>19} {f'gap {long:,}':>19}")
    worst = 0.0
    for kind, dtype, name in itertools.product(("Adam", "AdamW", "SGD"), args.every_dtypes, EVERY_SCHEDULES):
        modes = ("dense_equivalent", "lazy" if kind == "SGD" else "dormancy_decay")
        for beta1 in (0.9,) if kind == "SGD" else (0.9, 0.9999):
            make = every_optimizer(kind, EVERY_SCHEDULES[name], beta1)
            typed = argparse.Namespace(**{**vars(args), "dtype": dtype})
            (de_s, other_s), (de_l, other_l) = (gap_times(typed, args.every_scale, gap, make, modes) for gap in (short, long))
            worst = max(worst, de_l / de_s)
            print(
                f"{kind:>9} {dtype:>8} {name:>14} {beta1 if kind != 'SGD' else '':>7} {de_s * 1e3:>9.2f}"
                f" {other_s * 1e3:>9.2f} {de_l * 1e3:>9.2f} {other_l * 1e3:>9.2f} {de_l / de_s:>9.2f}",
                flush=True,
            )
    print(f"\nworst step after the longest gap / after the shortest: {worst:.2f} (goal <= {GOAL_RATIO:g})")


def late_ratio(
    args: argparse.Namespace, scale: float, beta1: float, beta2: float, scheduled: object = False, weight_decay: float = 0.0
) -> tuple[float, float, float]:
    """Median step times of DENSE_EQUIVALENT and DORMANCY_DECAY from a late state (module docstring, 4), and their ratio
    (``scheduled``: both under :data:`SCHEDULE` if True, or that schedule; as AdamW with ``weight_decay``)."""
    rng = np.random.default_rng([args.seed, 3])
    base = rng.standard_normal((args.rows, args.cols)).astype(args.dtype) * 0.01
    rank = np.arange(1, args.rows + 1)
    gaps = np.clip((rank * rng.uniform(0.5, 2.0, args.rows)).astype(np.int64), 1, LATE_STEP - 1)
    x = (np.abs(rng.standard_normal((args.rows, args.cols))) * 0.3 + 1e-3) * scale
    modes = ("dense_equivalent", "dormancy_decay")
    opts = []
    for mode in modes:
        opt = make_optimizer(base.copy(), mode, beta1, beta2, scheduled, weight_decay)
        state = opt.state_dict()
        state.update(step_count=np.int64(LATE_STEP), last_step=LATE_STEP - gaps)
        state.update(m=(x * rng.uniform(-1.0, 1.0, x.shape)).astype(args.dtype), v=(x * x).astype(args.dtype))
        opt.load_state_dict(state)
        opts.append(opt)
    # a new batch every step (no batch repeats): each brings rows dormant since before the late state
    work = batches(args.rows, args.cols, args.batch, args.warmup + args.repeats, scale, args.dtype, args.seed)
    return interleaved(opts, work, args.warmup)


def late_adamw(args: argparse.Namespace) -> None:
    """Print measurement 4 as AdamW (``--late-weight-decay``) at gradient scale 1, at a constant rate and under
    :data:`SCHEDULE`, in each of ``--every-dtypes`` (float32 alone when none): few steps, as a step can take seconds."""
    timed = argparse.Namespace(**{**vars(args), "warmup": 2, "repeats": 5})
    print(
        f"\n## Late training as AdamW, weight_decay = {args.late_weight_decay:g}, gradient scale 1"
        f" ({timed.warmup} warm-up, {timed.repeats} timed steps)\n"
    )
    print(f"{'dtype':>8} {'schedule':>14} {'beta1':>7} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7}")
    for dtype, name, beta1 in itertools.product(args.every_dtypes or ["float32"], ("constant", "warmup_cosine"), (0.9, 0.9999)):
        typed = argparse.Namespace(**{**vars(timed), "dtype": dtype})
        de, dd, ratio = late_ratio(typed, 1.0, beta1, 0.999, EVERY_SCHEDULES[name], args.late_weight_decay)
        print(f"{dtype:>8} {name:>14} {beta1:>7} {de * 1e3:>9.2f} {dd * 1e3:>9.2f} {ratio:>7.2f}", flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a 20,000-row table, a smaller grid, fewer repeats")
    p.add_argument("--rows", type=int, default=None, help="table rows [100000; quick 20000]")
    p.add_argument("--cols", type=int, default=32, help="embedding width [32]")
    p.add_argument("--batch", type=int, default=2048, help="Zipf ids a step [2048]")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps before the timed ones [30; quick 10]")
    p.add_argument("--repeats", type=int, default=None, help="timed steps per mode and grid point [40; quick 12]")
    p.add_argument("--scales", type=float, nargs="*", default=None, help="gradient scales [1 1e-3 1e-6 1e-9 1e-12]")
    p.add_argument("--beta1s", type=float, nargs="*", default=None, help="beta1 values [0.9 0.99 0.999 0.9999]")
    p.add_argument("--beta2s", type=float, nargs="*", default=None, help="beta2 values [0.999 0.9999; quick 0.999]")
    p.add_argument("--gaps", type=int, nargs="*", default=None, help="gaps of the gap grid [100 10000 1000000; quick 100 1000000]")
    p.add_argument("--touched", type=int, default=256, help="rows the step after a gap touches [256]")
    p.add_argument("--gap-warmup", type=int, default=20, help="steps before the gap [20]")
    p.add_argument("--gap-repeats", type=int, default=None, help="timed steps per gap point [5; quick 3]")
    p.add_argument("--gap-scales", type=float, nargs="*", default=None, help="gradient scales of the gap grid [1 1e-6 1e-9]")
    p.add_argument("--gap-beta1s", type=float, nargs="*", default=None, help="beta1 values of the gap grid [0.9 0.999 0.9999]")
    p.add_argument("--schedule-scales", type=float, nargs="*", default=None, help="gradient scales of the scheduled gap grid [1e-6; quick none]")
    p.add_argument("--schedule-weight-decay", type=float, default=0.01, help="AdamW's weight_decay under the schedule [0.01; 0: Adam only]")
    p.add_argument("--late-scales", type=float, nargs="*", default=None, help="gradient scales of the late-training grid [1 1e-6; quick 1e-6]")
    p.add_argument("--late-weight-decay", type=float, default=0.01, help="AdamW's weight_decay late in training [0.01; 0: none]")
    p.add_argument("--every-dtypes", nargs="*", default=None, help="dtypes of measurement 5 [float32 float64; quick none]")
    p.add_argument("--every-scale", type=float, default=1e-6, help="gradient scale of measurement 5 [1e-6]")
    p.add_argument("--skip-train", action="store_true", help="only the gap grid")
    p.add_argument("--skip-gaps", action="store_true", help="only the training-step grid")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    defaults = {
        "rows": (100_000, 20_000),
        "warmup": (30, 10),
        "repeats": (40, 12),
        "scales": ([1.0, 1e-3, 1e-6, 1e-9, 1e-12], [1.0, 1e-6, 1e-9, 1e-12]),
        "beta1s": ([0.9, 0.99, 0.999, 0.9999], [0.9, 0.9999]),
        "beta2s": ([0.999, 0.9999], [0.999]),
        "gaps": ([100, 10_000, 1_000_000], [100, 1_000_000]),
        "gap_repeats": (5, 3),
        "gap_scales": ([1.0, 1e-6, 1e-9], [1e-6]),
        "gap_beta1s": ([0.9, 0.999, 0.9999], [0.9, 0.9999]),
        "schedule_scales": ([1e-6], []),
        "late_scales": ([1.0, 1e-6], [1e-6]),
        "every_dtypes": (["float32", "float64"], []),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def gap_grid(args: argparse.Namespace, scales: Sequence[float], scheduled: bool, weight_decay: float = 0.0) -> None:
    """Print the gap grid over ``scales`` x beta1 x beta2 x gap, and its worst ratio to the shortest gap."""
    print(f"{'scale':>8} {'beta1':>7} {'beta2':>7} {'gap':>9} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7} {'/shortest':>9}")
    worst_gap = 0.0
    for scale, beta1, beta2 in itertools.product(scales, args.gap_beta1s, args.beta2s):
        shortest = None
        for gap in args.gaps:
            de, dd = gap_times(
                args, scale, gap, lambda t, mode: make_optimizer(t, mode, beta1, beta2, scheduled, weight_decay)
            )
            shortest = de if shortest is None else shortest
            worst_gap = max(worst_gap, de / shortest)
            print(
                f"{scale:>8.0e} {beta1:>7} {beta2:>7} {gap:>9} {de * 1e3:>9.2f} {dd * 1e3:>9.2f}"
                f" {de / dd:>7.2f} {de / shortest:>9.2f}",
                flush=True,
            )
    print(f"\nworst step after the longest gap / after the shortest: {worst_gap:.2f} (goal <= {GOAL_RATIO:g})")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    print("# DENSE_EQUIVALENT catch-up cost: ratios to DORMANCY_DECAY\n")
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    print(format_machine_info(machine_info()))
    table = f"{args.rows:,} x {args.cols} {args.dtype}, {args.batch} Zipf(1) ids a step, lr 1e-3, eps 1e-8"
    worst = 0.0
    if not args.skip_train:
        print(f"\n## Training steps (catch-up + step): {table}; {args.warmup} warm-up, {args.repeats} timed steps\n")
        print(f"{'scale':>8} {'beta1':>7} {'beta2':>7} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7}")
        for scale, beta1, beta2 in itertools.product(args.scales, args.beta1s, args.beta2s):
            de, dd, ratio = train_ratio(args, scale, beta1, beta2)
            worst = max(worst, ratio)
            print(f"{scale:>8.0e} {beta1:>7} {beta2:>7} {de * 1e3:>9.2f} {dd * 1e3:>9.2f} {ratio:>7.2f}", flush=True)
        print(f"\nworst DE/DD: {worst:.2f} (goal <= {GOAL_RATIO:g})")
    if not args.skip_gaps:
        print(
            f"\n## After a gap: one step touching {args.touched} warm rows, {args.gap_warmup} steps after the start"
            f" ({args.gap_repeats} repetitions, each a fresh optimizer loaded with the state)\n"
        )
        gap_grid(args, args.gap_scales, scheduled=False)
        if args.schedule_scales:
            print(f"\n## After a gap under a schedule ({SCHEDULE!r}), otherwise as above\n")
            gap_grid(args, args.schedule_scales, scheduled=True)
            if args.schedule_weight_decay:
                print(f"\n## The same as AdamW, weight_decay = {args.schedule_weight_decay:g}\n")
                gap_grid(args, args.schedule_scales, scheduled=True, weight_decay=args.schedule_weight_decay)
    if args.late_scales:
        print(f"\n## Late training: training steps from step {LATE_STEP:,}, row r last touched about r steps before\n")
        print(f"{'scale':>8} {'beta1':>7} {'beta2':>7} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7}")
        for scale, beta1, beta2 in itertools.product(args.late_scales, args.gap_beta1s, args.beta2s):
            de, dd, ratio = late_ratio(args, scale, beta1, beta2)
            print(f"{scale:>8.0e} {beta1:>7} {beta2:>7} {de * 1e3:>9.2f} {dd * 1e3:>9.2f} {ratio:>7.2f}", flush=True)
        if args.schedule_scales:
            print(f"\n## Late training under the schedule ({SCHEDULE!r}; Adam), otherwise as above\n")
            print(f"{'scale':>8} {'beta1':>7} {'beta2':>7} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7}")
            for scale, beta1, beta2 in itertools.product(args.late_scales, args.gap_beta1s, args.beta2s):
                de, dd, ratio = late_ratio(args, scale, beta1, beta2, scheduled=True)
                print(f"{scale:>8.0e} {beta1:>7} {beta2:>7} {de * 1e3:>9.2f} {dd * 1e3:>9.2f} {ratio:>7.2f}", flush=True)
            for name in ("step_decay", "exponential"):  # a drop just after LATE_STEP: every window crosses it
                print(f"\n## Late training under {EVERY_SCHEDULES[name]!r} (Adam), otherwise as above\n")
                print(f"{'scale':>8} {'beta1':>7} {'beta2':>7} {'DE ms':>9} {'DD ms':>9} {'DE/DD':>7}")
                for scale, beta1, beta2 in itertools.product(args.late_scales, args.gap_beta1s, args.beta2s):
                    de, dd, ratio = late_ratio(args, scale, beta1, beta2, scheduled=EVERY_SCHEDULES[name])
                    print(f"{scale:>8.0e} {beta1:>7} {beta2:>7} {de * 1e3:>9.2f} {dd * 1e3:>9.2f} {ratio:>7.2f}", flush=True)
        print("\n## Late training as SGD, momentum 0.9, gradient scale 1: DENSE_EQUIVALENT against LAZY\n")
        print(f"{'schedule':>14} {'wd':>5} {'DE ms':>9} {'LAZY ms':>9} {'DE/LAZY':>8}")
        for scheduled, weight_decay in itertools.product((False, True), (0.0, 0.01)):
            de, lazy, ratio = late_sgd_ratio(args, scheduled, weight_decay)
            name = "warmup_cosine" if scheduled else "constant"
            print(f"{name:>14} {weight_decay:>5g} {de * 1e3:>9.2f} {lazy * 1e3:>9.2f} {ratio:>8.2f}", flush=True)
    if args.late_weight_decay:
        late_adamw(args)
    if args.every_dtypes and not args.skip_gaps:
        print(f"\n## Every optimizer and schedule: the step after a gap, as in 2, at gradient scale {args.every_scale:g}\n")
        every_grid(args)
    print(f"\nload average after the run (1, 5, 15 min): {load_average()}")


if __name__ == "__main__":
    main()
