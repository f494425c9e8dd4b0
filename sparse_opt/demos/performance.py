"""What one optimizer step costs: time, allocations and state (notebook 07, ``benchmarks/``).

Every contender does the same work on every step: a batch of ``batch`` row ids,
drawn from a Zipf law over the table's rows (repeats included, as an embedding
lookup produces them), and one gradient row per id. The contender turns them
into its gradient -- :meth:`~sparse_opt.CsrGradient.from_rows` for
``sparse_opt`` (coalescing the repeats), an uncoalesced
``torch.sparse_coo_tensor`` for ``torch.optim.SparseAdam`` (which coalesces
inside its ``step``), a dense scatter-add for the dense optimizers -- and
steps. Both halves are timed together, so every contender pays for its own
coalescing.

A lazy optimizer's step should cost O(nnz), the number of gradient entries,
whatever the size of the table; a dense one costs O(table). :func:`time_steps`
times several ``(contender, workload)`` runs interleaved step by step (so a busy
moment of the machine hits them alike); :func:`rows_sweep` and
:func:`batch_sweep` use it over table sizes and batch sizes.
:func:`step_memory` and :func:`step_peaks_on_tables` measure the peak of what a
step allocates (with :mod:`tracemalloc`, which sees numpy's allocations but not
torch's), :func:`state_bytes_per_param` the state each parameter carries. The
``plot_*`` functions return a :class:`matplotlib.figure.Figure` (created
without pyplot).

Timings are only as good as the machine is quiet: :func:`machine_info` records
the CPU, library versions, thread settings and load average beside them.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import math
import os
import platform
import time
import tracemalloc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from matplotlib.figure import Figure

import sparse_opt
from sparse_opt._arrays import as_size
from sparse_opt.csr import CsrGradient
from sparse_opt.dense_adam import DenseAdam
from sparse_opt.demos.data import zipf_ids
from sparse_opt.modes import LazyAdamMode
from sparse_opt.sparse_adam import SparseAdamConfig, SparseAdamTable
from sparse_opt.sparse_sgd import SparseSgdConfig, SparseSgdTable

#: Environment variables that change how numpy, BLAS or torch run, reported by :func:`machine_info`.
THREAD_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Workload:
    """The work of one step: a ``rows x cols`` table and a batch of Zipf-distributed lookups.

    Attributes
    ----------
    rows, cols : int
        Shape of the embedding table.
    batch : int
        Row ids looked up per step (with repeats).
    skew : float
        Zipf exponent of the ids (:func:`~sparse_opt.demos.data.zipf_ids`); row
        ``k`` is the ``k``-th most popular.
    dtype : str
        ``"float32"`` or ``"float64"``: table, gradients and state.
    seed : int
        Seeds the table and the batches.
    """

    rows: int
    cols: int = 64
    batch: int = 4096
    skew: float = 1.0
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "batch", "seed"):
            as_size(name, getattr(self, name))
        if self.rows == 0:
            raise ValueError("rows must be positive")
        if np.dtype(self.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def itemsize(self) -> int:
        """Bytes per parameter value."""
        return np.dtype(self.dtype).itemsize

    @property
    def table_bytes(self) -> int:
        """Bytes of the parameter table."""
        return self.rows * self.cols * self.itemsize

    def table(self) -> np.ndarray:
        """A fresh table of small normal values (C-contiguous, ``dtype``), seeded by ``seed``."""
        table = np.random.default_rng([self.seed, 0]).standard_normal((self.rows, self.cols), dtype=self.dtype)
        table *= 0.01
        return table

    def batches(self, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``count`` lookups ``(ids, row_grads)``: int64 ids of shape ``(batch,)``, gradients ``(batch, cols)``.

        The same ``seed`` gives the same batches, whatever the contender.
        """
        count = as_size("count", count)
        rng = np.random.default_rng([self.seed, 1])
        ids = zipf_ids(self.rows, count * self.batch, self.skew, rng).reshape(count, self.batch)
        grads = rng.standard_normal((count, self.batch, self.cols), dtype=self.dtype)
        return [(ids[k], grads[k]) for k in range(count)]


