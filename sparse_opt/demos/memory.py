"""What one optimizer step allocates, and what an optimizer keeps, in bytes (:mod:`tracemalloc`).

:func:`measure_peak` is the measuring instrument: the peak of what a function
allocates, above what was allocated before. :func:`step_memory` and
:func:`step_peaks_on_tables` apply it to one step of a ``sparse_opt``
contender (the gradient built beforehand, or built inside), against the size of
its gradient and of its table; :func:`state_bytes_per_param` counts the state
arrays an optimizer carries per parameter, and :func:`kept_bytes` everything it
keeps allocated (state arrays and any caches). :func:`in_fresh_process` runs
any of them in a new interpreter, where nothing else allocates: there the
byte counts repeat exactly from run to run.

tracemalloc sees numpy's array buffers and Python objects, not memory that
other libraries (torch) allocate themselves: only :func:`state_bytes_per_param`
(which sizes the state tensors) works for the torch contenders.

Needs numpy only.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from sparse_opt.demos.contenders import Contender, Stepper
from sparse_opt.demos.workload import Workload

#: Steps :func:`step_memory` and :func:`step_peaks_on_tables` trace per number
#: (the same gradient each time; the smallest peak counts, see :func:`measure_peak`).
PEAK_REPEATS = 3

#: Bytes two measurements of the same step may differ by: numpy's cache of
#: small dimension/stride blocks and Python's free lists keep freed blocks that
#: tracemalloc still counts (see :func:`measure_peak`). Array buffers add up exactly.
BOOKKEEPING_BYTES = 1024


def measure_peak(fn: Callable[[], object], repeats: int = 1) -> int:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before, per :mod:`tracemalloc`.

    tracemalloc sees numpy's array buffers and Python objects, not memory that
    other libraries (torch) allocate themselves. Tracing is started and
    stopped here unless it was already running. The cyclic garbage collector
    runs once first and is paused while ``fn`` runs: otherwise it frees
    earlier garbage at a moment that varies from call to call.

    Small blocks can still differ by some hundreds of bytes between calls
    (:data:`BOOKKEEPING_BYTES`): numpy caches freed dimension/stride blocks and
    Python keeps freed tuples, floats and frames on free lists, and tracemalloc
    counts those as allocated by whoever allocated them first (a full
    collection empties Python's free lists, not numpy's cache). Array buffers
    are counted exactly.

    tracemalloc counts every thread's allocations. Where other threads run
    Python code (a Jupyter kernel's), they can add to one measurement; with
    ``repeats`` > 1, ``fn`` runs that many times and the smallest peak is
    returned (others' allocations only ever add), so ``fn`` must allocate the
    same on every call.

    Examples
    --------
    >>> 8_000_000 <= measure_peak(lambda: np.ones(1_000_000)) < 8_100_000
    True
    """
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()  # before tracing starts: a full collection under tracemalloc is slow
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        peaks = []
        for _ in range(max(repeats, 1)):
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


def held_bytes(a: Any) -> int:
    """Bytes of memory ``a`` (an ndarray or a torch tensor) holds.

    A broadcast view repeats its data along the axes of stride 0; those are
    counted once, so ``SparseAdamTable.last_step`` (one int64 per row, seen as
    one per entry) counts 8 bytes per row.

    Examples
    --------
    >>> held_bytes(np.zeros((5, 3))), held_bytes(np.broadcast_to(np.arange(5)[:, None], (5, 64)))
    (120, 40)
    """
    if isinstance(a, np.ndarray):
        if a.size == 0:
            return 0
        return a.itemsize * math.prod(n for n, stride in zip(a.shape, a.strides) if stride != 0)
    return a.numel() * a.element_size()


