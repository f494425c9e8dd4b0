"""The named scenarios: each isolates one semantic point of a sparse optimizer.

Every scenario is a few rows by two or three columns, tens of steps (the long
gap a couple of hundred), seeded, and built the same way:

- the initial table has entries ``+-k / 256`` with ``k`` in ``[128, 384]``
  (magnitudes 0.5 to 1.5, random signs);
- a lookup of row ``r`` has gradient entries ``k / 64 * scale`` with ``k`` in
  ``[16, 64]``, signed ``-sign(p0)`` (``+sign(p0)`` with ``maximize``), so
  every entry moves away from zero and moments never cancel: an entry-wise
  relative error then measures the semantics, not cancellation;
- ``lr`` is a power of two (exact in float32, so a library that keeps its
  learning rate in float32 is not told apart by that alone).

Row roles repeat across scenarios: row 0 is touched on every non-empty step
(it keeps the semantics that agree on a busy row honest), the others carry the
point; a row that is never touched checks that dormant-from-the-start rows stay
put (or, in dense semantics, decay). The points, by family:

Adam (``beta1 = 0.9``, ``beta2 = 0.999``, ``eps = 1e-8``, ``lr = 1/16`` unless said)
    first touch at a late global step; touch, ``k`` dormant steps, touch for
    ``k = 1, 2, 10`` and ``k = 200 > 1 / (1 - beta2)`` (``beta2 = 0.99``);
    repeated ids in one batch; empty steps; incomplete rows; maximize;
    gradients near eps (``eps = 1e-3``); weight decay on dormant rows; an
    explicit zero gradient; float32; learning-rate schedules whose changes fall
    inside dormant gaps (a warm-up ending, a step decay, a cosine; AdamW's
    decay under a schedule).
Adagrad (``lr = 1/4``, ``eps = 1e-10``)
    lr_decay with a late first touch; a long gap (lazy is dense); repeated ids;
    incomplete rows (row-wise accumulators); initial accumulator; maximize;
    empty steps under lr_decay; float32.
SGD (``lr = 1/16``, ``momentum = 0.9``)
    a gap (momentum keeps pushing in dense SGD); repeated ids; coupled weight
    decay on dormant rows; empty steps; maximize; float32; schedules changing
    inside dormant gaps (a warm-up, a step decay, a cosine with weight decay).

The *schedule scenarios* (``<family>_schedule_<point>``) give the rate of every
step in ``hyper.schedule`` (:class:`~sparse_opt.conformance.Hyper`): the rates
of :mod:`sparse_opt.schedules` (warm-up, step decay, warm-up + cosine), each
rounded to float32 so it is exact in both dtypes, ``lr`` their peak. A row is
touched, sleeps through a change of rate and is touched again: dense training
(DENSE_EQUIVALENT) coasts each dormant step at its own rate, the production
catch-up (``current_rate``) at the rate of the step that brings the row back,
LAZY and DORMANCY_DECAY not at all. They are run on the candidates that take a
schedule (``schedules = True``, :mod:`.candidate`) and left out of the others'
default scenarios (:func:`scenarios` with ``schedules=False``).
Measured (``tests/test_conformance_planted.py``, ``tests/test_conformance_kernel_form.py``):
dense training and the current-rate rule are 5.7e12 to 5.5e13 tolerances apart
on them in float64 (8% to 20% relative) and 660 to 8300 in the kernel form
(there SGD without momentum or decay has nothing to catch up: the two agree);
the kit's catch-up fed the current rate matches ``current_rate`` within 0.07 of
a tolerance. Over every pair of references on the schedule scenarios, the
closest differing pair is 1.2e7 tolerances apart in float64 and 42.7 in the
kernel form, as elsewhere in the catalogue.

The *kernel form* (:data:`KERNEL_SCENARIOS`, :func:`kernel_scenarios`) is what
a production embedding kernel can run: FBGEMM's table-batched embedding takes
float32 (or fp16) weights whose width is a multiple of 4. Every scenario above
has a float32 ``(rows, 4)`` twin ``<name>_f32x4`` (:func:`kernel_form`), plus
what such kernels need on top: each SGD scenario without momentum
(``<name>_f32x4_m0``, FBGEMM's ``EXACT_SGD`` has none) and Adagrad with weight
decay (``adagrad_weight_decay_f32x4``, FBGEMM's decay modes). The catalogue
proper (:data:`SCENARIOS`) is unchanged.

The *half form* (:data:`HALF_SCENARIOS`, ``scenarios(form="half")``) is the
kernel form of Adagrad and SGD with float16 tables, ``<name>_f16x4`` (and
``..._f16x4_m0``): fp16 weights with the optimizer's state in float32, what
FBGEMM's fp16 CPU kernels run (its Adam is GPU-only). Each reference is
evaluated as the kit's float16 optimizers compute: state and update in
float32, the weights rounded to nearest float16 each time they are written
(:func:`.semantics._grad.working`), and a candidate is judged within
``HALF_ULPS = 2`` float16 ulps, a float16 table holding float16 numbers only
(:mod:`.tolerance`). Measured (``tests/test_conformance_half.py``): pairs of
references that agree agree bit for bit, the closest differing pair is 24.0
tolerances apart (``sgd_current_rate`` / ``sgd_lazy`` on
``sgd_schedule_weight_decay_f16x4_m0``), and the pairs told apart are exactly
those of the kernel form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import numpy as np

from sparse_opt import schedules
from sparse_opt.conformance.case import Scenario, Step, frozen
from sparse_opt.conformance.hyper import FAMILIES, Hyper

#: A lookup in a schedule: a row id (the whole row) or ``(row, cols)`` (only those entries).
Lookup = int | tuple[int, tuple[int, ...]]


def build(
    name: str,
    family: str,
    point: str,
    hyper: Hyper,
    schedule: Sequence[Sequence[Lookup]],
    *,
    seed: int,
    rows: int = 4,
    cols: int = 3,
    dtype: str = "float64",
    scale: float = 1.0,
    zeros: Iterable[tuple[int, int]] = (),
) -> Scenario:
    """A scenario from a touch schedule (module docstring for the values).

    Parameters
    ----------
    schedule : sequence of sequences of lookups
        ``schedule[t - 1]`` lists step ``t``'s lookups in order: a row id, or
        ``(row, cols)`` for an incomplete row. An empty list is an empty step.
    seed : int
        Seeds the table and the gradients.
    scale : float
        Power of two multiplying every gradient.
    zeros : iterable of (step, row)
        Lookups whose gradient is an explicit zero (steps count from 1).
    """
    rng = np.random.default_rng(seed)
    sign = rng.choice([-1.0, 1.0], size=(rows, cols))
    table = sign * rng.integers(128, 385, size=(rows, cols)) / 256.0
    push = sign if hyper.maximize else -sign
    zero = set(zeros)
    steps = []
    for t, lookups in enumerate(schedule, 1):
        ids, grads, mask = [], [], []
        for item in lookups:
            r, present = (item, tuple(range(cols))) if isinstance(item, int) else item
            g = push[r] * rng.integers(16, 65, size=cols) / 64.0 * scale
            ids.append(r)
            grads.append(0.0 * g if (t, r) in zero else g)
            mask.append(np.isin(np.arange(cols), present))
        incomplete = not all(m.all() for m in mask)
        steps.append(
            Step(
                np.array(ids, dtype=np.int64),
                np.array(grads, dtype=np.float64).reshape(len(ids), cols),
                np.array(mask).reshape(len(ids), cols) if incomplete else None,
            )
        )
    return Scenario(name, family, point, hyper, table.astype(dtype), tuple(steps))


def _every(steps: int, extra: dict[int, list[Lookup]]) -> list[list[Lookup]]:
    """Row 0 on every step, plus ``extra[t]`` on step ``t``."""
    return [[0] + list(extra.get(t, [])) for t in range(1, steps + 1)]


def gap_schedule(k: int) -> list[list[Lookup]]:
    """Row 1 touched at step 2 and again after ``k`` dormant steps; row 2 only at step 1; row 3 never."""
    return _every(k + 5, {1: [2], 2: [1], k + 3: [1]})


def scheduled(hyper: Hyper, schedule: Callable[[int], float], steps: int) -> Hyper:
    """``hyper`` with the rates ``schedule(1) .. schedule(steps)``, each rounded to float32, and ``lr`` their peak."""
    rates = tuple(float(np.float32(schedule(t))) for t in range(1, steps + 1))
    return replace(hyper, lr=max(rates), schedule=rates)


ADAM = Hyper(lr=0.0625, beta1=0.9, beta2=0.999, eps=1e-8)
ADAGRAD = Hyper(lr=0.25, eps=1e-10)
SGD = Hyper(lr=0.0625, momentum=0.9)


def _adam() -> list[Scenario]:
    dormant = "row 1 is touched at step 2 and again after {k} dormant steps"
    scenarios = [
        build(
            "adam_late_first_touch", "adam",
            "a row first touched at global step 8: bias correction by the global step, a per-row count, or deferred",
            ADAM, _every(10, {8: [1], 9: [1], 10: [1, 2]}), seed=101,
        ),
    ]
    for k, seed in ((1, 102), (2, 103), (10, 104)):
        scenarios.append(build(f"adam_gap_{k}", "adam", dormant.format(k=k), ADAM, gap_schedule(k), seed=seed))
    scenarios += [
        build(
            "adam_gap_long", "adam",
            "row 1 is dormant for 200 steps, longer than 1 / (1 - beta2) = 100: coasting, decay and catch-up all show",
            Hyper(lr=0.0625, beta1=0.9, beta2=0.99, eps=1e-8), _every(205, {2: [1], 203: [1]}),
            rows=3, cols=2, seed=105,
        ),
        build(
            "adam_repeated_ids", "adam",
            "ids repeat within a batch: summed before the update, or squared one by one, or applied in turn",
            ADAM, [[1, 0, 1], [2, 2, 0, 2], [0], [3, 1, 3, 1], [0, 1], [1, 1]], seed=106,
        ),
        build(
            "adam_empty_steps", "adam",
            "steps 3, 4 and 6 have no lookup at all: do they advance the global step?",
            ADAM, [[0, 1], [0], [], [], [0], [], [0, 1], [1]], seed=107,
        ),
        build(
            "adam_incomplete_rows", "adam",
            "touched rows miss some entries: a missing entry is untouched (its own state), not a zero gradient",
            ADAM,
            [[0, (1, (0,))], [0, (1, (1, 2)), (2, (2,))], [0, 1], [0, (2, (0, 2))], [0, (1, (0,))], [0, 2]],
            seed=108,
        ),
        build(
            "adam_maximize", "adam",
            "maximize: the gradient is negated first, dormant rows as in adam_gap_2",
            Hyper(lr=0.0625, beta1=0.9, beta2=0.999, eps=1e-8, maximize=True), gap_schedule(2), seed=109,
        ),
        build(
            "adam_near_eps", "adam",
            "gradients of 2**-12 to 2**-10 with eps = 1e-3: eps added to sqrt(v_hat) or to sqrt(v)",
            Hyper(lr=0.0625, beta1=0.9, beta2=0.999, eps=1e-3), gap_schedule(3), seed=110, scale=2.0**-10,
        ),
        build(
            "adam_weight_decay", "adam",
            "weight_decay = 1/8 (lr * wd = 2**-7) with dormant rows: decoupled or coupled, every step or at touches",
            Hyper(lr=0.0625, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.125),
            _every(8, {1: [1], 3: [2], 5: [1]}), seed=111,
        ),
        build(
            "adam_explicit_zero", "adam",
            "a lookup whose gradient is exactly zero is a touch: moments decay and the row moves",
            ADAM, _every(5, {1: [1], 2: [2], 3: [1], 5: [1]}), seed=112, zeros=[(2, 2), (3, 1)],
        ),
        build(
            "adam_float32", "adam",
            "float32 parameters: gaps and repeated ids together",
            ADAM, _every(12, {1: [1, 2], 2: [2], 5: [1, 1], 6: [3], 11: [1, 3, 3]}), seed=113, dtype="float32",
        ),
        build(
            "adam_schedule_warmup", "adam",
            "linear warm-up to 1/16 over 8 steps: row 1 touched at step 2 sleeps while the warm-up ends and is back "
            "at step 12; row 2 is first touched at step 12: each dormant step at its own rate, or all at step 12's",
            scheduled(ADAM, schedules.linear_warmup(0.0625, 8), 14),
            _every(14, {2: [1], 12: [1, 2], 13: [1]}), seed=114,
        ),
        build(
            "adam_schedule_step_decay", "adam",
            "step decay (1/16, x1/4 every 5 steps): row 1 sleeps from step 4 to 13 across the decays at steps 6 "
            "and 11, row 2 from step 2 to 7 across the first",
            scheduled(ADAM, schedules.step_decay(0.0625, 5, 0.25), 16),
            _every(16, {1: [2], 3: [1], 8: [2], 14: [1]}), seed=115,
        ),
        build(
            "adam_schedule_cosine", "adam",
            "warm-up (4 steps) and cosine to 1/128 at step 20: rows 1 and 2 sleep through parts of the warm-up and "
            "of the cosine, row 1 is back after it ends",
            scheduled(ADAM, schedules.warmup_cosine(0.0625, 4, 20, 0.0078125), 22),
            _every(22, {2: [1], 5: [2], 10: [1], 17: [2], 21: [1]}), seed=116,
        ),
        build(
            "adam_schedule_weight_decay", "adam",
            "AdamW (weight_decay = 1/8) under a step decay (1/16, halved every 4 steps): dormant rows decay by "
            "each step's 1 - lr_j * wd, by the current step's, or only at touches",
            scheduled(replace(ADAM, weight_decay=0.125), schedules.step_decay(0.0625, 4, 0.5), 12),
            _every(12, {1: [1], 3: [2], 9: [1], 11: [2]}), seed=117,
        ),
    ]
    return scenarios


def _adagrad() -> list[Scenario]:
    decay = Hyper(lr=0.25, eps=1e-10, lr_decay=0.125)
    return [
        build(
            "adagrad_late_first_touch", "adagrad",
            "lr_decay with a row first touched at step 6: the rate uses the global step",
            decay, _every(8, {6: [1], 7: [1], 8: [1, 2]}), seed=201,
        ),
        build(
            "adagrad_gap", "adagrad",
            "row 1 dormant for 10 steps: a zero-gradient step changes nothing, so lazy is dense",
            ADAGRAD, gap_schedule(10), seed=202,
        ),
        build(
            "adagrad_repeated_ids", "adagrad",
            "ids repeat within a batch (twice at most): summed first, or applied one after another",
            ADAGRAD, [[1, 0, 1], [2, 0], [0, 2, 2], [3], [1, 1, 0]], seed=203,
        ),
        build(
            "adagrad_incomplete_rows", "adagrad",
            "touched rows miss some entries: element-wise accumulators, or one per row over all columns",
            ADAGRAD, [[0, (1, (0,))], [(1, (1, 2)), (2, (2,))], [0, 1], [(2, (0, 2))]], seed=204,
        ),
        build(
            "adagrad_initial_accumulator", "adagrad",
            "initial_accumulator_value = 1/8",
            Hyper(lr=0.25, eps=1e-10, initial_accumulator_value=0.125), _every(5, {1: [1], 4: [1, 2]}), seed=205,
        ),
        build(
            "adagrad_maximize", "adagrad", "maximize: the gradient is negated first",
            Hyper(lr=0.25, eps=1e-10, maximize=True), _every(5, {2: [1], 5: [1]}), seed=206,
        ),
        build(
            "adagrad_empty_steps", "adagrad",
            "lr_decay with empty steps 2 and 4: they advance the step the rate decays with",
            decay, [[0], [], [0, 1], [], [1], [0]], seed=207,
        ),
        build(
            "adagrad_float32", "adagrad", "float32 parameters, a gap and a repeated id",
            ADAGRAD, _every(8, {1: [1], 6: [1, 2, 2]}), seed=208, dtype="float32",
        ),
    ]


def _sgd() -> list[Scenario]:
    return [
        build(
            "sgd_gap", "sgd",
            "row 1 dormant for 3 steps, row 2 touched once: dense momentum keeps pushing, lazy stops",
            SGD, gap_schedule(3), seed=301,
        ),
        build(
            "sgd_repeated_ids", "sgd",
            "ids repeat within a batch: summed first, or applied one after another",
            SGD, [[1, 0, 1], [2, 0], [0, 2, 2, 2], [3], [1, 1, 0]], seed=302,
        ),
        build(
            "sgd_weight_decay", "sgd",
            "coupled weight decay 1/8 with dormant rows: every step, or at touches only",
            Hyper(lr=0.0625, momentum=0.9, weight_decay=0.125), _every(8, {1: [1], 3: [2], 6: [1]}), seed=303,
        ),
        build(
            "sgd_empty_steps", "sgd", "empty steps 3 and 4: dense momentum still moves every row it has pushed",
            SGD, [[0, 1], [0], [], [], [0, 1], [1], [0]], seed=304,
        ),
        build(
            "sgd_maximize", "sgd", "maximize: the gradient is negated first",
            Hyper(lr=0.0625, momentum=0.9, maximize=True), _every(6, {1: [1], 4: [1]}), seed=305,
        ),
        build(
            "sgd_float32", "sgd", "float32 parameters, a gap and a repeated id",
            SGD, _every(8, {1: [1], 5: [1, 1], 6: [2]}), seed=306, dtype="float32",
        ),
        build(
            "sgd_schedule_warmup", "sgd",
            "linear warm-up to 1/16 over 8 steps: row 1 touched at step 2 sleeps while the warm-up ends and is back "
            "at step 11: dense momentum pushes it at each step's rate, the current-rate catch-up at step 11's",
            scheduled(SGD, schedules.linear_warmup(0.0625, 8), 12),
            _every(12, {1: [2], 2: [1], 11: [1]}), seed=307,
        ),
        build(
            "sgd_schedule_step_decay", "sgd",
            "step decay (1/16, x1/4 every 4 steps): row 1 sleeps from step 2 to 9 across the decays at steps 5 and "
            "9, row 2 from step 4 to 5 across the first",
            scheduled(SGD, schedules.step_decay(0.0625, 4, 0.25), 12),
            _every(12, {1: [1], 3: [2], 6: [2], 10: [1]}), seed=308,
        ),
        build(
            "sgd_schedule_weight_decay", "sgd",
            "coupled weight decay 1/8 under warm-up (3 steps) and cosine to 1/256 at step 12: dormant rows decay and "
            "coast at each step's rate, at the current step's, or not at all",
            scheduled(Hyper(lr=0.0625, momentum=0.9, weight_decay=0.125),
                      schedules.warmup_cosine(0.0625, 3, 12, 0.00390625), 14),
            _every(14, {1: [1], 4: [2], 9: [1], 13: [2]}), seed=309,
        ),
    ]


#: Every scenario, Adam's first, then Adagrad's, then SGD's.
SCENARIOS: tuple[Scenario, ...] = tuple(_adam() + _adagrad() + _sgd())

#: Suffix of a scenario's kernel form, and the kernel form's width.
KERNEL_SUFFIX, KERNEL_COLS = "_f32x4", 4

#: Where the candidates' scenarios come from (a candidate's optional ``form``).
FORMS = ("catalogue", "kernel", "half")


def kernel_form(s: Scenario, suffix: str = KERNEL_SUFFIX, hyper: Hyper | None = None) -> Scenario:
    """``s`` as a float32 ``(rows, 4)`` scenario, the same semantic point.

    Column ``c >= cols`` is column ``c mod cols`` negated, in the initial table
    and in every gradient (and mask): every reference is odd in ``(p, g)``
    entry by entry, so the new columns follow the old ones with the sign
    flipped, and the row-wise references see ``mean(g**2)`` over 4 entries.
    Values stay dyadic, so float32 holds them exactly. ``hyper`` replaces the
    scenario's hyper-parameters (default: the same).
    """
    cols = s.table.shape[1]
    if cols > KERNEL_COLS:
        raise ValueError(f"{s.name}: {cols} columns, more than the kernel form's {KERNEL_COLS}")
    src = np.arange(KERNEL_COLS) % cols
    sign = np.where(np.arange(KERNEL_COLS) < cols, 1.0, -1.0)
    steps = tuple(
        Step(st.row_ids, np.ascontiguousarray(st.row_grads[:, src] * sign),
             None if st.mask is None else np.ascontiguousarray(st.mask[:, src]))
        for st in s.steps
    )  # column indexing gives Fortran order: C order, as every other scenario's arrays
    table = frozen(np.ascontiguousarray(s.table.astype(np.float64)[:, src] * sign, dtype=np.float32))
    point = f"{s.point} (float32, {KERNEL_COLS} columns: column c >= {cols} is column c mod {cols} negated)"
    return Scenario(s.name + suffix, s.family, point, s.hyper if hyper is None else hyper, table, steps)


def _kernel() -> list[Scenario]:
    out: list[Scenario] = []
    for s in SCENARIOS:
        out.append(kernel_form(s))
        if s.family == "adagrad" and s.name == "adagrad_gap":
            wd = build(
                "adagrad_weight_decay", "adagrad",
                "weight_decay = 1/8 with dormant rows: coupled (L2) or decoupled, at touches only, or not applied",
                Hyper(lr=0.25, eps=1e-10, weight_decay=0.125), _every(8, {1: [1], 3: [2], 6: [1]}), seed=209,
            )
            out.append(kernel_form(wd))
    for s in SCENARIOS:
        if s.family == "sgd":
            out.append(kernel_form(s, KERNEL_SUFFIX + "_m0", replace(s.hyper, momentum=0.0)))
    return sorted(out, key=lambda s: FAMILIES.index(s.family))


#: The kernel form of the catalogue (module docstring), in family order.
KERNEL_SCENARIOS: tuple[Scenario, ...] = tuple(_kernel())


#: Suffix of a kernel-form scenario's half-precision twin (in place of ``_f32x4``).
HALF_SUFFIX = "_f16x4"
#: The families the half form has: the update rules of FBGEMM's fp16 CPU kernels (module docstring).
HALF_FAMILIES = ("adagrad", "sgd")


def half_form(s: Scenario) -> Scenario:
    """The kernel-form scenario ``s`` with a float16 table: ``<name>_f16x4``, the same steps and hyper-parameters.

    Exact: the kernel form's table entries are ``+-k / 256`` with ``k <= 384``
    and its gradients ``k / 64`` times a power of two with ``16 <= k <= 64``,
    9 and 7 significant bits, inside float16's normal range.
    """
    if KERNEL_SUFFIX not in s.name or s.dtype != np.float32:
        raise ValueError(f"{s.name}: the half form is made from a kernel-form scenario (float32, '{KERNEL_SUFFIX}')")
    table = s.table.astype(np.float16)
    if not np.array_equal(table, s.table):
        raise ValueError(f"{s.name}: the table is not exact in float16")
    point = s.point.replace("(float32, ", "(float16 weights and float32 state, ")
    return Scenario(s.name.replace(KERNEL_SUFFIX, HALF_SUFFIX), s.family, point, s.hyper, table, s.steps)


#: The half-precision kernel form (module docstring): Adagrad's and SGD's kernel-form scenarios in float16.
HALF_SCENARIOS: tuple[Scenario, ...] = tuple(half_form(s) for s in KERNEL_SCENARIOS if s.family in HALF_FAMILIES)


def scenarios(family: str | None = None, form: str = "catalogue", *, schedules: bool = True) -> tuple[Scenario, ...]:
    """The scenarios of ``family`` (all when ``None``) in ``form`` (``"catalogue"``, ``"kernel"`` or ``"half"``).

    ``schedules=False`` leaves out the scenarios with a learning-rate schedule:
    the default scenarios of a candidate that takes none (:mod:`.candidate`).
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    chosen = {"catalogue": SCENARIOS, "kernel": KERNEL_SCENARIOS, "half": HALF_SCENARIOS}[form]
    return tuple(s for s in chosen if (family is None or s.family == family) and (schedules or not s.hyper.schedule))


def kernel_scenarios(family: str | None = None, *, schedules: bool = True) -> tuple[Scenario, ...]:
    """``scenarios(family, form="kernel", schedules=schedules)``: the float32 ``(rows, 4)`` forms."""
    return scenarios(family, "kernel", schedules=schedules)


def scenario(name: str) -> Scenario:
    """The scenario called ``name`` (catalogue, kernel or half form)."""
    every = SCENARIOS + KERNEL_SCENARIOS + HALF_SCENARIOS
    for s in every:
        if s.name == name:
            return s
    raise KeyError(f"no scenario named {name!r}; the names are {[s.name for s in every]}")
