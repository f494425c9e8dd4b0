"""Wall-clock time of optimizer steps, taken interleaved so that ratios between contenders mean something.

A lazy optimizer's step should cost O(nnz), the number of gradient entries,
whatever the size of the table; a dense one costs O(table). :func:`time_steps`
times several ``(contender, workload)`` runs interleaved step by step, so a busy
moment of the machine hits them alike; :func:`rows_sweep` and
:func:`batch_sweep` use it over table sizes and batch sizes, and
:func:`speedup` reads a ratio off one interleaved run. :func:`time_catch_up`
times ``DENSE_EQUIVALENT``'s catch-up of dormant rows against the length of
their dormancy, and :func:`time_full_catch_up` the ``catch_up()`` of a whole
table, as before an export.

Timings are only as good as the machine is quiet; they are never asserted in
a test (``benchmarks/bench_sparse_step.py`` records the machine beside them).

Needs numpy only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sparse_opt._arrays import as_size
from sparse_opt.csr import CsrGradient
from sparse_opt.demos.contenders import Contender
from sparse_opt.demos.workload import Workload, batch_workloads, nnz_of, rows_workloads
from sparse_opt.modes import LazyMode
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable


@dataclass(frozen=True)
class StepTiming:
    """Wall-clock seconds of the measured steps of one contender on one workload.

    Attributes
    ----------
    contender : str
    workload : Workload
    nnz : float
        Mean entries of the coalesced gradients of the measured steps.
    seconds : tuple of float
        One per measured step (gradient built and step taken).
    dense : bool
        Whether the contender's step costs O(table).
    """

    contender: str
    workload: Workload
    nnz: float
    seconds: tuple[float, ...]
    dense: bool = False

    @property
    def median_ms(self) -> float:
        """Median step time in milliseconds."""
        return 1e3 * float(np.median(self.seconds))

    @property
    def quartiles_ms(self) -> tuple[float, float]:
        """First and third quartiles of the step time, in milliseconds."""
        q1, q3 = np.percentile(self.seconds, [25, 75])
        return 1e3 * float(q1), 1e3 * float(q3)

    @property
    def us_per_1000_entries(self) -> float:
        """Median step time per 1000 entries of the gradient, in microseconds (the median over the mean ``nnz``)."""
        return 1e9 * float(np.median(self.seconds)) / self.nnz


def spread_rounds(count: int, rounds: int) -> list[int]:
    """``count`` of the rounds ``0 .. rounds - 1``, evenly spread (the middle of ``count`` equal stretches).

    Examples
    --------
    >>> spread_rounds(3, 12), spread_rounds(4, 4), spread_rounds(0, 5)
    ([2, 6, 10], [0, 1, 2, 3], [])
    """
    if not 0 <= count <= rounds:
        raise ValueError(f"count must be in 0 .. rounds = {rounds}, got {count}")
    return [(2 * j + 1) * rounds // (2 * count) for j in range(count)]


def time_steps(
    runs: Sequence[tuple[Contender, Workload]],
    repeats: int = 50,
    warmup: int = 10,
    num_batches: int = 16,
    dense_repeats: int | None = None,
    dense_warmup: int | None = None,
) -> list[StepTiming]:
    """Time the steps of each ``(contender, workload)`` run, all runs interleaved step by step.

    Every run gets a fresh table and optimizer and its warm-up steps, untimed;
    then ``repeats`` rounds follow. In each round every run takes one timed
    step, the first run of the round moving on by one each round, so that a
    slow spell of the machine hits all of them alike and their ratios stay
    meaningful. A dense contender's step costs O(table): given
    ``dense_repeats`` (at most ``repeats``), the dense runs take that many
    timed steps instead, on rounds spread evenly over the run
    (:func:`spread_rounds`), after ``dense_warmup`` warm-up steps (default:
    ``warmup``).

    All the runs' tables are alive at once: mind the memory. Each run cycles
    through ``num_batches`` batches of its workload. Before each timed step
    the batch is copied into the same two buffers, so its ids and row
    gradients are in cache, as a gradient just produced by a backward pass is
    (the table and the optimizer state are not). Each timed interval covers
    building the gradient from ``(ids, row_grads)`` and the step
    (:meth:`~sparse_opt.demos.contenders.Stepper.step`). The garbage collector
    is run before and disabled during the timed steps. Returns one
    :class:`StepTiming` per run, in the order of ``runs``.
    """
    repeats, warmup = as_size("repeats", repeats), as_size("warmup", warmup)
    if as_size("num_batches", num_batches) == 0:
        raise ValueError("num_batches must be positive")
    dense_repeats = repeats if dense_repeats is None else as_size("dense_repeats", dense_repeats)
    dense_warmup = warmup if dense_warmup is None else as_size("dense_warmup", dense_warmup)
    dense_plan = set(spread_rounds(dense_repeats, repeats))
    prepared = []
    for contender, workload in runs:
        batches = workload.batches(num_batches)
        stepper = contender.make(workload.table())
        first = dense_warmup if contender.dense else warmup
        for k in range(first):
            stepper.step(*batches[k % num_batches])
        prepared.append((stepper, batches, np.empty_like(batches[0][0]), np.empty_like(batches[0][1])))
    used: list[list[int]] = [[] for _ in prepared]
    seconds: list[list[float]] = [[] for _ in prepared]
    first_batch = [dense_warmup if c.dense else warmup for c, _ in runs]
    gc.collect()
    gc.disable()
    try:
        for k in range(repeats):
            for j in [(k + i) % len(prepared) for i in range(len(prepared))]:
                if runs[j][0].dense and k not in dense_plan:
                    continue
                stepper, batches, ids_now, grads_now = prepared[j]
                b = (first_batch[j] + len(used[j])) % num_batches
                np.copyto(ids_now, batches[b][0])
                np.copyto(grads_now, batches[b][1])
                start = time.perf_counter()
                stepper.step(ids_now, grads_now)
                seconds[j].append(time.perf_counter() - start)
                used[j].append(b)
    finally:
        gc.enable()
    out = [
        StepTiming(contender.name, workload, nnz_of(workload, [batches[b] for b in steps]), tuple(sec), contender.dense)
        for (contender, workload), (_, batches, _, _), steps, sec in zip(runs, prepared, used, seconds)
    ]
    del prepared
    gc.collect()
    return out


def rows_sweep(
    contenders: Sequence[Contender], base: Workload, rows: Sequence[int], repeats: int = 50, warmup: int = 10
) -> list[StepTiming]:
    """Each contender on tables of each size in ``rows`` at ``base``'s batch, its sizes interleaved.

    Interleaving one contender's table sizes makes the ratio between sizes
    robust (the flatness of a lazy step); the contenders run one after the
    other, so only one contender's tables are in memory at a time, and ratios
    *between contenders* come from different runs.
    """
    out = []
    for contender in contenders:
        out += time_steps([(contender, w) for w in rows_workloads(base, rows)], repeats, warmup)
    return out


def batch_sweep(
    contenders: Sequence[Contender], base: Workload, batches: Sequence[int], repeats: int = 50, warmup: int = 10
) -> list[StepTiming]:
    """All contenders at each batch size in ``batches`` on ``base``'s table, interleaved per batch size."""
    out = []
    for workload in batch_workloads(base, batches):
        out += time_steps([(c, workload) for c in contenders], repeats, warmup)
    return out