def nnz_of(workload: Workload, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean number of entries of the coalesced gradients: distinct rows times ``cols``."""
    counts = [np.unique(ids).size * workload.cols for ids, _ in batches]
    return float(np.mean(counts)) if counts else 0.0


@dataclass
class Stepper:
    """One optimizer over one table, reduced to what a step needs.

    Attributes
    ----------
    gradient : callable
        ``gradient(ids, row_grads)`` builds the gradient object the optimizer
        takes (coalesced or not, as that library does it).
    apply : callable
        ``apply(gradient)`` takes one optimizer step with it.
    state_arrays : callable
        ``state_arrays()`` lists the per-parameter state (ndarrays or torch tensors).
    """

    gradient: Callable[[np.ndarray, np.ndarray], Any]
    apply: Callable[[Any], None]
    state_arrays: Callable[[], list[Any]]

    def step(self, ids: np.ndarray, row_grads: np.ndarray) -> None:
        """Build the gradient of one lookup and step: the unit every contender is timed on."""
        self.apply(self.gradient(ids, row_grads))

    def state_bytes(self) -> int:
        """Bytes the state arrays hold (:func:`held_bytes`)."""
        return sum(held_bytes(a) for a in self.state_arrays())


@dataclass(frozen=True)
class Contender:
    """A named optimizer set-up: ``make(table)`` returns a :class:`Stepper` updating ``table`` in place.

    Attributes
    ----------
    name : str
    library : str
        ``"sparse_opt"`` or ``"torch"``.
    dense : bool
        Whether a step costs O(table) (dense gradient and update).
    make : callable
    """

    name: str
    library: str
    dense: bool
    make: Callable[[np.ndarray], Stepper]


def _resident(arrays: Sequence[np.ndarray]) -> None:
    """Write every state array once, so the OS maps all its pages now.

    ``np.zeros`` returns lazily mapped memory: the first write to each page
    faults. Writing zeros over the zero state changes no value; it moves those
    page faults out of the timed steps, as torch's explicitly zero-filled state
    does. The timings are then those of a long run, where every page has been
    touched. Read-only arrays are views the optimizer derives from smaller
    storage (``SparseAdamTable.last_step``: one int64 per row, broadcast over
    the columns); their pages are mapped by the warm-up steps.
    """
    for a in arrays:
        if a.flags.writeable:
            a.fill(0)


def held_bytes(a: Any) -> int:
    """Bytes of memory ``a`` (an ndarray or a torch tensor) holds.

    A broadcast view repeats its data along the axes of stride 0; those are
    counted once, so ``SparseAdamTable.last_step`` (one int64 per row, seen as
    one per entry) counts 8 bytes per row.
    """
    if isinstance(a, np.ndarray):
        if a.size == 0:
            return 0
        return a.itemsize * math.prod(n for n, stride in zip(a.shape, a.strides) if stride != 0)
    return a.numel() * a.element_size()


def _sparse_opt_stepper(optimizer: Any, state: Callable[[], list[np.ndarray]]) -> Stepper:
    _resident(state())
    rows = optimizer.params.shape[0]
    return Stepper(lambda ids, g: CsrGradient.from_rows(ids, g, rows), optimizer.step, state)


def _adam(mode: LazyAdamMode) -> Callable[[np.ndarray], Stepper]:
    def make(table: np.ndarray) -> Stepper:
        opt = SparseAdamTable(table, SparseAdamConfig(mode=mode))
        return _sparse_opt_stepper(opt, lambda: [opt.m, opt.v, opt.last_step])

    return make


def _sgd(table: np.ndarray) -> Stepper:
    opt = SparseSgdTable(table, SparseSgdConfig(lr=0.01, momentum=0.9))
    return _sparse_opt_stepper(opt, lambda: [opt.momentum_buffer])


def _dense_adam(table: np.ndarray) -> Stepper:
    opt = DenseAdam(table)
    _resident([opt.m, opt.v])
    rows = table.shape[0]
    return Stepper(lambda ids, g: CsrGradient.from_rows(ids, g, rows).to_dense(), opt.step, lambda: [opt.m, opt.v])


def sparse_opt_contenders(dense: bool = True) -> list[Contender]:
    """``SparseAdamTable`` (both modes), ``SparseSgdTable`` (momentum 0.9) and, if ``dense``, ``DenseAdam``.

    Adam uses the defaults (lr 1e-3, betas 0.9 / 0.999, eps 1e-8), as the torch
    contenders do.
    """
    out = [
        Contender("SparseAdamTable LAZY", "sparse_opt", False, _adam(LazyAdamMode.LAZY)),
        Contender("SparseAdamTable DORMANCY_DECAY", "sparse_opt", False, _adam(LazyAdamMode.DORMANCY_DECAY)),
        Contender("SparseSgdTable momentum", "sparse_opt", False, _sgd),
    ]
    if dense:
        out.append(Contender("DenseAdam", "sparse_opt", True, _dense_adam))
    return out


def load_torch() -> ModuleType | None:
    """``torch`` if it can be imported here, else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    return importlib.import_module("torch")


def torch_contenders(dense: bool = True) -> list[Contender]:
    """``torch.optim.SparseAdam`` and, if ``dense``, ``torch.optim.Adam``; empty without torch.

    SparseAdam gets what ``nn.Embedding(sparse=True)`` produces: an uncoalesced
    ``sparse_coo_tensor`` with the looked-up ids (repeats included) as indices
    and one gradient row per lookup; its ``step`` coalesces it. Adam gets the
    dense gradient of ``nn.Embedding(sparse=False)``: the rows scatter-added
    (``index_add_``) into a zero table. Both run with torch's defaults (on CPU,
    Adam's single-tensor implementation) and its default number of threads.
    """
    torch = load_torch()
    if torch is None:
        return []

    def sparse_adam(table: np.ndarray) -> Stepper:
        weight = torch.nn.Parameter(torch.from_numpy(table))
        opt = torch.optim.SparseAdam([weight])
        shape = tuple(table.shape)

        def gradient(ids: np.ndarray, g: np.ndarray) -> Any:
            indices = torch.from_numpy(ids).unsqueeze(0)
            return torch.sparse_coo_tensor(indices, torch.from_numpy(g), shape, check_invariants=False)

        return Stepper(gradient, lambda grad: _torch_step(weight, opt, grad), lambda: _torch_state(opt))

    def adam(table: np.ndarray) -> Stepper:
        weight = torch.nn.Parameter(torch.from_numpy(table))
        opt = torch.optim.Adam([weight])

        def gradient(ids: np.ndarray, g: np.ndarray) -> Any:
            return torch.zeros_like(weight).index_add_(0, torch.from_numpy(ids), torch.from_numpy(g))

        return Stepper(gradient, lambda grad: _torch_step(weight, opt, grad), lambda: _torch_state(opt))

    out = [Contender("torch SparseAdam", "torch", False, sparse_adam)]
    if dense:
        out.append(Contender("torch Adam (dense)", "torch", True, adam))
    return out


def _torch_step(weight: Any, opt: Any, grad: Any) -> None:
    weight.grad = grad
    opt.step()


def _torch_state(opt: Any) -> list[Any]:
    return [t for state in opt.state.values() for t in state.values() if hasattr(t, "numel") and t.dim() > 0]


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
    """

    contender: str
    workload: Workload
    nnz: float
    seconds: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        """Median step time in milliseconds."""
        return 1e3 * float(np.median(self.seconds))

    @property
    def quartiles_ms(self) -> tuple[float, float]:
        """First and third quartiles of the step time, in milliseconds."""
        q1, q3 = np.percentile(self.seconds, [25, 75])
        return 1e3 * float(q1), 1e3 * float(q3)


def time_steps(
    runs: Sequence[tuple[Contender, Workload]],
    repeats: int = 50,
    warmup: int = 10,
    num_batches: int = 16,
) -> list[StepTiming]:
    """Time ``repeats`` steps of each ``(contender, workload)`` run, interleaved step by step.

    Every run gets a fresh table and optimizer and ``warmup`` untimed steps;
    then the runs take turns, one step each, starting from a different run on
    every round, so that a slow spell of the machine hits all of them alike
    and their ratios stay meaningful. All the runs' tables are alive at once:
    mind the memory. Steps cycle through ``num_batches`` batches of each
    workload. Before each timed step the batch is copied into the same two
    buffers, so its ids and row gradients are in cache, as a gradient just
    produced by a backward pass is (the table and the optimizer state are not).
    Each timed interval covers building the gradient from ``(ids, row_grads)``
    and the step (:meth:`Stepper.step`). The garbage collector is run before
    and disabled during the timed steps.
    """
    repeats, warmup = as_size("repeats", repeats), as_size("warmup", warmup)
    if as_size("num_batches", num_batches) == 0:
        raise ValueError("num_batches must be positive")
    prepared = []
    for contender, workload in runs:
        batches = workload.batches(num_batches)
        stepper = contender.make(workload.table())
        for k in range(warmup):
            stepper.step(*batches[k % num_batches])
        prepared.append((stepper, batches, np.empty_like(batches[0][0]), np.empty_like(batches[0][1])))
    seconds: list[list[float]] = [[] for _ in prepared]
    gc.collect()
    gc.disable()
    try:
        for k in range(repeats):
            b = (warmup + k) % num_batches
            for j in [(k + i) % len(prepared) for i in range(len(prepared))]:
                stepper, batches, ids_now, grads_now = prepared[j]
                np.copyto(ids_now, batches[b][0])
                np.copyto(grads_now, batches[b][1])
                start = time.perf_counter()
                stepper.step(ids_now, grads_now)
                seconds[j].append(time.perf_counter() - start)
    finally:
        gc.enable()
    used = [(warmup + k) % num_batches for k in range(repeats)]
    out = [
        StepTiming(contender.name, workload, nnz_of(workload, [batches[b] for b in used]), tuple(sec))
        for (contender, workload), (_, batches, _, _), sec in zip(runs, prepared, seconds)
    ]
    del prepared
    gc.collect()
    return out


def rows_workloads(base: Workload, rows: Iterable[int]) -> list[Workload]:
    """``base`` with each of the table sizes ``rows`` (same batch, cols, skew, seed)."""
    return [replace(base, rows=r) for r in rows]


def batch_workloads(base: Workload, batches: Iterable[int]) -> list[Workload]:
    """``base`` with each of the batch sizes ``batches`` (same table)."""
    return [replace(base, batch=b) for b in batches]


def rows_sweep(
    contenders: Sequence[Contender], base: Workload, rows: Sequence[int], repeats: int = 50, warmup: int = 10
) -> list[StepTiming]:
    """Each contender on tables of each size in ``rows`` at ``base``'s batch, its sizes interleaved.

    Interleaving one contender's table sizes makes the ratio between sizes
    robust (the flatness of a lazy step); the contenders run one after the
    other, so only one contender's tables are in memory at a time.
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


#: Steps :func:`step_memory` and :func:`step_peaks_on_tables` trace per number
#: (the same gradient each time; the smallest peak counts, see :func:`measure_peak`).
PEAK_REPEATS = 3


def measure_peak(fn: Callable[[], object], repeats: int = 1) -> int:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before, per :mod:`tracemalloc`.

    tracemalloc sees numpy's array buffers and Python objects, not memory that
    other libraries (torch) allocate themselves. Tracing is started and
    stopped here unless it was already running. The cyclic garbage collector
    runs first and is paused while ``fn`` runs: otherwise it frees earlier
    garbage at a moment that varies from call to call.

    Small blocks can still differ by some hundreds of bytes between calls:
    numpy caches freed dimension/stride blocks and Python keeps freed tuples,
    floats and frames on free lists, and tracemalloc counts those as allocated
    by whoever allocated them first (a full collection empties Python's free
    lists, not numpy's cache). Array buffers are counted exactly.

    tracemalloc counts every thread's allocations. Where other threads run
    Python code (a Jupyter kernel's), they can add to one measurement; with
    ``repeats`` > 1, ``fn`` runs that many times and the smallest peak is
    returned (others' allocations only ever add), so ``fn`` must allocate the
    same on every call.
    """
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        peaks = []
        for _ in range(max(repeats, 1)):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            fn()
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
        return min(peaks)
    finally:
        if was_enabled:
            gc.enable()
        if started:
            tracemalloc.stop()


@dataclass(frozen=True)
class StepMemory:
    """What one ``sparse_opt`` step allocates, against the size of its gradient and table.

    Attributes
    ----------
    contender : str
    workload : Workload
    nnz : int
        Entries of the (coalesced) gradient.
    step_peak : int
        Peak bytes allocated inside ``optimizer.step(grad)``, the gradient built beforehand.
    total_peak : int
        Peak bytes allocated by ``from_rows`` and the step together.
    state_bytes : int
        Bytes of the optimizer's per-parameter state.
    """

    contender: str
    workload: Workload
    nnz: int
    step_peak: int
    total_peak: int
    state_bytes: int

    @property
    def grad_bytes(self) -> int:
        """``nnz * itemsize``: the bytes of the gradient's values."""
        return self.nnz * self.workload.itemsize

    @property
    def step_ratio(self) -> float:
        """``step_peak / grad_bytes`` (0 for an empty gradient)."""
        return self.step_peak / self.grad_bytes if self.nnz else 0.0

    @property
    def total_ratio(self) -> float:
        """``total_peak / grad_bytes`` (0 for an empty gradient)."""
        return self.total_peak / self.grad_bytes if self.nnz else 0.0

    @property
    def state_bytes_per_param(self) -> float:
        """State bytes per parameter of the table."""
        return self.state_bytes / (self.workload.rows * self.workload.cols)


def step_memory(contender: Contender, workload: Workload, warmup: int = 3) -> StepMemory:
    """Measure one step of a ``sparse_opt`` contender with :func:`measure_peak`.

    The table, optimizer and gradient are allocated before tracing starts;
    ``warmup`` steps run first, so the measured step is an ordinary one (the
    smallest peak of :data:`PEAK_REPEATS` steps with the same gradient).
    Deterministic for a given workload (the allocations do not depend on timing).
    """
    if contender.library != "sparse_opt":
        raise ValueError(f"{contender.name}: tracemalloc only sees numpy's allocations, not {contender.library}'s")
    batches = workload.batches(warmup + 1)
    stepper = contender.make(workload.table())
    for ids, grads in batches[:warmup]:
        stepper.step(ids, grads)
    ids, grads = batches[warmup]
    grad = stepper.gradient(ids, grads)
    step_peak = measure_peak(lambda: stepper.apply(grad), PEAK_REPEATS)
    total_peak = measure_peak(lambda: stepper.step(ids, grads), PEAK_REPEATS)
    nnz = np.unique(ids).size * workload.cols
    return StepMemory(contender.name, workload, nnz, step_peak, total_peak, stepper.state_bytes())


def step_peaks_on_tables(contender: Contender, workload: Workload, rows: Sequence[int]) -> list[int]:
    """Peak bytes one step allocates, with the same gradient, on tables of each size in ``rows``.

    The gradient is that of ``workload``'s first batch (its ids are valid in
    any table of at least ``workload.rows`` rows), taken once untraced to create
    any lazily created state, then :data:`PEAK_REPEATS` times traced with
    :func:`measure_peak` (the gradient built beforehand). For a lazy optimizer all the peaks are equal;
    for a dense one they grow with the table.
    """
    ids, grads = workload.batches(1)[0]
    peaks = []
    for r in rows:
        if r < workload.rows:
            raise ValueError(f"rows {r} < workload.rows = {workload.rows}: the batch's ids would not fit")
        stepper = contender.make(replace(workload, rows=r).table())
        stepper.step(ids, grads)
        grad = stepper.gradient(ids, grads)
        peaks.append(measure_peak(partial(stepper.apply, grad), PEAK_REPEATS))
        del stepper, grad  # free this table before the next one is allocated
    return peaks


def state_bytes_per_param(contender: Contender, rows: int = 8, cols: int = 64, dtype: str = "float32") -> float:
    """Bytes of optimizer state per parameter (:func:`held_bytes`), measured on a small table after one step.

    ``cols`` matters where state is kept per row (``SparseAdamTable``'s
    ``last_step``: 8 bytes per row, ``8 / cols`` per parameter).

    Works for torch contenders too (their state tensors are created by the first step).
    """
    workload = Workload(rows, cols, batch=rows, dtype=dtype)
    stepper = contender.make(workload.table())
    stepper.step(*workload.batches(1)[0])
    return stepper.state_bytes() / (rows * cols)


def machine_info() -> dict[str, str]:
    """Where timings came from: CPU, cores, versions, thread settings, load average."""
    info = {
        "cpu": _cpu_model(),
        "logical cpus": str(os.cpu_count()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sparse_opt": sparse_opt.__version__,
    }
    torch = load_torch()
    if torch is None:
        info["torch"] = "not installed"
    else:
        info["torch"] = f"{torch.__version__} ({torch.get_num_threads()} intra-op threads)"
    for name in THREAD_VARIABLES:
        info[name] = os.environ.get(name, "unset")
    info["load average (1, 5, 15 min)"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def format_machine_info(info: dict[str, str]) -> str:
    """``key : value`` lines, aligned."""
    width = max(map(len, info))
    return "\n".join(f"{k:<{width}} : {v}" for k, v in info.items())


def format_timings(timings: Sequence[StepTiming], reference: str | None = "torch SparseAdam") -> str:
    """A text table, one row per timing: workload, nnz, median and quartiles, ratio to ``reference``.

    The ratio column (``reference`` time / this time, so above 1 means faster
    than the reference) compares timings on the same workload; it is left out
    when no timing of ``reference`` is present.
    """
    ref = {t.workload: t.median_ms for t in timings if t.contender == reference}
    name_width = max([len(t.contender) for t in timings] + [9])
    head = f"{'optimizer':<{name_width}}  {'rows':>10}  {'batch':>6}  {'nnz':>9}  {'median ms':>10}  {'q1-q3 ms':>17}"
    if ref:
        head += f"  {'speed-up vs ' + reference:>28}"
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


def format_memory(points: Sequence[StepMemory]) -> str:
    """A text table of :class:`StepMemory` results (integers and fixed decimals only)."""
    name_width = max([len(p.contender) for p in points] + [9])
    head = (
        f"{'optimizer':<{name_width}}  {'rows':>10}  {'batch':>6}  {'nnz':>9}  {'nnz bytes':>10}"
        f"  {'step peak':>10}  {'/ nnz B':>7}  {'+from_rows':>10}  {'/ nnz B':>7}  {'table bytes':>13}  {'state B/param':>13}"
    )
    lines = [head, "-" * len(head)]
    for p in points:
        lines.append(
            f"{p.contender:<{name_width}}  {p.workload.rows:>10,}  {p.workload.batch:>6}  {p.nnz:>9,}  {p.grad_bytes:>10,}"
            f"  {p.step_peak:>10,}  {p.step_ratio:>7.2f}  {p.total_peak:>10,}  {p.total_ratio:>7.2f}"
            f"  {p.workload.table_bytes:>13,}  {p.state_bytes_per_param:>13.3f}"
        )
    return "\n".join(lines)


def _by_contender(timings: Sequence[StepTiming]) -> dict[str, list[StepTiming]]:
    out: dict[str, list[StepTiming]] = {}
    for t in timings:
        out.setdefault(t.contender, []).append(t)
    return out


def _plot_timings(
    timings: Sequence[StepTiming], x_of: Callable[[StepTiming], float], xlabel: str, title: str
) -> tuple[Figure, Any, dict[str, list[StepTiming]]]:
    """Log-log median step time against ``x_of(timing)``, one line per contender (torch dashed)."""
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    groups = {name: sorted(ts, key=x_of) for name, ts in _by_contender(timings).items()}
    for name, ts in groups.items():
        ax.plot([x_of(t) for t in ts], [t.median_ms for t in ts], "o-" if "torch" not in name else "s--", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("median step time (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax, groups


def plot_rows_sweep(timings: Sequence[StepTiming], title: str | None = None) -> Figure:
    """Median step time against table rows (log-log), one line per contender.

    A lazy step that is O(nnz) draws a flat line; a dense one climbs with the table.
    """
    batch = sorted({t.workload.batch for t in timings})
    default = f"fixed batch ({', '.join(map(str, batch))} lookups): time against table size"
    fig, ax, _ = _plot_timings(timings, lambda t: t.workload.rows, "table rows", title or default)
    ax.legend(fontsize="small")
    return fig


def plot_batch_sweep(timings: Sequence[StepTiming], title: str | None = None) -> Figure:
    """Median step time against gradient entries (nnz, log-log), one line per contender.

    A dotted line of slope 1 through the first point of the first contender
    shows what "proportional to nnz" looks like.
    """
    rows = sorted({t.workload.rows for t in timings})
    default = f"fixed table ({', '.join(f'{r:,}' for r in rows)} rows): time against batch"
    xlabel = "gradient entries per step (nnz = distinct rows x cols)"
    fig, ax, groups = _plot_timings(timings, lambda t: t.nnz, xlabel, title or default)
    if groups:
        first = next(iter(groups.values()))
        x = np.array([first[0].nnz, first[-1].nnz])
        ax.plot(x, first[0].median_ms * x / x[0], ":", color="grey", label="proportional to nnz")
    ax.legend(fontsize="small")
    return fig


def plot_memory(points: Sequence[StepMemory]) -> Figure:
    """Peak allocation of a step against the gradient's bytes (log-log), with the table's size for scale."""
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    groups: dict[str, list[StepMemory]] = {}
    for p in points:
        groups.setdefault(p.contender, []).append(p)
    for name, ps in groups.items():
        ps = sorted(ps, key=lambda p: p.grad_bytes)
        ax.plot([p.grad_bytes for p in ps], [p.step_peak for p in ps], "o-", label=name)
    tables = sorted({p.workload.table_bytes for p in points})
    for b in tables:
        ax.axhline(b, color="black", linestyle="--", linewidth=1)
        ax.annotate(f"table: {b / 2**20:,.0f} MiB", (0.02, b), xycoords=("axes fraction", "data"), va="bottom", fontsize="small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gradient values (nnz x itemsize), bytes")
    ax.set_ylabel("peak bytes allocated in step")
    ax.set_title("what a step allocates grows with nnz, not with the table")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return fig