def state_bytes(stepper: Stepper) -> int:
    """Bytes the stepper's state arrays hold (:func:`held_bytes`)."""
    return sum(held_bytes(a) for a in stepper.state_arrays())


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
    dense : bool
        Whether the contender's step costs O(table).
    """

    contender: str
    workload: Workload
    nnz: int
    step_peak: int
    total_peak: int
    state_bytes: int
    dense: bool = False

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


def _numpy_only(contender: Contender) -> None:
    if contender.library != "sparse_opt":
        raise ValueError(f"{contender.name}: tracemalloc only sees numpy's allocations, not {contender.library}'s")


def step_memory(contender: Contender, workload: Workload, warmup: int = 3) -> StepMemory:
    """Measure one step of a ``sparse_opt`` contender with :func:`measure_peak`.

    The table, optimizer and gradient are allocated before tracing starts;
    ``warmup`` steps run first, so the measured step is an ordinary one (the
    smallest peak of :data:`PEAK_REPEATS` steps with the same gradient).
    Deterministic for a given workload up to :data:`BOOKKEEPING_BYTES` (the
    allocations do not depend on timing).
    """
    _numpy_only(contender)
    batches = workload.batches(warmup + 1)
    stepper = contender.make(workload.table())
    for ids, grads in batches[:warmup]:
        stepper.step(ids, grads)
    ids, grads = batches[warmup]
    grad = stepper.gradient(ids, grads)
    step_peak = measure_peak(lambda: stepper.apply(grad), PEAK_REPEATS)
    total_peak = measure_peak(lambda: stepper.step(ids, grads), PEAK_REPEATS)
    nnz = np.unique(ids).size * workload.cols
    return StepMemory(contender.name, workload, nnz, step_peak, total_peak, state_bytes(stepper), contender.dense)


def step_memories(contenders: Iterable[Contender], workloads: Iterable[Workload]) -> list[StepMemory]:
    """:func:`step_memory` of every contender on every workload, workload by workload."""
    contenders = list(contenders)
    return [step_memory(c, w) for w in workloads for c in contenders]


def step_peaks_on_tables(contender: Contender, workload: Workload, rows: Sequence[int]) -> list[int]:
    """Peak bytes one step allocates, with the same gradient, on tables of each size in ``rows``.

    The gradient is that of ``workload``'s first batch (its ids are valid in
    any table of at least ``workload.rows`` rows), taken once untraced to create
    any lazily created state, then :data:`PEAK_REPEATS` times traced with
    :func:`measure_peak` (the gradient built beforehand). For a lazy optimizer
    all the peaks are equal; for a dense one they grow with the table.
    """
    _numpy_only(contender)
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


def peaks_by_table(contenders: Iterable[Contender], workload: Workload, rows: Sequence[int]) -> dict[str, list[int]]:
    """:func:`step_peaks_on_tables` of each contender, by name."""
    return {c.name: step_peaks_on_tables(c, workload, rows) for c in contenders}


def state_bytes_per_param(contender: Contender, rows: int = 8, cols: int = 64, dtype: str = "float32") -> float:
    """Bytes of optimizer state per parameter (:func:`held_bytes`), measured on a small table after one step.

    ``cols`` matters where state is kept per row (``SparseAdamTable``'s
    ``last_step``: 8 bytes per row, ``8 / cols`` per parameter).

    Works for torch contenders too (their state tensors are created by the first step).
    """
    workload = Workload(rows, cols, batch=rows, dtype=dtype)
    stepper = contender.make(workload.table())
    stepper.step(*workload.batches(1)[0])
    return state_bytes(stepper) / (rows * cols)


def kept_bytes(contender: Contender, workload: Workload, steps: int = 3) -> int:
    """Bytes a ``sparse_opt`` optimizer keeps allocated: made on ``workload``'s table, after ``steps`` steps.

    Everything allocated from just before ``contender.make(table)`` (the table
    itself already exists) through ``steps`` steps of ``workload``'s batches and
    still allocated at the end, per tracemalloc: the state arrays and anything
    else the optimizer holds on to (caches), not the freed temporaries.
    Includes a few KiB of the stepper's and optimizer's own Python objects
    (compare two contenders, or two tables, to within some KiB).
    """
    _numpy_only(contender)
    table = workload.table()
    batches = workload.batches(steps)
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stepper = contender.make(table)
        for ids, grads in batches:
            stepper.step(ids, grads)
        gc.collect(0)  # the collector was paused: every object made since is in the youngest generation
        kept = tracemalloc.get_traced_memory()[0] - before
        del stepper
        return kept
    finally:
        if started:
            tracemalloc.stop()
        if was_enabled:
            gc.enable()


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


_CHILD = """
import contextlib, pickle, sys
fn, args, kwargs = pickle.load(sys.stdin.buffer)
with contextlib.redirect_stdout(sys.stderr):
    result = fn(*args, **kwargs)
sys.stdout.buffer.write(pickle.dumps(result))
"""


def in_fresh_process(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, computed in a new Python interpreter; its result.

    tracemalloc counts the allocations of every thread of its process, and a
    Jupyter kernel runs threads of its own: their allocations, and the state
    they leave numpy's and Python's caches of small blocks in, move a
    measurement by some hundreds of bytes from one kernel to the next. A new
    interpreter started with ``PYTHONHASHSEED=0`` runs nothing else and starts
    from the same state every time, so the byte counts measured there repeat
    exactly. ``fn``, the arguments and the result travel by :mod:`pickle`:
    ``fn`` must be importable by name (as this module's functions are), and
    the ``sparse_opt`` contenders pickle. ``RuntimeError`` with the child's
    error output if it fails. Costs the start of an interpreter (a fraction of
    a second) on top of ``fn``.

    Examples
    --------
    >>> in_fresh_process(math.factorial, 5)
    120
    """
    payload = pickle.dumps((fn, args, kwargs))
    env = dict(os.environ, PYTHONHASHSEED="0")
    child = subprocess.run([sys.executable, "-c", _CHILD], input=payload, capture_output=True, env=env, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} failed in a fresh process:\n{child.stderr.decode(errors='replace')}")
    return pickle.loads(child.stdout)