def speedup(timings: Iterable[StepTiming], contender: str, reference: str, workload: Workload | None = None) -> float:
    """How many times faster ``contender`` steps than ``reference``: the reference's median over the contender's.

    Both are read off the same workload (``workload``, or the only one they
    share); below 1, the contender is slower. Take both from one
    :func:`time_steps` run, so that the ratio is the machine's state for both.

    Examples
    --------
    >>> w = Workload(rows=10)
    >>> speedup([StepTiming("a", w, 1.0, (0.001,)), StepTiming("b", w, 1.0, (0.003,))], "a", "b")
    3.0
    """
    medians: dict[tuple[str, Workload], float] = {(t.contender, t.workload): t.median_ms for t in timings}
    if workload is None:
        shared = {w for n, w in medians if n == contender} & {w for n, w in medians if n == reference}
        if len(shared) != 1:
            raise ValueError(f"{contender!r} and {reference!r} share {len(shared)} workloads; pass workload=")
        (workload,) = shared
    for name in (contender, reference):
        if (name, workload) not in medians:
            raise KeyError(f"no timing of {name!r} on {workload}")
    return medians[reference, workload] / medians[contender, workload]


def format_timings(timings: Sequence[StepTiming], reference: str | None = None) -> str:
    """A text table, one row per timing: workload, nnz, median and quartiles, ratio to ``reference``.

    The ratio column (``reference`` time / this time, so above 1 means faster
    than the reference) compares timings on the same workload; it is left out
    when ``reference`` is None or has no timing here.
    """
    ref = {t.workload: t.median_ms for t in timings if t.contender == reference}
    name_width = max([len(t.contender) for t in timings] + [9])
    head = f"{'optimizer':<{name_width}}  {'rows':>10}  {'batch':>6}  {'nnz':>9}  {'median ms':>10}  {'q1-q3 ms':>17}"
    if ref:
        head += f"  {'speed-up vs ' + str(reference):>28}"
    lines = [head, "-" * len(head)]
    for t in timings:
        q1, q3 = t.quartiles_ms
        line = (
            f"{t.contender:<{name_width}}  {t.workload.rows:>10,}  {t.workload.batch:>6}  {t.nnz:>9,.0f}"
            f"  {t.median_ms:>10.3f}  {q1:>8.3f}-{q3:<8.3f}"
        )
        if ref:
            base = ref.get(t.workload)
            line += f"  {base / t.median_ms:>27.2f}x" if base is not None else f"  {'':>28}"
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True)
class CatchUpTiming:
    """Wall-clock seconds of ``DENSE_EQUIVALENT`` catch-ups of ``rows`` rows dormant for ``gap`` steps.

    Attributes
    ----------
    gap : int
        Dormant steps each caught-up row had.
    rows, cols : int
        Rows brought current per timed call, and their width.
    seconds : tuple of float
        One per timed ``catch_up`` call.
    """

    gap: int
    rows: int
    cols: int
    seconds: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        """Median time of one catch-up call, in milliseconds."""
        return 1e3 * float(np.median(self.seconds))

    @property
    def ns_per_entry(self) -> float:
        """Median time per caught-up entry (row x column), in nanoseconds."""
        return 1e9 * float(np.median(self.seconds)) / (self.rows * self.cols)


def time_catch_up(
    gaps: Sequence[int],
    rows: int = 1024,
    cols: int = 16,
    repeats: int = 20,
    warmup: int = 2,
    dtype: str = "float32",
    seed: int = 0,
) -> list[CatchUpTiming]:
    """Time ``SparseAdamTable(mode=DENSE_EQUIVALENT).catch_up`` of ``rows`` rows against their dormancy ``gap``.

    For each gap, a table of ``(warmup + repeats) * rows`` rows (Adam's
    defaults) takes one step touching every row with a seeded normal
    gradient, then ``gap`` empty steps (taken by loading its state with the
    step count ``1 + gap``: an empty step changes nothing else); its rows are then brought current one
    block of ``rows`` rows at a time, each block dormant for exactly ``gap``
    steps. Blocks of the different gaps take turns (interleaved, as in
    :func:`time_steps`); the first ``warmup`` blocks of each gap are untimed
    (they fill the caches of weights that the catch-up keeps per global step).
    What the catch-up costs per entry should not depend on the gap.
    """
    rows, cols, repeats, warmup = (as_size(n, x) for n, x in (("rows", rows), ("cols", cols), ("repeats", repeats), ("warmup", warmup)))
    if rows == 0 or cols == 0:
        raise ValueError("rows and cols must be positive")
    gaps = [as_size("gap", g) for g in gaps]
    if any(g == 0 for g in gaps):
        raise ValueError("every gap must be positive")
    blocks = warmup + repeats
    total = blocks * rows
    rng = np.random.default_rng(seed)
    every_row = CsrGradient.from_rows(np.arange(total), rng.standard_normal((total, cols), dtype=dtype), total)
    optimizers = []
    for gap in gaps:
        opt = SparseAdamTable(np.zeros((total, cols), dtype), SparseAdamConfig(mode=LazyMode.DENSE_EQUIVALENT))
        opt.step(every_row)
        dormant = opt.state_dict()  # ``gap`` empty steps change nothing but the step count: skip to it
        dormant["step_count"] = np.int64(1 + gap)
        opt.load_state_dict(dormant)
        for b in range(warmup):
            opt.catch_up(np.arange(b * rows, (b + 1) * rows))
        optimizers.append(opt)
    seconds: list[list[float]] = [[] for _ in gaps]
    gc.collect()
    gc.disable()
    try:
        for k in range(repeats):
            ids = np.arange((warmup + k) * rows, (warmup + k + 1) * rows)
            for j in [(k + i) % len(gaps) for i in range(len(gaps))]:
                start = time.perf_counter()
                optimizers[j].catch_up(ids)
                seconds[j].append(time.perf_counter() - start)
    finally:
        gc.enable()
    return [CatchUpTiming(gap, rows, cols, tuple(sec)) for gap, sec in zip(gaps, seconds)]


def time_full_catch_up(
    gaps: Sequence[int], rows: int, cols: int, repeats: int = 3, dtype: str = "float32", seed: int = 0
) -> list[CatchUpTiming]:
    """Time ``SparseAdamTable(mode=DENSE_EQUIVALENT).catch_up()`` of a whole ``rows x cols`` table, for each gap.

    As before an export: for each gap, a table (Adam's defaults) takes one step
    touching every row with a seeded normal gradient, then ``gap`` empty steps
    (its step count is moved on by loading its state: an empty step changes
    nothing else), so every row has been dormant ``gap`` steps; then
    ``catch_up()`` brings all of it current. Each of the ``repeats`` timed
    calls starts from the same dormant table and state (restored untimed);
    the gaps take turns. The first catch-up of each gap is untimed: it fills
    the caches of weights the catch-up keeps per global step. One table at a
    time is dormant, so about five times its bytes are in memory per gap
    (parameters, ``m``, ``v`` and a copy of each to restore).
    """
    rows, cols, repeats = as_size("rows", rows), as_size("cols", cols), as_size("repeats", repeats)
    if rows == 0 or cols == 0 or repeats == 0:
        raise ValueError("rows, cols and repeats must be positive")
    gaps = [as_size("gap", g) for g in gaps]
    if any(g == 0 for g in gaps):
        raise ValueError("every gap must be positive")
    rng = np.random.default_rng(seed)
    every_row = CsrGradient.from_rows(np.arange(rows), rng.standard_normal((rows, cols), dtype=dtype), rows)
    runs = []
    for gap in gaps:
        table = np.zeros((rows, cols), dtype)
        opt = SparseAdamTable(table, SparseAdamConfig(mode=LazyMode.DENSE_EQUIVALENT))
        opt.step(every_row)
        dormant = opt.state_dict()
        dormant["step_count"] = np.int64(1 + gap)
        opt.load_state_dict(dormant)
        start = table.copy()
        opt.catch_up()  # untimed: fills the weight caches
        runs.append((opt, table, start, dormant))
    seconds: list[list[float]] = [[] for _ in gaps]
    for k in range(repeats):
        for j in [(k + i) % len(gaps) for i in range(len(gaps))]:
            opt, table, start, dormant = runs[j]
            np.copyto(table, start)
            opt.load_state_dict(dormant)
            gc.collect()
            gc.disable()
            try:
                begin = time.perf_counter()
                opt.catch_up()
                seconds[j].append(time.perf_counter() - begin)
            finally:
                gc.enable()
    return [CatchUpTiming(gap, rows, cols, tuple(sec)) for gap, sec in zip(gaps, seconds)]
