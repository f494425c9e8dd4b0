r"""Dense Adam(W)'s zero-gradient steps, applied at once: the catch-up of ``DENSE_EQUIVALENT``.

A coordinate whose last update was at step ``s`` and that had no gradient on
steps ``j = s + 1 .. T`` is, in dense AdamW fed zero gradients (``c = 1 - lr *
weight_decay``)::

    p_j = c * p_{j-1} - lr * m_hat_j / (sqrt(v_hat_j) + eps)
    m_j = beta1 * m_{j-1},        v_j = beta2 * v_{j-1}
    m_hat_j = m_j / (1 - beta1**j),   v_hat_j = v_j / (1 - beta2**j)

With ``k = T - s`` dormant steps, ``x = sqrt(v_s)`` and ``i = j - s``, the
moments are ``m_T = beta1**k m_s`` and ``v_T = beta2**k v_s``, and the parameter
*coasts*::

    p_T = c**k p_s - lr m_s S(x),
    S(x) = sum_{i=1..k} c**(k-i) a_i / (b_i x + eps),
    a_i = beta1**i / (1 - beta1**(s+i)),     b_i = beta2**(i/2) / sqrt(1 - beta2**(s+i)).

The weights ``a_i``, ``b_i`` depend only on the global steps, so they are
shared by all entries of a row; only ``x`` is per entry. Three ways to evaluate
``S``, each exact to the dtype's rounding:

**Expansion in eps / (b x)** (the fast path). Where ``eps <= theta b_i x`` for
every ``i`` of the window (``b_i`` decreases, so the last one decides),
``1 / (b x + eps) = sum_n (-eps / (b x))**n / (b x)`` and::

    S(x) = c**k / x * sum_{n<N} P_n(s, K) (-eps / x)**n,
    P_n(s, K) = sum_{i=1..K} rho_n**i u_n(s + i),
    rho_n = beta1 / (c beta2**((n+1)/2)),   u_n(j) = (1 - beta2**j)**((n+1)/2) / (1 - beta1**j).

The remainder after ``N`` terms is below ``theta**N / (1 - theta)`` of ``S``:
with ``theta <= 2**-7`` eight terms reach float64 rounding (four float32's), and
in practice (``x >> eps``) one to four are used. The window is cut at ``K =
min(k, L)``: when ``rho = rho_{N_max - 1} < 1`` the terms beyond ``L`` are below
``tol`` of the sum for any ``s`` (bound: tail / head ``<= rho**L / ((1 - rho)
(1 - beta2)**p (1 - beta1**(L+1)))`` with ``p = N_max / 2``), so ``L`` is a
constant of ``beta1``, ``beta2``, ``lr * weight_decay`` and the dtype (about 700
for the defaults in float64). ``P_n(s, K)`` comes from two caches over global
steps, never over coordinates: for a gap ``k < L`` a table of the last ``L``
steps, rebuilt in O(L N) when the step changes; for ``k >= L`` a table
``P_n(s, L)`` by ``s``, each entry computed once in O(L N). ``u_n`` is 1 to
rounding once ``beta2**s`` and ``beta1**s`` are below ``eps / 64``, so that
table stops there. Catching up one coordinate is O(N) plus its share of its
row's lookups: a constant, whatever the gap.

Under a built-in schedule without weight decay (``c = 1``) each term carries
its step's rate, so the rates go into the weights, ``P_n(s, K) = sum_i
rho_n**i u_n(s + i) lr_{s+i}``, still a function of ``(s, K)``: the table of
the last ``L`` steps moves on with each new step's rate, and ``P_n(s, L)``
past the settled steps is a product of ``rho_n**i`` with the window's rates,
kept by ``s`` (``RING_WEIGHTS`` of them). The tail beyond ``L`` is bounded as
at a constant rate times the ratio of the largest rate of the steps summed
(:meth:`LearningRate.largest`: at its segments' ends, where a built-in's rate
is monotone) to a window's first: ``L`` allows ``RATE_SPREAD`` for it, and a
catch-up whose long windows start lower than that is summed by the blocks.

**Chebyshev blocks** (everywhere else with ``eps > 0``: ``x`` near or far below
``eps / b``, ``eps`` large, ``rho >= 1``, windows beyond ``MAX_WINDOW``, beta1 up
to 0.99999). A catch-up expands only when the expansion converges for every
coordinate it brings current; otherwise the blocks take them all (one pass
over whole rows costs less than two over masked parts). Write each term with ``t = b_c x / (b_c x + eps)`` for a reference
``b_c >= b_i``::

    1 / (b_i x + eps) = (1 / (b_c x + eps)) / (1 - e_i t),    e_i = 1 - b_i / b_c,

so that a *block* of steps contributes ``H(t) / (b_c x + eps)`` with ``H(t) =
sum_{i in block} w_i / (1 - e_i t)``, ``w_i = c**(k-i) a_i > 0``. The steps of a
window are cut into blocks over which ``b`` varies by less than
``BLOCK_RATIO = 2`` (``b_c`` the block's largest ``b``, so ``0 <= e_i < 1/2``).
``H`` is analytic except for poles at ``t = 1 / e_i > 2``, while ``t`` stays in
``[0, 1)`` for every ``x >= 0``: the Chebyshev series of ``H`` on the
interval of ``t`` the block's entries use converges geometrically, at a rate
set by the distance to the nearest pole and *not* by ``x``, ``eps``, the betas
or the gap. Each pole's series is known in closed form, so the coefficients
are sums over the block's steps (:func:`_series_coefficients`) and the tail
after ``n`` terms is bounded exactly (:func:`_series_terms`, error below
``tol / 4`` of ``H``; at most 13 terms in float32, 24 in float64, typically
4 to 10). Every ``w_i``, ``e_i``, coefficient and ``H`` value is positive, so
the sums do not cancel. Terms whose ``b_i x`` stays below ``tol * eps / 4`` for
every entry are ``w_i / eps`` to rounding and are summed as one constant.

The window of a block sum: term ``i`` is below ``C r**(i-1)`` of term 1 with
``(r, C) = (beta1 / c, 1 + b_1 x_max / eps)`` and, when ``rho_0 < 1``,
``(rho_0, 1 / sqrt(1 - beta2**(s+1)))``, so the steps beyond ``L = log(tol (1 -
r) / (4 C)) / log r`` add less than ``tol / 4`` (:meth:`AdamCoasting._block_window`).
With ``beta1 / c < 1`` that is finite for every input; it grows with
``1 / (1 - beta1)`` and only logarithmically with ``x / eps``.

*Cost.* The weights depend on the row's ``(s, k)`` only (``k`` is fixed by
``s``: every catch-up brings its rows through the same step), so all rows
with the same last step share one set of blocks: per distinct ``s``, O(K)
weights and O(K N) coefficient sums (``K = min(k, L)``); per entry, one Chebyshev
evaluation per block of its row, O(N) in the dtype, with the rows sorted by
the terms their first block needs. The rows last touched before the latest
last step ``s*`` of a catch-up share the steps after it, by the composition
law ``S(s, k, x) = c**tail S(s, head, x) + beta1**head S(s*, tail,
beta2**(head/2) x)`` (``head = s* - s``, ``tail = T - s*``): one window of
``min(tail, L)`` steps for all of them, wherever that halves the work (a
catch-up after a long gap). The number of blocks of a row is at most
``log2(b_1 / b_K)``, bounded by ``log2(b_1 x_max / (tol eps))`` (steps whose
``b x`` falls below ``tol eps`` join the constant): 1 for the defaults once
past the first steps, a few while the bias correction still moves ``b``, and
up to a few dozen over windows that span many factors of 2 in ``b`` (37 for
beta1 = 0.9999, beta2 = 0.999 after 10**6 steps in float32). A window of
``SMOOTH_BLOCKS`` blocks or more, with entries enough, is not evaluated block
by block at each entry: its sum ``S`` is analytic in ``log x`` within ``pi``
of the real axis, so it is interpolated piecewise in ``log x`` (pieces of
``PIECE_WIDTH``, about 9 Chebyshev terms in float32, 16 in float64) from the
blocks' values at the pieces' nodes (:meth:`AdamCoasting._smooth_sums`): an
entry costs a logarithm and one polynomial by Horner's rule, however many blocks.
None of it depends on the gap beyond ``L``, on the gradient's scale, or on
``eps``.

*Late in training: prefix sums.* A training step late in a long run brings
current rows last touched one step to ``10**5`` steps before: a thousand
windows, one per distinct last step, whose sums (a few hundred terms each
through the Gauss rules below) cost 30 to 80 times a ``DORMANCY_DECAY`` step.
Once both bias corrections are 1 (``beta**s < 2**-54``) and at a constant
rate, though, step ``i`` of every window has ``a_i = beta1**i`` and ``b_i =
beta2**(i/2)``: each window's summed steps are the first ``K`` of one
sequence, times ``c**k``. :meth:`AdamCoasting._prefix_sums` cuts that sequence
where some window's summed steps end, sums each stretch once by the blocks at
the nodes of pieces in ``log x`` common to all windows, and gives each window
the running sum up to its end; an entry then costs one interpolant, as in
:meth:`AdamCoasting._smooth_sums`. The work is one sequence of the longest
window's length, cut at most once per window, instead of one window per row
(about 10x a ``DORMANCY_DECAY`` step instead of 30x to 80x, RESULTS.md). The
running sums add positive terms, within ``n`` float64 roundings over ``n``
stretches: float32 and narrower tables only (in float64 that is more than the
catch-up's tolerance, and the windows are summed one by one). Under a
schedule, without weight decay, a window's rates are not one sequence of
``i`` but a few, each times a factor of the window's last step
(:meth:`AdamCoasting._rate_sequences`): a warm-up's ``lr j / W`` is ``lr s / W``
plus ``(lr / W) i``, and a cosine's rate at ``s + i`` is its rate at ``s``
plus multiples of ``sin(omega i)**2`` and ``sin(2 omega i)``. Each sequence
is summed as above (two or three instead of one), and each window combines
them; where the factors differ in sign (a cosine) the combination can cancel,
so the sequences are summed to ``tol / 16`` and the windows' cancellation is
held below ``MAX_CANCELLATION`` (it is ``1 + O(omega K)``: about 2 at most
half-way down a cosine of two million steps).

*Late in training at a constant rate: one function for every window.* Once
the bias corrections are 1, the steps after a window's ``K``-th are ``r**K``
times its first steps seen at ``beta2**(K/2) x`` (``r = beta1 / c``), so with
``F(x)`` the sum of *all* the settled steps of ``r``, a window of a whole gap
of ``K`` steps is ``c**K (F(x) - r**K F(beta2**(K/2) x))``, and ``F`` is one
function of ``x`` for the process (:mod:`sparse_opt._settled_sum`: pieces in
``log x`` built once, within about ``1e-13``). :meth:`AdamCoasting._settled_sums`
takes each window this way where that error stays within the catch-up's
tolerance of its sum (every window but the shortest, whose sum is a small part
of ``F``: those of ``STEP_WINDOW`` steps or fewer are summed step by step,
longer ones as below; the windows of ``QUICK_WINDOW`` steps or fewer always
are, which costs less). A training step late in training then costs
one or two evaluations of ``F`` per entry and nothing per window (3.1x to
4.7x a ``DORMANCY_DECAY`` step instead of 7x to 11x with beta1 >= 0.999;
RESULTS.md). Where ``beta1 > sqrt(beta2)`` the terms rise along a window until
``b x`` nears ``eps``, and the windows shorter than that are a small part of
``F``: those are the sum of the steps *before* them, ``G``, which converges
there and is a settled sum of the same kind, in ``1 / x``
(:meth:`AdamCoasting._sums_before`). Under a cosine schedule (Adam) the rates
of every window are two geometric sequences of the dormant step, ``lr(s + i)
= A + Re(B_s e**(-2 i omega i))`` (:meth:`AdamCoasting._settled_rates`), so
each window is the same difference for ``F`` of ``r`` and of the complex
``r e**(-2 i omega)``, weighted by ``A`` and ``B_s``; after a cosine, or in a
period of a step decay, the rate is one constant, and an exponential decay's
rates are ``lr(s + 1) / gamma gamma**i``, the ``F`` of ``r gamma``. A window
across the schedule's breaks (a step decay's drops, the cosine's end) is cut
into pieces, each a window of its own seen at ``q**o x`` and weighted
``beta1**o`` (:meth:`AdamCoasting._settled_pieces`). Late training then
costs 4.8x to 9.3x a ``DORMANCY_DECAY`` step under the warm-up and cosine (was
11x to 23x), 3.5x to 7.4x under an exponential decay (was 28x to 183x) and
3.2x to 7.5x under a step decay whose drops fall inside the windows (was 12x
to 152x).

*Long windows: Gauss rules on pieces of steps.* ``L`` grows as ``1 / (1 -
beta1)`` (about 35 / (1 - beta1) steps in float32: 350,000 for beta1 =
0.9999), but the terms are analytic functions of the step ``j``, changing by
at most ``e**lambda`` a step with ``lambda = |log(beta1 / c)| + |log beta2| /
2`` (``|log(beta1 / c)|`` alone where every term is ``w / eps``), with
singularities only at ``Re j = 0`` (the bias corrections) and, through ``b x
+ eps``, at ``|Im j| >= pi / lambda``. So a window of ``QUADRATURE_FROM``
steps or more (at a constant rate, or under a built-in schedule: below) is
cut into pieces of ``2**l`` steps, aligned on their size and at least their
own length beyond step 0, of at most ``1 / lambda`` steps
(:meth:`AdamCoasting._plan`), and each piece's sum is an
``m``-point Gauss rule for sums over consecutive integers
(:mod:`sparse_opt._discrete_gauss`): ``m`` pseudo-steps at real ``j``, with
positive weights, that the blocks then sum as they sum steps. ``m`` comes
from a bound on the terms on the piece's Bernstein ellipse, uniform in ``x``
(:meth:`AdamCoasting._piece_nodes`: error below ``tol / 8`` of the piece's
sum; about 8 to 20 nodes). The steps no piece covers (the first few dozen of
a window, its ends) are summed one by one. A window then costs
``O(log(L) + lambda L)`` terms, ``lambda L <= log(1 / tol) + log(x_max / (tol
eps))``: a few thousand whatever beta1, beta2 and the gap (a catch-up after
10**6 steps with beta1 = 0.9999: 3,100 to 4,900 terms instead of 370,000).

The bias corrections ``1 - beta**j`` are torch's (at the steps summed one by one) (Python's correctly rounded
power, then the subtraction, up to ``1 - beta**j = 1/2``): numpy's vectorised
power can be an ulp off, and with ``beta1 = 0.99999`` at step 4 the subtraction
raises that to 3e-12. They and the powers ``beta1**i``, ``beta2**(i/2)`` come
from tables by step shared by every optimizer of the process with the same
betas (:func:`_table`: at most ``MAX_BIAS_TABLE`` values, 8 MiB, each), filled
once by the first catch-up that reaches a step; a window's weights are then
gathers and a few multiplies per step, and its blocks are runs of steps cut
where ``b`` crosses a power of ``BLOCK_RATIO`` (``b`` decreases along a window).

*Terms that grow.* With ``c <= beta1`` (AdamW with ``1 - lr * weight_decay
<= beta1``, at a constant rate) the terms ``c**(k-i) a_i / (b_i x + eps)``
grow towards the end of the gap, by ``beta1 / c`` a step: the window is cut
from the end instead, the last ``L = log(tol (1 - r) / (4 C)) / log r`` steps
with ``r = c / beta1`` (:meth:`AdamCoasting._reverse_window`; ``C`` bounds the
bias correction's growth), every step when ``r = 1``, and the blocks sum it as
above.

*Geometric tails.* At a constant rate, from the step of a window where every
term is ``w_i / eps`` to ``tol / 4`` (``b_i x_max <= tol eps / 4``) and both
bias corrections are 1 in float64 (``beta**j < 2**-54``), the weights are
``c**(k-i) beta1**i``: those steps add up in closed form, a geometric sum
(:meth:`AdamCoasting._summed_steps`, :meth:`AdamCoasting._geometric_sum`), and
only the steps before are summed (one by one, or through the Gauss rules of
*Long windows*): at most ``37 / (1 - beta1)`` plus the ``2 log(4 x_max / (tol
eps)) / log(1 / beta2)`` steps ``b x`` takes to fall below ``tol eps``, whatever
the window. That bounds a window cut from the end too, where ``c`` is equal or
close to ``beta1`` and every step of a long gap weighs about the same: 3.7
million steps before the tail for ``beta1 = 0.99999``, a few thousand terms
(before the Gauss rules these were replayed, O(gap): 220 s for one coordinate
after 6 million steps).

**Replaying dense Adam's own operations** (the fallback), where neither of the
above applies: ``eps = 0`` with no window (``rho_{N-1} >= 1``: the replay keeps
dense Adam's own roundings, bit for bit with torch), ``eps = 0`` with a ``v``
that is subnormal, zero or reaches zero during the gap (possible only for
``beta2 <= 0.5``: dense Adam's ``v <- beta2 * v`` otherwise stalls at the
smallest subnormal), and ``beta1 >= 1 - peak * weight_decay`` under a
schedule. The replay applies
the steps one by one and stops, for each entry, as soon as the rest of its coasting
is provably below ``tol * |p|`` -- ``lr |m_j| beta1 / ((1 - beta1)(1 -
beta1**(j+1)) eps)`` bounds it, and with ``eps = 0`` ``lr |m_j| rho_0 / ((1 -
rho_0)(1 - beta1**(j+1)) sqrt(v_j))`` -- or its ``m`` has underflowed to zero;
the remaining decays are applied in closed form. That bounds the replay by the
steps ``beta1**i`` takes to make the rest negligible: a constant of ``beta1``,
``beta2`` and the dtype (a few hundred steps for ``beta1 = 0.9`` in float64),
however long the gap -- but one step of numpy work per dormant step, so
O(1 / (1 - beta1)) per entry, not the O(N) of the other two.

**Under a learning-rate schedule** (``lr_j`` depends on the step) the
expansion's weights are not geometric in ``i`` and it is off; the Chebyshev
blocks take every coasting coordinate, with each dormant step's own rate and
the decoupled decays dense AdamW applies to its coasting afterwards::

    w_i = lr_{s+i} a_i prod_{j=s+i+1}^{T} c_j,    c_j = 1 - lr_j * weight_decay

(:meth:`AdamCoasting._scheduled_weights`; the factors rounded as
:meth:`sparse_opt._rates.LearningRate.decay` rounds them). The blocks, their
window and their error bound are those above with ``c`` the smallest factor,
``1 - peak * weight_decay`` (:meth:`AdamCoasting._uses_blocks`): every ``lr_j``
is at most the schedule's peak, so the steps left out weigh less than ``tol /
4`` of the first step's term at the peak rate -- of one peak-rate step of the
coordinate. Without weight decay a built-in schedule keeps the Gauss rules on
long windows: between a few break steps its rate is one entire function of
the step (constant, the warm-up's line, the cosine, the exponential;
:mod:`sparse_opt._analytic_rates`), so the window is first cut at those breaks,
each piece lies within one segment (and, before a cosine's end, where the rate
has a double zero, ends at least twice its length before it), its pseudo-steps
take the rate continued to real steps, and its bound on the ellipse takes the
rate's own growth there (:func:`sparse_opt._analytic_rates.growth`). The cost
is then the constant rate's plus about 200 terms per break in the window: a
few thousand for a warm-up and cosine, O(window / step_size) for a
:func:`~sparse_opt.schedules.step_decay` (40,000 terms for its 185 periods of
2000 steps in a window of 370,000; periods shorter than ``2**MIN_PIECE_LEVEL``
are summed step by step). With weight decay the terms also carry the decay
after their step, ``prod_{j' > j} c_j'``, a product of rounded factors that
continues to real steps only where the factor is one value: a built-in
schedule's float32 factors (``lr * weight_decay = 1e-5`` spans 168 float32
values below 1) come in runs of one value, found once per schedule
(:meth:`~sparse_opt._rates.LearningRate.runs`), so the window is cut at the
runs' starts too, and on a piece the decay after ``j`` is its run's factor
to the power ``-(j - start)`` times the decay after its start (its growth on
the ellipse, ``c_low**-(a + h)``, in the bound, ``|log c_low|`` in the
pieces' length); every decay product is then one power per run
(:meth:`~sparse_opt._rates.LearningRate.decay`). Float64 factors take too many
values for runs, and an arbitrary callable has no continuation: their windows
are summed step by step, O(window) terms, with the rates of the summed steps
evaluated once per catch-up. Otherwise, with ``weight_decay > 0`` the catch-up also
takes the product of the decay factors
of the steps beyond the window, as the parameter's own decay
(:meth:`~sparse_opt._rates.LearningRate.decay`): the products are taken from
the catch-up's last step back, so one pass over the gap serves every last
step, and the steps where a built-in schedule has settled (after its warm-up
or cosine, or where a decaying rate rounds to 0) are one power. An arbitrary
callable needs its rate at every dormant step that decays: O(gap) rate
evaluations per catch-up (numpy-vectorised for the built-ins); a built-in
schedule's O(steps before it settles). Where the blocks cannot be used (``eps
= 0``, or ``beta1 >= 1 - peak * weight_decay``) the replay applies each step's
own rate and decay factor, stopping as above with the peak rate in the bound.

A coordinate with ``m_s = 0`` does not coast (``p_T = c**k p_s``), except that
with ``eps = 0`` and ``v_s = 0`` dense Adam computes ``0 / 0``: NaN, reproduced.

Source: Kingma & Ba, "Adam: A Method for Stochastic Optimization" (2015), and
Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (2019), for the
dense recursions; the expansion and the bounds are this kit's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from sparse_opt import _analytic_rates as analytic_rates
from sparse_opt import schedules
from sparse_opt._coalesce import distinct
from sparse_opt._discrete_gauss import rules as gauss_rules
from sparse_opt._log_chebyshev import clenshaw, log_coefficients, log_interpolate, log_nodes, piece_terms
from sparse_opt._powers import power, steps_below
from sparse_opt._rates import RATE_MEMO, LearningRate
from sparse_opt._settled_sum import U as U64
from sparse_opt._settled_sum import SettledSum, ratio_rounding, root_ratio, settled_sum

#: Expansion terms are used only where ``eps / (b x)`` is at most this.
THETA = 2.0**-7
#: Longest window ``L`` the fast path (the expansion) supports; beyond, the blocks sum every coordinate (``eps > 0``).
MAX_WINDOW = 1 << 14

#: Under a schedule, the most the rate of a dormant step may exceed that of a long window's first step, for the
#: expansion (:meth:`AdamCoasting._window`): its window is longer by ``log(RATE_SPREAD) / log(1 / rho)`` steps.
RATE_SPREAD = 2.0**10

#: Steps between the direct builds of the recent-steps weight table (:meth:`AdamCoasting._recent_weights`):
#: in between it is moved on one step at a time, and the anchors fix which, whatever the calls before.
RECENT_ANCHOR = 64

#: Largest ratio of the ``b_i`` of the dormant steps one Chebyshev block of the direct sum covers.
BLOCK_RATIO = 2.0
#: Longest table by step (bias corrections ``1 - beta**j``, powers ``beta**i``; see AdamCoasting._table).
MAX_BIAS_TABLE = 1 << 20
#: Values a table by step (:meth:`AdamCoasting._table`) is grown by at a time.
TABLE_CHUNK = 1 << 12
#: The tables by step of :meth:`AdamCoasting._table`, shared by every optimizer of the process.
_TABLES: dict[tuple, np.ndarray] = {}
#: Blocks from which a window's rows are summed through an interpolant in ``log x`` (:meth:`AdamCoasting._smooth_sums`).
SMOOTH_BLOCKS = 6
#: Width in ``log x`` of one piece of that interpolant.
PIECE_WIDTH = 0.5
#: Entries a piece must serve for a window to be summed through pieces (its nodes cost about that many entries).
SMOOTH_ENTRIES = 20
#: Summed steps times Chebyshev terms (or nodes) the coefficient sums of :meth:`AdamCoasting._blocks` (and the node sums of :meth:`AdamCoasting._stretch_nodes`) evaluate in one numpy pass.
NODE_BATCH = 1 << 16
#: Steps times terms one pass of the coefficient sums costs beside its work (for choosing runs of blocks, :meth:`AdamCoasting._blocks`).
RUN_COST = 5000
#: Flat steps of a window from which their weights are summed pairwise (:meth:`AdamCoasting._flat_sums`).
PAIRWISE_FROM = 64
#: Summed steps of a window (at a constant rate) from which it is summed through Gauss rules on pieces.
QUADRATURE_FROM = 256
#: Pieces of fewer than ``2**MIN_PIECE_LEVEL`` steps are summed one by one.
MIN_PIECE_LEVEL = 5
#: Semi-minor axes, in half-widths of the piece, of the ellipses :meth:`AdamCoasting._piece_nodes` tries.
PIECE_SIGMAS = np.array([0.5, 0.75, 1.0, 1.5, 2.0, 2.5])
#: Windows from which a catch-up late in training is summed through prefix sums (:meth:`AdamCoasting._prefix_sums`).
PREFIX_WINDOWS = 8
#: Largest ``-log`` of the scale ``c**k`` that :meth:`AdamCoasting._prefix_sums` applies (its inverse must be finite).
MAX_SCALE_LOG = 600.0
#: Most values at the shared nodes (windows x nodes) per entry that :meth:`AdamCoasting._prefix_sums` keeps.
PREFIX_NODES = 64
#: Longest settled window that F refuses and the sum of the steps before it is not tried for (:meth:`AdamCoasting._settled_sums`).
SHORT_WINDOW = 16
#: Longest settled window summed step by step where neither settled sum serves it (:meth:`AdamCoasting._settled_sums`).
STEP_WINDOW = 64
#: Longest settled window always summed step by step, before any settled sum (:meth:`AdamCoasting._settled_sums`).
QUICK_WINDOW = 8
#: Most pieces a window across a schedule's breaks is cut into on average (:meth:`AdamCoasting._settled_pieces`).
MAX_SETTLED_PIECES = 4
#: Least tolerance (relative) for which late windows are summed through the settled sum (:meth:`AdamCoasting._settled_sums`).
SETTLED_TOL = 2.0**-36
#: Largest cancellation between the sequences of a schedule's rates that :meth:`AdamCoasting._rate_sequences` accepts.
MAX_CANCELLATION = 8.0
#: Largest table of full-window weights ``P_n(s, L)`` by ``s`` (beyond, computed per use).
MAX_TABLE = 1 << 18
#: Last steps whose full-window weights under a schedule are kept, in a ring (:meth:`AdamCoasting._scheduled_full`).
RING_WEIGHTS = 1 << 16


def _tolerance(dtype: np.dtype) -> float:
    """Relative error the catch-up aims below: a sixteenth of the dtype's epsilon."""
    return float(np.finfo(dtype).eps) / 16


class AdamCoasting:
    """Applies dense Adam(W)'s zero-gradient steps ``s + 1 .. T`` to gathered coordinates (module docstring).

    Parameters
    ----------
    lr : float or LearningRate
        The learning rate, or the optimizer's :class:`~sparse_opt._rates.LearningRate`
        (a schedule keeps the fast path only when built in, without weight decay and with ``eps > 0``).
    beta1, beta2, eps, weight_decay : float
        The optimizer's hyper-parameters (``0 <= lr * weight_decay <= 1``).
    dtype : numpy dtype
        The parameters' dtype: the arithmetic of the per-entry work, and the
        rounding the catch-up aims at.
    """

    def __init__(
        self, lr: float | LearningRate, beta1: float, beta2: float, eps: float, weight_decay: float, dtype: np.dtype
    ) -> None:
        self.rate = lr if isinstance(lr, LearningRate) else LearningRate(lr, weight_decay)
        # a schedule has no single lr: lr and c are unused (the expansion's weights, the blocks and the replay take
        # each step's rate from self.rate)
        lr = self.rate.constant if self.rate.constant is not None else 0.0
        self.lr, self.beta1, self.beta2, self.eps, self.weight_decay = lr, beta1, beta2, eps, weight_decay
        self.decay1, self.decay2, self.c = dormant_factors(beta1, beta2, 1.0 - lr * weight_decay, dtype)
        self.dtype = np.dtype(dtype)
        self.tol = _tolerance(self.dtype)
        self.terms = math.ceil(math.log(self.tol) / math.log(THETA))  # N_max
        n = np.arange(self.terms, dtype=np.float64)
        self.powers = (n + 1) / 2  # exponent of (1 - beta2**j) in u_n
        with np.errstate(divide="ignore"):
            d1, d2 = self.decay1, self.decay2
            self.rho = d1 / (self.c * d2**self.powers) if self.c > 0 and d2 > 0 else np.full(self.terms, np.inf)
        #: ``rho_n`` as a pair: its float64 value and the relative rounding ``(rho_exact - rho) / rho`` (see _rho_power)
        self.rho_rounding = _rounding_of_rho(self.rho, d1, d2, self.c) if self.c > 0 and d2 > 0 else np.zeros(self.terms)
        self.window = self._window()
        # the Chebyshev blocks need eps > 0. Their window is the first steps of a gap where the terms end up
        # decaying, q = beta1 / c < 1 (_block_window; under a schedule c is the smallest decay factor, at the peak
        # rate: _uses_blocks), and the last ones where they grow towards its end, q >= 1 at a constant rate
        # (_reverse_window); with eps = 0 and no window, the replay keeps dense Adam's own roundings
        q = self.decay1 / self.c if self.c > 0 else math.inf
        #: Whether the coasting terms grow towards the end of a gap (AdamW with ``1 - lr * weight_decay <= beta1``).
        self.reverse = self.rate.constant is not None and not q < 1
        self.blocks = eps > 0 and (q < 1 or self.reverse)
        #: The smallest decay factor of the dormant steps the current catch-up applies (``c`` at a constant rate).
        self._c_low = self.c
        # where dense Adam's zero-gradient steps stop changing a subnormal m or v (see _stall)
        self.m_floor = stall_floor(1.0 - beta1, self.dtype, lerp=True)
        self.v_floor = stall_floor(beta2, self.dtype, lerp=False)
        # u_n(j) == 1 to rounding from this step on
        self.settled = max(steps_below(beta1, eps_of(self.dtype) / 64), steps_below(beta2, eps_of(self.dtype) / 64))
        #: From this step on both bias corrections are 1 in float64 (``beta**j < 2**-54``; see _summed_steps).
        self.exact_one = max(steps_below(beta1, 2.0**-54), steps_below(beta2, 2.0**-54))
        #: From this step on, ``beta**j <= 2**-60`` for both betas (:meth:`_piece_nodes`).
        self._bias_settled = max(steps_below(beta1, 2.0**-60), steps_below(beta2, 2.0**-60))
        # the pieces of the Gauss rules (_plan, _piece_nodes): the rates at which a term can change per step,
        # |log(d1 / c)| and |log d2| / 2 (the largest pieces: 2**cap <= 1 / (their sum) where b x counts and
        # 1 / |log(d1 / c)| where every term is w / eps)
        l1 = abs(math.log(self.decay1) - math.log(self.c)) if self.decay1 > 0 and self.c > 0 else math.inf
        l2 = -math.log(self.decay2) / 2 if self.decay2 > 0 else math.inf
        self._rates = (l1, l2)
        self._recent_step = -1
        self._recent = np.zeros((self.terms, 0))
        self._summer: AdamCoasting | None = None  # _rate_summer
        self._rho_powers = self._rho_power(np.arange(max(self.window, 1), dtype=np.float64)) if self.window else None
        size = min(self.settled, MAX_TABLE)
        self._full = np.zeros((size, self.terms))
        self._full_known = np.zeros(size, dtype=bool)
        # sum_i rho_n**i: P_n(s, L) past the settled steps at a constant rate (under a schedule, _scheduled_full)
        constant_window = self.window and self.rate.constant is not None
        self._full_settled = self._rho_power(np.arange(1, self.window + 1.0)).sum(axis=1) if constant_window else None
        self._ring_s: np.ndarray | None = None  # _scheduled_full
        self._ring_w = np.zeros((self.terms, 0))

    # -- the window and the weight caches -----------------------------------------
    def _window(self) -> int:
        """``L``, or 0 when the fast path cannot be used (``rho >= 1``, ``L > MAX_WINDOW``, or a schedule that is
        not built in, or comes with weight decay or ``eps = 0``).

        Under a built-in schedule without weight decay the rates go into the
        weights, ``P_n(s, K) = sum_i rho_n**i u_n(s + i) lr_{s+i}``, and the tail
        beyond ``L`` is bounded as at a constant rate times the largest rate over
        the first step's: ``L`` allows ``RATE_SPREAD`` for that ratio, and a
        catch-up whose long windows start at a rate below the largest of their
        steps over ``RATE_SPREAD`` is summed by the blocks instead
        (:meth:`_expand`; hence ``eps > 0``).
        """
        rho = float(self.rho[-1])
        scheduled = self.rate.constant is None
        if scheduled and (self.weight_decay or not self.eps > 0 or not analytic_rates.supports(self.rate.schedule)):
            return 0
        if not rho < 1.0:
            return 0
        if rho == 0.0 or self.beta1 == 0.0:
            return 1
        p = float(self.powers[-1])
        needed = (  # tail / first term below tol, with a factor 2 to spare
            math.log(2 / self.tol)
            + p * math.log(1 / (1 - self.beta2))
            + math.log(1 / (1 - rho))
            + math.log(1 / (1 - self.beta1))
            + (math.log(RATE_SPREAD) if scheduled else 0.0)
        )
        window = math.ceil(needed / math.log(1 / rho)) + 1
        return window if window <= MAX_WINDOW else 0

    def _rho_power(self, e: np.ndarray) -> np.ndarray:
        """``rho_n**e`` for every term ``n`` (axis 0) and the exponents ``e`` (a 1-D array), to a few roundings.

        ``rho_n`` rounded to float64 and then raised to the ``e``-th power errs
        by ``e`` times its rounding (185 epsilons at ``e = 423`` with beta1 =
        0.99 and beta2 = 0.999): the power of the rounded value is corrected
        by ``exp(e * rounding)`` (:func:`_rounding_of_rho`).
        """
        return _power_of_pair(self.rho, self.rho_rounding, e)

    def _uses_blocks(self, through: int) -> bool:
        """Whether the Chebyshev blocks can sum a catch-up through step ``through`` (sets ``_c_low``).

        They need ``eps > 0`` and ``q = beta1 / c < 1``. Under a schedule the
        decay factor ``c_j = 1 - lr_j * weight_decay`` varies by step; the
        smallest, at the schedule's peak rate so far, bounds them all.
        """
        if self.rate.constant is not None:
            return self.blocks
        c_low = 1.0
        if self.weight_decay:
            c_low = float(np.asarray(1.0 - self.rate.peak(through) * self.weight_decay, dtype=self.dtype))
        self._c_low = c_low
        return self.eps > 0 and c_low > 0 and self.decay1 < c_low

    def _u(self, j: np.ndarray) -> np.ndarray:
        """``u_n(j)`` for every term ``n`` (axis 0) and step ``j >= 1`` (further axes)."""
        j = j.astype(np.float64)
        bc1 = 1.0 - power(self.beta1, j)
        bc2 = 1.0 - power(self.beta2, j)
        return bc2[None] ** self.powers.reshape(-1, *([1] * j.ndim)) / bc1[None]

    def _recent_weights(self, through: int) -> np.ndarray:
        """``P_n(T - d, d)`` for ``d = 0 .. L - 1`` at ``T = through``, shape ``(N, L)`` (cached per ``T``).

        The table at ``T`` is built directly (:func:`_discounted_sums`) at the
        anchor ``A = max(1, T - T mod RECENT_ANCHOR)`` and moved on from there one
        step at a time, ``P(T + 1 - d, d) = P(T - (d - 1), d - 1) + rho**d u(T + 1)``
        (one multiply-add per entry; the direct build costs several). The two round
        differently, so the path is fixed by ``T`` alone: the same bits whatever
        was asked before, so that an optimizer restored from a checkpoint continues
        exactly as one that never stopped. A training loop asks for ``T``, then
        ``T + 1``, and continues the cached chain; another ``T`` costs one build
        and at most ``RECENT_ANCHOR - 1`` moves.
        """
        if self._recent_step == through:
            return self._recent
        anchor = max(1, through - through % RECENT_ANCHOR)
        if anchor <= self._recent_step < through:
            step, recent = self._recent_step, self._recent  # the chain from this anchor, cached
        else:
            e = np.arange(self.window - 1)
            j = anchor - e
            u = np.where(j >= 1, self._u_rated(np.maximum(j, 1)), 0.0)
            step, recent = anchor, _discounted_sums(self.rho, self.rho_rounding, u)
        while step < through:
            step += 1
            moved = np.empty_like(recent)
            moved[:, 0] = 0.0
            moved[:, 1:] = recent[:, :-1] + self._rho_powers[:, 1:] * self._u_rated(np.array([step]))
            recent = moved
        self._recent, self._recent_step = recent, through
        return recent

    def _u_rated(self, j: np.ndarray) -> np.ndarray:
        """``u_n(j)``, times ``lr_j`` under a schedule (the rates are in the weights): shape ``(N, *j.shape)``."""
        u = self._u(j)
        if self.rate.constant is not None:
            return u
        return u * self.rate.at_steps(j)

    def _full_weights(self, s: np.ndarray) -> np.ndarray:
        """``P_n(s, L)`` for each ``s`` (any shape), shape ``(N, *s.shape)``."""
        out = np.empty((self.terms, *s.shape))
        settled = s >= self.settled
        if settled.any() and self.rate.constant is None:  # u = 1: sum_i rho**i lr_{s+i}, kept by s
            out[:, settled] = self._scheduled_full(s[settled])
        elif settled.any():
            out[:, settled] = self._full_settled[:, None]
        rest = ~settled
        if rest.any():
            wanted = s[rest]
            tabled = wanted < self._full_known.size
            unknown = np.unique(wanted[tabled][~self._full_known[wanted[tabled]]])
            if unknown.size:
                self._full[unknown] = self._sum_windows(unknown).T
                self._full_known[unknown] = True
            values = np.empty((self.terms, wanted.size))
            values[:, tabled] = self._full[wanted[tabled]].T
            if not tabled.all():
                values[:, ~tabled] = self._sum_windows(wanted[~tabled])
            out[:, rest] = values
        return out

    def _scheduled_full(self, s: np.ndarray) -> np.ndarray:
        """``P_n(s, L)`` under a schedule for ``s`` past :attr:`settled`, from a ring of ``RING_WEIGHTS`` by ``s``.

        Each is a function of ``s`` alone (the schedule is built in, so pure):
        the rows last touched at one step, caught up at later ones, compute it
        once. A training step late in a run brings rows whose last steps its
        steps before brought too, so it computes the few new ones.
        """
        if self._ring_s is None:
            self._ring_s = np.full(RING_WEIGHTS, -1, dtype=np.int64)
            self._ring_w = np.zeros((self.terms, RING_WEIGHTS))
        at = s % RING_WEIGHTS
        kept = self._ring_s[at] == s
        out = np.empty((self.terms, s.size))
        out[:, kept] = self._ring_w[:, at[kept]]
        if not kept.all():
            new = np.unique(s[~kept])
            values = self._sum_windows(new, settled=True)
            out[:, ~kept] = values[:, np.searchsorted(new, s[~kept])]
            self._ring_s[new % RING_WEIGHTS] = new  # (two on one slot: the same one of both arrays stays)
            self._ring_w[:, new % RING_WEIGHTS] = values
        return out

    def _sum_windows(self, s: np.ndarray, settled: bool = False) -> np.ndarray:
        """``P_n(s, L)`` computed directly for a 1-D array of ``s``, shape ``(N, len(s))``, in blocks.

        Under a schedule each term has its step's rate; ``settled`` (every
        ``s`` past :attr:`settled`, ``u = 1``): the rates alone, one product
        per distinct ``s``.
        """
        L = self.window
        i = np.arange(1, L + 1)
        rho_i = self._rho_power(i.astype(np.float64))  # (N, L)
        block = max(1, (1 << 20) // (L * self.terms))
        if settled:
            unique, inverse = np.unique(s, return_inverse=True)
            out = np.empty((self.terms, unique.size))
            base, span = int(unique[0]), int(unique[-1] - unique[0]) + L
            # the windows of one stretch of rates where they hold most of it, else each window's own rates
            near = np.lib.stride_tricks.sliding_window_view(self.rate.over(base + 1, base + 1 + span), L) if (
                span <= min(max(4 * L * unique.size, NODE_BATCH), RATE_MEMO)) else None
            for start in range(0, unique.size, block):
                part = unique[start : start + block]
                rates = near[part - base] if near is not None else self.rate.at_steps(part[:, None] + i[None, :])
                # pairwise along each window, as numpy sums a row: the same bits whatever the other windows (a
                # matrix product's depend on them, and its long runs err by ~7 float64 epsilons)
                out[:, start : start + block] = (rho_i[:, None, :] * rates[None]).sum(axis=-1)
            return out[:, inverse]
        out = np.empty((self.terms, s.size))
        for start in range(0, s.size, block):
            part = s[start : start + block]
            u = self._u_rated(part[:, None] + i[None, :])  # (N, len(part), L)
            out[:, start : start + block] = np.einsum("nl,nsl->ns", rho_i, u)
        return out

    # -- the catch-up -------------------------------------------------------------
    def __call__(
        self, p: np.ndarray, m: np.ndarray, v: np.ndarray, last: np.ndarray, through: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(p, m, v)`` brought current through step ``through``, updated in place and returned.

        ``p``, ``m``, ``v`` are gathered coordinates (same shape, the parameters'
        dtype, writeable); ``last`` holds their last steps (``<= through``) and
        broadcasts against them (``(k, 1)`` for whole table rows: one step per
        row, so the weights are computed once per row).
        """
        gap = through - last
        if not (gap > 0).any():
            return p, m, v
        dtype, shape = self.dtype, p.shape
        k = gap.astype(np.float64)
        decay2 = power(self.decay2, k).astype(dtype)
        dormant = np.broadcast_to(gap > 0, shape)
        coasting = dormant & (m != 0)
        zero_zero = replay = None
        if self.eps == 0.0:
            # dense Adam divides by sqrt(v_hat) alone, and its v reaches exactly 0 only if it is 0 or beta2 <= 0.5
            # (for beta2 > 0.5, v <- beta2 * v stalls at the smallest subnormal instead of rounding to 0)
            v_vanishes = (v == 0) | ((v * decay2 == 0) if self.beta2 <= 0.5 else False)
            zero_zero = dormant & (m == 0) & v_vanishes  # 0 / 0: NaN
            replay = coasting & v_vanishes  # m / 0: only a replay follows it
            # a subnormal v: dense Adam divides by its rounded values, which the closed form (exact powers of
            # beta2) does not reproduce; the replay does, step by step. (A v that only becomes subnormal later
            # has coasting terms below rounding by then whenever the fast path is on: rho_0 < 1.)
            replay |= coasting & (v < np.finfo(dtype).tiny)
            coasting &= ~replay
        if not self.window and coasting.any() and not self._uses_blocks(through):
            replay, coasting = coasting if replay is None else replay | coasting, coasting & False
        slow = None
        if replay is not None and replay.any():
            s_r, k_r = np.broadcast_to(last, shape)[replay], np.broadcast_to(gap, shape)[replay]
            slow = (replay, self._replay(p[replay], m[replay], v[replay], s_r, k_r))
        coast = direct = None
        if coasting.any():
            x = np.sqrt(v)
            layout: tuple | None = None  # whole rows' ranges of x, computed once for the check and the blocks
            if self.window:
                # the expansion converges where x >= x_min: for all when the least coasting x does for every row
                b_last, x_min = self._expansion_floor(last, gap)
                converges = not ((x < x_min.max()) & coasting).any()
                if not converges:
                    layout = self._row_layout(x, last, coasting, through)
                    if layout is not None:  # a row's least x decides for all its entries
                        converges = bool(((layout[0][1][:, None] >= x_min) | (layout[2] <= 0)).all())
                    else:
                        converges = np.array_equal(coasting & (x >= x_min), coasting)
                if converges:
                    coast = self._expand(m, x, last, gap, through, b_last, x_min)
            if coast is None:
                layout = layout or self._row_layout(x, last, coasting, through)
                extremes, s_rows, k_rows = layout if layout is not None else (None, last, gap)
                direct = self._direct_rows(m, x, s_rows, k_rows, coasting, extremes)
        # the decays of k zero-gradient steps, then the coasting
        if self.weight_decay and self.rate.constant is None:
            p *= self.rate.decay(last, through, dtype).astype(dtype)
        elif self.c != 1.0:
            p *= power(self.c, k).astype(dtype)
        decay1 = power(self.decay1, k).astype(dtype)
        m_start = m.copy() if _may_stall(m, decay1, self.m_floor) else None
        v_start = v.copy() if _may_stall(v, decay2, self.v_floor) else None
        m *= decay1
        v *= decay2
        if m_start is not None:
            _stall(m, m_start, self.m_floor)
        if v_start is not None:
            _stall(v, v_start, self.v_floor)
        if coast is not None:
            np.subtract(p, coast, out=p, where=coasting)
        if direct is not None:
            p -= direct  # 0 where not coasting
        if slow is not None:
            p[slow[0]] = slow[1]
        if zero_zero is not None:
            p[zero_zero] = np.nan
        return p, m, v

    def _expansion_floor(self, last: np.ndarray, gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(b_K, x_min)`` per gap: the window's smallest ``b`` and the least ``x`` for which the expansion converges.

        The smallest ``b_i`` of the window sets the worst ratio ``eps / (b x)``;
        ``eps <= THETA b_K x`` is needed (module docstring). Where some
        coordinates fall short, all of them go to the blocks: one pass over
        whole rows costs less than two over masked parts.
        """
        window = np.minimum(gap, self.window)
        b_last = self._powers(self.decay2, 0.5, window) / self._bias_correction(self.beta2, last + window, root=True)
        with np.errstate(divide="ignore"):
            return b_last, (self.eps / (THETA * b_last)).astype(self.dtype)

    def _row_layout(self, x: np.ndarray, last: np.ndarray, coasting: np.ndarray, through: int) -> tuple | None:
        """``((x_max, x_min) per row, last, gap)`` when ``x`` holds whole table rows that each coast in every entry or none.

        The rows that do not coast (touched on the step before, or ``m =
        0``) become windows of no steps (their last step ``through``), so
        the blocks sum every row without masks. None for any other layout.
        """
        if not _whole_rows(x, last):
            return None
        coasts = np.count_nonzero(coasting)
        live = last[:, 0] < through  # the dormant rows: when all their entries coast, no reduction along rows
        if coasts != np.count_nonzero(live) * x.shape[1]:
            live = coasting.any(axis=1)
            if coasts != np.count_nonzero(live) * x.shape[1]:
                return None
        s_rows = np.where(live[:, None], last, through)
        return _row_extremes(x, x), s_rows, through - s_rows

    def _expand(
        self,
        m: np.ndarray,
        x: np.ndarray,
        last: np.ndarray,
        gap: np.ndarray,
        through: int,
        b_last: np.ndarray,
        x_min: np.ndarray,
    ) -> np.ndarray | None:
        """The expanded coasting ``lr m S`` from ``m_s`` and ``x = sqrt(v_s)``, where it converges (``x >= x_min``).

        ``b_last`` and ``x_min`` are :meth:`_expansion_floor`'s. None under a
        schedule whose long windows start at a rate below the largest rate of
        their steps over ``RATE_SPREAD`` (:meth:`_window`).
        """
        L = self.window
        long = gap >= L
        scheduled = self.rate.constant is None
        if scheduled and long.any():  # the tails' rates may exceed the first steps' by RATE_SPREAD (_window)
            first = self.rate.at_steps(last[long] + 1)
            if float(first.min()) * RATE_SPREAD < self.rate.largest(int(last[long].min()) + 1, through):
                return None
        if self.eps == 0.0:
            terms = 1
        else:  # enough terms for the worst eligible coordinate: x is at least the smallest x and its x_min
            smallest = np.maximum(x.min(), x_min)
            with np.errstate(divide="ignore"):
                worst = float(np.max(np.where(gap > 0, self.eps / (smallest * b_last), 0.0)))
            terms = min(self.terms, max(1, math.ceil(math.log(self.tol) / math.log(worst)))) if worst > 0 else 1
        weights = self._recent_weights(through)[:terms, np.minimum(gap, L - 1)]
        if long.any():
            weights[:, long] = self._full_weights(last[long])[:terms]
        if not scheduled:  # (under a schedule the rates are in the weights, and there is no decay)
            weights = weights * (self.lr * power(self.c, gap))
        weights = weights.astype(self.dtype)
        # lr m S = lr c**k m / x * sum_n P_n (-eps / x)**n, by Horner's rule
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inv_x = 1 / x
            acc = np.broadcast_to(weights[terms - 1], x.shape)
            if terms > 1:
                z = inv_x * -self.dtype.type(self.eps)
                for n in range(terms - 2, -1, -1):
                    acc = acc * z
                    acc += weights[n]
            coast = m * inv_x
            coast *= acc
        return coast

    def _direct_rows(
        self,
        m: np.ndarray,
        x: np.ndarray,
        last: np.ndarray,
        gap: np.ndarray,
        wanted: np.ndarray,
        extremes: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """:meth:`_direct` on the catch-up's arrays (any shape, ``last`` broadcasting), in the dtype, shaped like ``m``."""
        shape = m.shape
        if m.ndim == 2 and np.ndim(last) == 2 and np.shape(last)[1] == 1:  # whole table rows: one (s, k) per row
            s, k = np.broadcast_to(last, (shape[0], 1)), np.broadcast_to(gap, (shape[0], 1))
            return self._direct(m, x, s, k, wanted, extremes)
        s = np.broadcast_to(last, shape).reshape(-1, 1)
        k = np.broadcast_to(gap, shape).reshape(-1, 1)
        flat = self._direct(m.reshape(-1, 1), x.reshape(-1, 1), s, k, wanted.reshape(-1, 1))
        return flat.reshape(shape)

    def _direct(
        self,
        m: np.ndarray,
        x: np.ndarray,
        last: np.ndarray,
        gap: np.ndarray,
        wanted: np.ndarray,
        extremes: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """``lr * m * S`` where ``wanted``, by Chebyshev blocks shared by each row (module docstring).

        ``m``, ``x = sqrt(v)`` and ``wanted`` have shape ``(R, C)``; ``last``
        and ``gap`` ``(R, 1)``: one ``(s, k)`` per row. Rows with equal ``s``
        share their weights and blocks, and where that saves most of the work,
        all rows share the steps after the latest ``s`` (module docstring,
        *Cost*). ``extremes``, each row's largest and smallest ``x``, is given
        when the wanted entries are every entry of the rows with a positive
        gap: then every row is summed, those with a zero gap as a window of no
        steps, without masks. Returns an ``(R, C)`` array in the dtype, 0 where
        not wanted.
        """
        rows, whole = None, True  # every row, or the rows with a wanted entry
        if extremes is None and wanted.all():
            extremes = _row_extremes(x, x)
        if extremes is not None:
            x_row, x_low = extremes
        else:
            rows = np.flatnonzero(wanted.any(axis=1))
            x, wanted = x[rows], wanted[rows]
            whole = bool(wanted.all())  # the rows that coast do so in every entry: no masks
            x_row, x_low = _row_extremes(x, x) if whole else _row_extremes(np.where(wanted, x, 0), np.where(wanted, x, np.inf))
        # every catch-up brings its coordinates through the same step, so the window (s, k) is fixed by s
        classes, row_class = distinct(last[:, 0] if rows is None else last[rows, 0])
        x_class = np.zeros(len(classes))
        np.maximum.at(x_class, row_class, x_row)
        x_least = np.full(len(classes), np.inf)
        np.minimum.at(x_least, row_class, x_low)
        gaps = np.zeros(len(classes), dtype=np.int64)
        gaps[row_class] = gap[:, 0] if rows is None else gap[rows, 0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            settled = self._settled_sums(x, row_class, classes, gaps, x_least, x_class)  # late in training
        if settled is not None:
            return self._coasting(m, rows, whole, wanted, *settled)
        latest = int(classes[gaps > 0].max())  # the latest last step of a row that is dormant
        head = np.maximum(latest - classes, 0)  # steps before it (0 for the rows touched on the step before)
        tail = int(gaps[np.searchsorted(classes, latest)])  # the steps every dormant row is dormant for
        windows = share = None
        scale = power(self.decay2, head / 2)  # b of step latest + l, seen from s: beta2**(head / 2) b_l(latest)
        if classes.size > 1 and self.reverse:  # windows cut from the end: the steps after `latest` are shared
            alone = np.minimum(gaps, self._reverse_window(classes, gaps)).sum()
            heads = np.minimum(head, self._reverse_window(classes, head)).sum()
            share = 2 * (heads + min(tail, int(self._reverse_window(np.array([latest]), np.array([tail]))[0]))) < alone
        elif classes.size > 1:
            windows = self._block_window(classes, x_class)
            alone = np.minimum(gaps, windows).sum()
            if 2 * np.minimum(head, windows).sum() < alone:  # worth the shared window's bound
                shared = self._block_window(np.array([latest]), np.array([float((x_row * scale[row_class]).max())]))[0]
                share = 2 * (np.minimum(head, windows).sum() + min(tail, shared)) < alone
        if share and rows is None and not gaps.all():  # the rows touched on the step before do not share: masked
            return self._direct(m, x, last, gap, wanted)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            if share:
                # S(s, k) = c**tail S(s, head) + beta1**head S(latest, tail, beta2**(head/2) x): the long windows of
                # the rows last touched before `latest` all end in the same steps, summed once
                acc, const = self._sum_rows(x, row_class, classes, head, x_least, x_class)
                across = scale[row_class].astype(self.dtype)[:, None]
                one = np.zeros(row_class.size, dtype=np.int64)
                x_shared = x * across
                acc_s, const_s = self._sum_rows(
                    x_shared,
                    one,
                    np.array([latest]),
                    np.array([tail]),
                    np.array([float((x_low * scale[row_class]).min())]),
                    np.array([float((x_row * scale[row_class]).max())]),
                )
                later = power(self.decay1, head[row_class])
                tail_decay = self._decay(latest, latest + tail)
                acc *= self.dtype.type(tail_decay)
                acc += acc_s * later.astype(self.dtype)[:, None]
                const = tail_decay * const + later * const_s
            else:
                shared = self._prefix_sums(x, row_class, classes, gaps, x_least, x_class)
                acc, const = shared or self._sum_rows(x, row_class, classes, gaps, x_least, x_class, windows)
        return self._coasting(m, rows, whole, wanted, acc, const)

    def _coasting(
        self,
        m: np.ndarray,
        rows: np.ndarray | None,
        whole: bool,
        wanted: np.ndarray,
        acc: np.ndarray,
        const: np.ndarray,
    ) -> np.ndarray:
        """:meth:`_direct`'s result from the sums ``acc`` (the dtype, per entry of ``rows``) and ``const`` (per row).

        ``lr m (acc + const / eps)`` where wanted, 0 elsewhere, in the dtype
        and shaped like ``m`` (``rows`` None: every row).
        """
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            m_rows = m if rows is None else m[rows]
            lr = self.lr if self.rate.constant is not None else 1.0  # a schedule's rates are in the weights
            coast = m_rows * self.dtype.type(lr)
            coast *= acc
            if const.any():  # lr * m enters the term: with a tiny eps and v = 0, 1 / eps alone overflows (> 1e307)
                lr_m = lr * m_rows.astype(np.float64)
                coast += np.where(const[:, None] != 0, (lr_m * const[:, None]) / self.eps, 0.0).astype(self.dtype)
        if rows is None:
            return coast
        out = np.zeros(m.shape, dtype=self.dtype)
        out[rows] = coast if whole else np.where(wanted, coast, 0)
        return out

    def _sum_rows(
        self,
        x: np.ndarray,
        row_class: np.ndarray,
        s: np.ndarray,
        k: np.ndarray,
        x_min: np.ndarray,
        x_max: np.ndarray,
        windows: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``sum_blocks H(t) / (b_c x + eps)`` for rows ``x`` (``(R, C)``) of windows ``(s, k)[row_class]``, and each row's constant.

        Returns the block sums (the dtype, shape of ``x``) and, per row, the
        weight of the terms summed as ``w / eps`` (:meth:`_blocks`; ``windows``,
        when given, is its ``_block_window(s, x_max)``).
        """
        entries = np.bincount(row_class, minlength=s.size) * x.shape[1]
        const, blk_start, blk_count, b_c, t_mid, t_half, coef, terms, smooth = self._blocks(
            s, k, x_min, x_max, windows, entries
        )
        blocks = (blk_start, blk_count, b_c, t_mid, t_half, coef, terms)
        # windows of many blocks are summed through interpolants in log x (the same cost whatever the blocks);
        # the rest in order of the terms their first block needs: each group of them is a slice
        count = np.where(smooth, 0, blk_count)[row_class]
        first_terms = np.zeros(row_class.size, dtype=np.int64)
        if terms.size:
            first_terms[count > 0] = terms[blk_start[row_class[count > 0]]]
        order = np.argsort(first_terms, kind="stable")
        xs, cls, first_terms, count = x[order], row_class[order], first_terms[order], count[order]
        acc = np.empty(x.shape, dtype=self.dtype)
        edges = np.flatnonzero(np.diff(first_terms)) + 1
        for lo, hi in zip([0, *edges.tolist()], [*edges.tolist(), cls.size]):
            if first_terms[lo] == 0:  # no block: every term of the window is in const
                acc[lo:hi] = 0
                continue
            blk = blk_start[cls[lo:hi]]
            self._evaluate(xs[lo:hi], b_c[blk], t_mid[blk], t_half[blk], coef[blk, : first_terms[lo]], out=acc[lo:hi])
        for o in range(1, int(count.max()) if count.size else 0):  # further blocks (b varying more than 2x)
            sel = np.flatnonzero(count > o)
            blk = blk_start[cls[sel]] + o
            acc[sel] += self._evaluate(xs[sel], b_c[blk], t_mid[blk], t_half[blk], coef[blk, : terms[blk].max()])
        if smooth.any():
            sel = np.flatnonzero(smooth[cls])
            acc[sel] = self._smooth_sums(xs[sel], cls[sel], np.flatnonzero(smooth), blocks, x_min, x_max)
        out = np.empty_like(acc)
        out[order] = acc
        return out, const[row_class]

    def _settled_sums(
        self,
        x: np.ndarray,
        row_class: np.ndarray,
        s: np.ndarray,
        k: np.ndarray,
        x_min: np.ndarray,
        x_max: np.ndarray,
        rates: list[tuple[np.ndarray | None, float, float]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`_sum_rows` late in training through the settled sum ``F``; None where it does not apply.

        Once both bias corrections are 1 (``s >= exact_one`` for every window
        with steps), at a constant rate, a window of ``K`` steps (its whole
        gap) sums ``c**K S_K(x)``, ``S_K(x) = F(x) - r**K F(q**K x)`` with ``r
        = d1 / c < 1`` and one function ``F`` of ``x`` for every window
        (:mod:`sparse_opt._settled_sum`, tabulated once for the process): an
        entry costs one evaluation of ``F``, and a second where ``d1**K F(0)``
        exceeds ``2**-60`` of ``c**K`` times a bound below its window's least ``F``. ``r``
        is ``d1 / c`` rounded, its exact rounding carried (none when ``c =
        1``). Under a schedule whose rates are a few geometric sequences along
        every window (:meth:`_settled_rates`: ``lr(s + i) = sum_m Re(f_m(s)
        z_m**i)``, ``z_m = gamma_m e**(i phase_m)``), each sequence takes the
        ``F`` of ``r z_m`` the same way, with ``(r z_m)**K`` for ``r**K``;
        windows across the schedule's breaks are cut into pieces first
        (:meth:`_settled_pieces`).
        With ``delta`` the largest error of the ``F`` (and ``4 u`` for ``q**K
        x`` and ``c**K``, ``8 u + |phase K| u`` more for a complex sequence's
        factor and ``e**(i phase K)``), a window is taken where ``(delta + u)
        sum_m |f_m| (c**K |F|(x) + d1**K |F|(q**K x)) <= (tol / 8) c**K S_K``
        for every entry (``|F|``: the real ``F`` of ``r``, which bounds every
        modulus, ``gamma_m <= 1``; only the far windows can fail this at a
        constant rate). The
        windows of ``QUICK_WINDOW`` steps or fewer, a large share of the
        entries when a few rows are touched at almost every step, are summed
        step by step first (:meth:`_short_sums`: ``K`` terms cost less than
        two evaluations of ``F``). The
        others, where ``S_K`` is a small part of ``F``: the windows of more
        than ``SHORT_WINDOW`` steps from the steps before them where the terms
        rise (:meth:`_sums_before`), then those of ``STEP_WINDOW`` steps or
        fewer step by step (:meth:`_short_sums`), and the rest as before
        (:meth:`_prefix_sums` or :meth:`_sum_rows`). Requires a dtype
        whose tolerance allows it (not float64: ``delta`` is about ``1e-13``),
        ``F(0)`` within its range and ``c**K`` above ``exp(-MAX_SCALE_LOG)``.
        ``rates``, when given, are the windows' :meth:`_settled_rates` (found
        by the caller: the windows after the quick ones).
        """
        live = k > 0
        if (
            self.reverse
            or not self.c > 0.0
            or self.tol < SETTLED_TOL
            or not live.any()
            or int(s[live].min()) < self.exact_one
            or (self.c < 1.0 and float(k.max()) * -math.log(self.c) > MAX_SCALE_LOG)
        ):
            return None
        if rates is None:
            pieces = self._settled_pieces(x, row_class, s, k, x_min, x_max) if self.rate.constant is None else None
            if pieces is not None:
                return pieces
            rates = self._settled_rates(s, k)
            if rates is None:
                return None
        quick = live & (k <= QUICK_WINDOW)
        if quick.any():  # the shortest windows step by step (cheaper than two evaluations of F), the others below
            out, const = np.zeros(x.shape, dtype=self.dtype), np.zeros(row_class.size)
            rows = np.flatnonzero(quick[row_class])
            out[rows] = self._short_sums(x[rows].astype(np.float64), s[row_class[rows]], k[row_class[rows]]).astype(self.dtype)
            if (live & ~quick).any():
                rows = np.flatnonzero(~quick[row_class])
                rest = self._settled_sums(x[rows], row_class[rows], s, np.where(quick, 0, k), x_min, x_max, rates)
                if rest is None:
                    return None
                out[rows], const[rows] = rest
            return out, const
        ratio, rounding = self._settled_factors[0]
        modulus = settled_sum(ratio, self.decay2, self.eps, rounding)
        scaled = {gamma: self._scaled_factor(gamma) for _, _, gamma in rates}
        sums = [
            settled_sum(scaled[gamma][0], self.decay2, self.eps, scaled[gamma][1], phase) if phase or gamma != 1.0 else modulus
            for _, phase, gamma in rates
        ]
        if any(f is None for f in sums) or modulus.ceiling >= float(np.finfo(self.dtype).max) / 4:
            return None
        x_hi = float(x_max[live].max())
        if not all(f.reach(x_hi) for f in sums):
            return None
        wide = x.astype(np.float64)
        k_f = k.astype(np.float64)
        scale = power(self.c, k_f)  # c**K: 1 without decay
        powers = power(self.decay1, k_f)  # c**K r**K
        # F(x) >= r / ((1 - r) (x + eps)) (every q**i <= 1): the window's least F is above half that at its largest
        # x (halved: whatever the roundings of r, 1 - r and the division)
        least = 0.5 * ratio / (-math.expm1(math.log(ratio)) * (x_max + self.eps))
        far = live & (powers * modulus.ceiling > 2.0**-60 * scale * least)
        delta = max(f.error() for f in sums) + 4.0 * U64  # and the shift q**K x, the scale c**K
        turns = [abs(phase) for _, phase, _ in rates if phase]
        if turns:  # a complex factor f_m, e**(i phase K) (its angle phase K rounded) and the products
            delta += (8.0 + max(turns) * float(k_f[far].max(initial=0.0))) * U64
        kappa = (delta + U64) / (self.tol / 8)  # a window is taken where kappa spread <= its sum
        if not kappa < 1.0:
            return None
        every = bool(far[row_class].all())  # every row's window far: whole arrays, no gathers
        rows = np.arange(row_class.size) if every else np.flatnonzero(far[row_class])
        on_far = row_class if every else row_class[rows]
        whole = modulus(wide)  # |F| over the window's steps and all after them
        if self.c < 1.0:
            whole *= scale[row_class, None]
        if rows.size:
            shifted = (wide if every else wide[rows]) * power(self.decay2, k_f / 2)[on_far, None]
            after = modulus(shifted)
            after *= powers[on_far, None]
        if rates[0][0] is None:  # one sum of positive terms: only the far windows can fall short of their bound
            acc = whole
            if rows.size:
                part = acc if every else acc[rows]
                wrong = after * (1.0 + kappa) > part * (1.0 - kappa)  # kappa (F + later) > F - later
                part -= after
                if not every:
                    acc[rows] = part
                bad = np.bincount(on_far, weights=wrong.sum(axis=1), minlength=s.size) > 0
            else:
                bad = np.zeros(s.size, dtype=bool)
        else:
            magnitude = sum(np.abs(factor) for factor, _, _ in rates)
            spread = whole * magnitude[row_class, None]  # |F| of r bounds the moduli of r gamma e**(i phase)
            acc = np.zeros(x.shape)
            for (factor, phase, gamma), found in zip(rates, sums):
                term = whole if found is modulus else found(wide) * scale[row_class, None]
                if rows.size:  # minus the steps after the window
                    later = after if found is modulus else found(shifted) * powers[on_far, None]
                    if gamma != 1.0:
                        later *= np.power(gamma, k_f)[on_far, None]
                    if phase:
                        later = later * np.exp(1j * phase * k_f)[on_far, None]
                    term = term - later if every else term.copy()
                    if not every:
                        term[rows] -= later
                acc += (factor[row_class, None] * term).real
            if every:
                spread += after * magnitude[on_far, None]
            elif rows.size:
                spread[rows] += after * magnitude[on_far, None]
            wrong = ~(kappa * spread <= acc)
            bad = np.bincount(row_class, weights=(wrong & live[row_class, None]).sum(axis=1), minlength=s.size) > 0
        if not live.all():
            acc[~live[row_class]] = 0.0  # windows of no steps
        out = acc.astype(self.dtype)
        const = np.zeros(row_class.size)
        tried = bad & (k > SHORT_WINDOW)
        again = np.flatnonzero(tried[row_class])
        on_rows = [(None if weight is None else weight[row_class[again]], phase, gamma) for weight, phase, gamma in rates]
        before = self._sums_before(wide[again], k[row_class[again]], on_rows) if again.size else None
        if before is not None:  # terms that rise along the window: from the steps before it
            values, within = before
            fine = tried & (np.bincount(row_class[again], weights=~within.all(axis=1), minlength=s.size) == 0)
            taken = fine[row_class[again]]
            out[again[taken]] = values[taken].astype(self.dtype)
            bad &= ~fine
        short = np.flatnonzero((bad & (k <= STEP_WINDOW))[row_class])
        if short.size:  # step by step
            out[short] = self._short_sums(wide[short], s[row_class[short]], k[row_class[short]]).astype(self.dtype)
        bad &= k > STEP_WINDOW
        if bad.any():  # the other windows whose S_K is a small part of F: as before
            windows = np.flatnonzero(bad)
            rows = np.flatnonzero(bad[row_class])
            args = (x[rows], np.searchsorted(windows, row_class[rows]), s[windows], k[windows], x_min[windows], x_max[windows])
            out[rows], const[rows] = self._prefix_sums(*args) or self._sum_rows(*args)
        return out, const

    def _settled_rates(self, s: np.ndarray, k: np.ndarray) -> list[tuple[np.ndarray | None, float, float]] | None:
        """The rates of settled windows as sequences ``Re(f_m(s) (gamma_m e**(i phase_m))**i)``: ``[(f_m, phase_m, gamma_m)]``; None if not.

        At a constant rate, ``[(None, 0, 1)]`` (the rate is applied after,
        :meth:`_coasting`). Under a built-in schedule without weight decay,
        where each window's steps ``s + 1 .. s + K`` lie in one segment of it
        (:mod:`sparse_opt._analytic_rates`; :meth:`_settled_pieces` cuts the
        others), ``f_m`` holds one factor per window (0 where its segment has
        no such sequence):

        - a constant segment: ``lr(lo)``, phase 0;
        - a cosine, ``lr(j) = f + (lr - f) sin(omega (T - j))**2 = (lr + f) / 2
          - (lr - f) / 2 cos(2 omega (T - j))``: ``(lr + f) / 2`` with phase 0,
          and ``-(lr - f) / 2 e**(2 i omega (T - s))`` with phase ``-2 omega``
          (``T - s`` exact before it is a float);
        - an exponential decay, ``lr(s + i) = lr(s + 1) / gamma gamma**i``:
          ``lr(s + 1) / gamma`` with ``gamma``.

        Where ``lr`` and ``f`` differ much the cosine's two can cancel, which
        the bound of :meth:`_settled_sums` counts (``|f_m|``). Warm-ups are
        left to the other paths (None).
        """
        if self.rate.constant is not None:
            return [(None, 0.0, 1.0)]
        schedule = self.rate.schedule
        if self.weight_decay or not analytic_rates.supports(schedule):
            return None
        live = np.flatnonzero(k > 0)
        window, seg_lo, _, kind, _, _ = analytic_rates.segments(schedule, s[live] + 1, s[live] + k[live])
        if window.size != live.size or (kind == analytic_rates.LINEAR).any():
            return None
        rates = [(np.zeros(s.size), 0.0, 1.0)]
        flat, cosine, power = (kind == analytic_rates.CONSTANT), (kind == analytic_rates.COSINE), (kind == analytic_rates.EXPONENTIAL)
        rates[0][0][live[flat]] = schedules.values_at(schedule, seg_lo[flat])
        if cosine.any():
            total, warm, peak, final = schedule.total_steps, schedule.warmup_steps, schedule.lr, schedule.final_lr
            omega = math.pi / (2.0 * (total - warm))
            on = live[cosine]
            rates[0][0][on] = (peak + final) / 2
            turn = np.zeros(s.size, dtype=np.complex128)
            turn[on] = -(peak - final) / 2 * np.exp(2j * omega * (total - s[on]).astype(np.float64))
            rates.append((turn, -2.0 * omega, 1.0))
        if power.any():
            on = live[power]
            decayed = np.zeros(s.size)
            decayed[on] = schedules.values_at(schedule, s[on] + 1) / schedule.gamma
            rates.append((decayed, 0.0, schedule.gamma))
        return rates

    def _settled_pieces(
        self, x: np.ndarray, row_class: np.ndarray, s: np.ndarray, k: np.ndarray, x_min: np.ndarray, x_max: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`_settled_sums` for windows across a schedule's breaks (a step decay's drops, a cosine's end); None if none.

        A window's steps from its ``o``-th on are ``d1**o`` times a window of
        their own from step ``s + o``, seen at ``q**o x``: each window is cut
        at the breaks into pieces that lie in one segment
        (:func:`sparse_opt._analytic_rates.segments`), the pieces are summed
        as windows by :meth:`_settled_sums` (their rows' ``x`` moved in
        float64), and each window's sums added up, ``d1**o`` times each (no
        weight decay under a schedule here: ``c = 1``). Each piece within a
        float32 rounding plus ``tol / 8`` of its sum, and the sums positive:
        a window within two roundings plus that, and the one of its total.
        At most ``MAX_SETTLED_PIECES`` pieces a window on average.
        """
        live = np.flatnonzero(k > 0)
        if self.weight_decay or not live.size or not analytic_rates.supports(self.rate.schedule):
            return None
        window, lo, hi, _, _, _ = analytic_rates.segments(self.rate.schedule, s[live] + 1, s[live] + k[live])
        if window.size == live.size or window.size > MAX_SETTLED_PIECES * live.size:
            return None
        owner = live[window]  # each piece's window, pieces of a window in order
        offset = lo - 1 - s[owner]  # the window's steps before the piece
        by_window = np.argsort(row_class, kind="stable")
        counts = np.bincount(row_class, minlength=s.size)
        first = np.cumsum(counts) - counts
        piece = np.repeat(np.arange(owner.size), counts[owner])  # each expanded row's piece
        within = np.arange(piece.size) - np.repeat(np.cumsum(counts[owner]) - counts[owner], counts[owner])
        rows = by_window[first[owner][piece] + within]  # each expanded row's row of x
        shift = power(self.decay2, offset / 2.0)
        found = self._settled_sums(
            x[rows].astype(np.float64) * shift[piece, None], piece, lo - 1, hi - lo + 1, x_min[owner] * shift, x_max[owner] * shift
        )
        if found is None:
            return None
        acc, const = found
        weight = power(self.decay1, offset)
        out, total = np.zeros(x.shape), np.zeros(row_class.size)
        rank = np.arange(owner.size) - np.searchsorted(owner, owner)  # a piece's place in its window
        for r in range(int(rank.max()) + 1):  # the rows of one rank's pieces are distinct
            sel = np.flatnonzero(rank[piece] == r)
            out[rows[sel]] += acc[sel].astype(np.float64) * weight[piece[sel], None]
            total[rows[sel]] += const[sel] * weight[piece[sel]]
        return out.astype(self.dtype), total

    def _sums_before(
        self, x: np.ndarray, k: np.ndarray, rates: list[tuple[np.ndarray | None, float, float]]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Settled gaps of ``k`` steps (rows ``x``, float64) from the steps *before* them: ``(sums, within tolerance)``.

        Where the terms rise along a window (``r > q``: ``(r / q)**i / x``
        while ``q**i x`` is far above ``eps``), the short windows are a small
        part of ``F`` and :meth:`_settled_sums` refuses them. The steps ``i <=
        0`` continue the window backwards and their sum converges, ``G(x) =
        sum_{j>=0} z**-j / (q**-j x + eps)`` for each sequence's ``z = r gamma
        e**(i phase)`` (``rates``, per row, :meth:`_settled_rates`), so ``c**K
        S_K = d1**K (gamma e**(i phase))**K G(q**K x) - c**K G(x)``. ``G`` is a
        settled sum too: ``G(x) = 1 / (x + eps) + F'(1 / x) / (x eps)`` with
        ``F'`` that of ``q / z`` (phase ``-phase``; ``q / (r gamma)``'s
        rounding carried, ``sqrt(d2)`` to 256 bits), ``d2`` and ``1 / eps``,
        each of its terms ``(q / z)**j / (q**j / x + 1 / eps)`` times ``1 / (x
        eps)`` being ``z**-j / (q**-j x + eps)``. ``G`` errs by ``F'``'s
        ``delta`` (of ``|G|``, the ``G`` of ``r gamma``, which bounds the
        window with the sequence's ``|f|``) plus ``8 u`` (``1 / x`` and ``1 / eps`` rounded, the
        divisions, the sum, the shift ``q**K x``), and a complex sequence as in
        :meth:`_settled_sums`; a window is taken as there. None where the terms
        do not rise, or an ``x`` or ``q**K x`` is 0 or beyond ``F'``'s pieces.
        """
        k_f = k.astype(np.float64)
        shifted = x * power(self.decay2, k_f / 2)[:, None]
        if not (shifted > 0).all():
            return None
        found: dict[tuple[float, float], SettledSum] = {}  # by (gamma, phase): each sequence's F' and its moduli'
        for _, phase, gamma in rates:
            factor, rounding = self._before_factor(gamma)
            if not factor < 1.0:
                return None
            for turn in {0.0, -phase}:
                f = settled_sum(factor, self.decay2, 1.0 / self.eps, rounding, turn)
                with np.errstate(over="ignore"):
                    if f is None or not f.reach(float(1.0 / shifted.min())):
                        return None
                found[gamma, turn] = f

        def before(f: SettledSum, z: np.ndarray) -> np.ndarray:
            return 1.0 / (z + self.eps) + f(1.0 / z) / (z * self.eps)

        scale, powers = power(self.c, k_f)[:, None], power(self.decay1, k_f)[:, None]
        moduli = {  # |G| of each gamma, from the steps before the window and before its end
            gamma: (before(found[gamma, 0.0], x) * scale, before(found[gamma, 0.0], shifted) * powers * np.power(gamma, k_f)[:, None])
            for gamma in {gamma for _, _, gamma in rates}
        }
        sums, spread = np.zeros(x.shape), np.zeros(x.shape)
        for weight, phase, gamma in rates:
            first, last = moduli[gamma]
            term = last - first
            if phase:
                f = found[gamma, -phase]
                term = before(f, shifted) * powers * (np.power(gamma, k_f) * np.exp(1j * phase * k_f))[:, None] - before(f, x) * scale
            sums += term if weight is None else (weight[:, None] * term).real
            spread += (last + first) if weight is None else (last + first) * np.abs(weight)[:, None]
        delta = max(f.error() for f in found.values()) + 8.0 * U64
        turns = [abs(phase) for _, phase, _ in rates if phase]
        if turns:
            delta += (8.0 + max(turns) * float(k_f.max())) * U64
        return sums, (delta + U64) * spread <= (self.tol / 8) * sums

    def _scaled_factor(self, gamma: float) -> tuple[float, float]:
        """``(r gamma, rounding)``: ``r = d1 / c`` times an exponential schedule's ``gamma``, rounded, and its exact relative rounding."""
        (a1, b1), (ac, bc), (ag, bg) = self.decay1.as_integer_ratio(), self.c.as_integer_ratio(), gamma.as_integer_ratio()
        value = self.decay1 * gamma / self.c
        return value, ratio_rounding(value, a1 * ag * bc, b1 * bg * ac)

    def _before_factor(self, gamma: float) -> tuple[float, float]:
        """``(q / (r gamma), rounding)``: the factor of the sum of the steps before a window (:meth:`_sums_before`) and its exact rounding."""
        if gamma == 1.0:
            return self._settled_factors[1]
        (a1, b1), (ac, bc), (ag, bg) = self.decay1.as_integer_ratio(), self.c.as_integer_ratio(), gamma.as_integer_ratio()
        root_num, root_den = root_ratio(self.decay2)
        value = math.sqrt(self.decay2) / self._scaled_factor(gamma)[0]
        return value, ratio_rounding(value, root_num * ac * b1 * bg, root_den * bc * a1 * ag)

    @functools.cached_property
    def _settled_factors(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``((r, rounding), (q / r, rounding))``: the factors of the settled sums ``F`` and ``F'`` and their exact roundings.

        ``r = d1 / c`` (:meth:`_settled_sums`) and ``q / r = sqrt(d2) c / d1``
        (:meth:`_sums_before`), from the float64 factors' integer ratios
        (``sqrt(d2)`` to 256 bits): constants of the catch-up, found once.
        """
        (a1, b1), (ac, bc) = self.decay1.as_integer_ratio(), self.c.as_integer_ratio()
        ratio = self.decay1 / self.c
        root_num, root_den = root_ratio(self.decay2)
        factor = math.sqrt(self.decay2) / ratio
        return (
            (ratio, ratio_rounding(ratio, a1 * bc, b1 * ac)),
            (factor, ratio_rounding(factor, root_num * ac * b1, root_den * bc * a1)),
        )

    def _short_sums(self, x: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        """``sum_{i=1..k} lr_i c**(k-i) d1**i / (q**i x + eps)`` for rows ``x`` (``(R, C)``, float64) of settled gaps of ``k >= 1`` steps after ``s``, one by one.

        ``lr_i = lr(s + i)`` under a schedule (else 1, the rate applied after).
        """
        order = np.argsort(-k, kind="stable")  # the longest windows first: step i sums the first rows, k >= i
        x, s, k = x[order], s[order], k[order]
        acc = np.zeros(x.shape)
        steps = np.arange(1, int(k[0]) + 1)
        rates = None
        if self.rate.constant is None:  # every step's rate at once (a window's steps past k: its last, never used)
            rates = schedules.values_at(self.rate.schedule, s[:, None] + np.minimum(k[:, None], steps[None, :]))
        for i, rows in zip(steps.tolist(), np.searchsorted(-k, -steps, side="right").tolist()):
            weight = self.c ** (k[:rows] - i).astype(np.float64) * self.decay1**i
            if rates is not None:
                weight *= rates[:rows, i - 1]
            acc[:rows] += weight[:, None] / (self.decay2 ** (i / 2) * x[:rows] + self.eps)
        out = np.empty_like(acc)
        out[order] = acc
        return out

    def _prefix_sums(
        self, x: np.ndarray, row_class: np.ndarray, s: np.ndarray, k: np.ndarray, x_min: np.ndarray, x_max: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`_sum_rows` for many windows late in training, through prefix sums at shared nodes; None where it does not apply.

        Once both bias corrections are 1 (``s >= exact_one`` for every window),
        step ``i`` of every window has the same ``a_i = beta1**i`` and ``b_i =
        beta2**(i/2)``: at a constant rate, a window of ``K`` summed steps is
        ``c**(k - k_ref)`` times the first ``K`` terms of one sequence
        ``c**(k_ref - i) a_i / (b_i x + eps)`` (``k_ref`` the longest); under a
        schedule without weight decay, a combination of the first ``K`` terms of
        a few sequences ``shape_m(i) a_i / (b_i x + eps)`` with factors of its
        last step (:meth:`_rate_sequences`). All windows are summed as in
        :meth:`_smooth_sums`, through interpolants in ``log x`` on pieces of
        ``PIECE_WIDTH``, but the pieces are common, over every window's range
        of ``x``, and the node values come from the sequences: their steps are
        cut where some window's summed steps end, each stretch summed once by
        the blocks (:meth:`_terms_blocks`, held to ``tol / 64``) at every node,
        and a window's values are the running sums of the stretches up to its
        end, combined. A training step late in a long run (its rows last
        touched one to ``10**5`` steps before) sums one to three sequences of
        its longest window instead of one window per row, and an entry costs a
        logarithm and one polynomial by Horner's rule.

        All terms are positive, so the running sum of ``n`` stretches errs by
        at most ``n`` float64 roundings of the sum: it applies where that is
        below ``tol / 64`` (float32 and narrower). Also required: ``eps >
        0``, terms that do not grow along the window (:attr:`reverse` false),
        at a constant rate ``c**k_ref`` above ``exp(-MAX_SCALE_LOG)`` (so that
        the scales ``c**(k - k_ref)`` are finite), ``PREFIX_WINDOWS`` windows,
        ``SMOOTH_ENTRIES`` entries a piece, and at most ``PREFIX_NODES`` values
        at the nodes (windows times nodes) per entry, so that its arrays stay a
        bounded multiple of the catch-up's. At a constant rate the steps
        beyond each window's summed ones are the geometric tail of
        :meth:`_summed_steps`, found for the largest ``x`` of all windows.
        """
        live = k > 0
        if (
            self.reverse
            or not self.eps > 0
            or not 0.0 < self.decay2 < 1.0
            or self.decay1 == 0.0
            or np.count_nonzero(live) < PREFIX_WINDOWS
            or int(s[live].min()) < self.exact_one
        ):
            return None
        s_ref = int(s[live].min())
        b_top = np.array([math.sqrt(self.decay2)])  # b_1: the bias corrections are 1
        x_hi = np.array([float(x_max[live].max())])
        low, top, lo, pieces, width = self._pieces(np.array([float(x_min[live].min())]), x_hi, b_top)
        n = int(piece_terms(width / 2, b_top * top / self.eps, self.tol)[0])
        # the nodes must pay for themselves, and the windows' values at them stay a small multiple of the entries
        if x.size < SMOOTH_ENTRIES * int(pieces[0]) or s.size * int(pieces[0]) * n > PREFIX_NODES * x.size:
            return None
        count = np.minimum(k, int(self._block_window(np.array([s_ref]), x_hi)[0]))
        if self.rate.constant is not None:
            summed = self._summed_steps(s, count, np.zeros(s.shape, dtype=np.int64), np.broadcast_to(x_hi, s.shape))
            tail = self._geometric_sum(k, summed + 1, count)
        else:  # under a schedule every summed step is a term
            summed, tail = count, np.zeros(s.size)
        ends = np.unique(summed[summed > 0])
        stretches = ends.size
        if stretches * 2.0**-47 > self.tol:
            return None
        acc = np.zeros(x.shape, dtype=self.dtype)
        if not stretches:
            return acc, tail[row_class]
        skip = np.concatenate([[0], ends[:-1]])
        windows = np.full(stretches, s_ref, dtype=np.int64), np.full(stretches, int(ends[-1]), dtype=np.int64)
        steps = (*windows, skip, ends - skip)
        if self.rate.constant is not None:  # one sequence, c**(k_ref - i) a_i, scaled by c**(k - k_ref)
            k_ref = int(ends[-1])
            if self.c < 1.0 and k_ref * -math.log(self.c) > MAX_SCALE_LOG:
                return None
            summer, (owner, b, w) = self, self._window_terms(*steps, np.full(stretches, x_hi[0]))
            with np.errstate(over="ignore"):
                factors = power(self.c, k - k_ref)[:, None]
            weights = [w]
        else:
            found = self._rate_sequences(s, summed, s_ref)
            if found is None:
                return None
            summer, growth, shapes, factors = found
            owner, b, w, j = summer._window_terms(*steps, np.full(stretches, x_hi[0]), growth=growth, positions=True)
            weights = [w * shape(j - s_ref) for shape in shapes]
        factors = np.where((summed > 0)[:, None], factors, 0.0)
        which = np.minimum(np.searchsorted(ends, summed), stretches - 1)
        node_x = log_nodes(lo[0] + width[0] * np.arange(pieces[0]), np.full(pieces[0], width[0]), n).reshape(-1)
        sums, const = np.zeros((s.size, node_x.size)), tail
        spread, none = (np.full(stretches, low[0]), np.full(stretches, x_hi[0])), np.zeros(stretches)
        for w_m, factor in zip(weights, factors.T):
            blocks = summer._terms_blocks(owner, b, w_m, *spread, none, None, tight=True)
            at_nodes = summer._stretch_nodes(blocks, node_x, stretches)
            # each window: the running sums up to its end, times its factor
            sums += np.cumsum(at_nodes, axis=0)[which] * factor[:, None]
            const = const + np.cumsum(blocks[0])[which] * factor
        coef_y = log_coefficients(sums.reshape(s.size * int(pieces[0]), n))
        acc[...] = log_interpolate(x, coef_y, low, top, lo, width, pieces, row_class * int(pieces[0]))
        return acc, const[row_class]

    def _stretch_nodes(self, blocks: tuple[np.ndarray, ...], node_x: np.ndarray, stretches: int) -> np.ndarray:
        """Each stretch's blocks (:meth:`_terms_blocks`) summed at every node ``node_x``: ``(stretches, nodes)``, float64.

        In batches of about ``NODE_BATCH`` values.
        """
        _, blk_start, blk_count, b_c, t_mid, t_half, coef, terms, _ = blocks
        at_nodes = np.zeros((stretches, node_x.size))
        has = np.flatnonzero(blk_count > 0)
        cum, per, done = np.cumsum(blk_count[has]), max(1, NODE_BATCH // node_x.size), 0
        while done < has.size:
            upto = max(done + 1, int(np.searchsorted(cum, (cum[done - 1] if done else 0) + per, side="right")))
            mine, done = has[done:upto], upto
            blk = np.arange(blk_start[mine[0]], blk_start[mine[-1]] + blk_count[mine[-1]])
            values = self._evaluate(
                np.broadcast_to(node_x, (blk.size, node_x.size)), b_c[blk], t_mid[blk], t_half[blk],
                coef[blk, : terms[blk].max()], dtype=np.dtype(np.float64),
            )
            at_nodes[mine] = np.add.reduceat(values, blk_start[mine] - blk_start[mine[0]], axis=0)
        return at_nodes

    def _one_segment(self, s: np.ndarray, summed: np.ndarray) -> tuple[int, int] | None:
        """``(kind, first step)`` of the one segment of a built-in schedule that holds every window's steps ``s + 1 .. s + summed``.

        None with weight decay (its factors vary with the rate), for any
        other schedule, or where the windows' steps span several segments
        (:func:`sparse_opt._analytic_rates.segments`).
        """
        if self.weight_decay or not analytic_rates.supports(self.rate.schedule):
            return None
        live = summed > 0
        first, last = s[live] + 1, s[live] + summed[live]
        _, seg_lo, _, kind, _, _ = analytic_rates.segments(self.rate.schedule, np.array([first.min()]), np.array([last.max()]))
        return (int(kind[0]), int(seg_lo[0])) if seg_lo.size == 1 else None

    def _rate_sequences(self, s: np.ndarray, summed: np.ndarray, s_ref: int) -> tuple | None:
        """Under a schedule, the rates of the windows as a few sequences of the dormant step: ``(summer, growth, shapes, factors)``.

        A window from ``s`` has ``lr(s + i) = sum_m factors[s, m] shapes[m](i)``
        wherever its steps ``s + 1 .. s + summed`` lie in one segment of a
        built-in schedule (:mod:`sparse_opt._analytic_rates`), every window in
        the same one, without weight decay:

        - constant: ``lr(lo)`` times 1;
        - linear warm-up (``lr j / W``): ``lr s / W`` times 1 plus ``lr / W``
          times ``i``;
        - cosine (``f + (lr - f) sin(omega (T - j))**2``): with ``u = omega (T
          - s)``, ``lr(s)`` times 1, ``(lr - f) cos(2u)`` times ``sin(omega
          i)**2`` and ``-(lr - f) sin(2u) / 2`` times ``sin(2 omega i)``.

        Every shape is positive on the window (``2 omega K <= pi / 2``), so
        the blocks sum each; the cosine's factors differ in sign, and their
        sums can cancel by at most ``R = (lr(s) + |a_1| sin(omega K)**2 +
        |a_2| sin(2 omega K)) / min lr`` over the window (``R <= 1 + O(omega
        K)``): required below ``MAX_CANCELLATION``, and the sequences are summed
        to ``tol / 16`` (``summer``, a constant-rate twin held to it) so that
        the windows keep ``tol``. ``growth`` bounds the shapes on the Gauss
        rules' ellipses over their least value on each piece (``i = j - s_ref``):
        ``(C + a) / J0`` for ``i``; ``(sin(omega min(C + a, pi / (2 omega)))**2 +
        sinh(omega Y)**2) / sin(omega J0)**2`` and likewise for ``sin(2 omega
        i)``, from ``|sin(x + iy)|**2 = sin(x)**2 + sinh(y)**2``. Exponential
        schedules and step decays crossing their periods are left to the
        windows one by one (None).
        """
        segment = self._one_segment(s, summed)
        if segment is None or segment[0] == analytic_rates.EXPONENTIAL:
            return None
        kind, seg_lo = segment
        schedule = self.rate.schedule
        live = summed > 0
        s_f = s.astype(np.float64)
        growth: Callable[..., np.ndarray] | None
        if kind == analytic_rates.CONSTANT:
            shapes, growth = [np.ones_like], None
            factors = np.full((s.size, 1), float(schedules.values_at(schedule, np.array([seg_lo]))[0]))
        elif kind == analytic_rates.LINEAR:
            slope = schedule.lr / float(schedule.warmup_steps)
            shapes = [np.ones_like, np.asarray]
            factors = np.column_stack([slope * s_f, np.full(s.size, slope)])

            def growth(
                start: np.ndarray, n: np.ndarray, centre: np.ndarray, major: np.ndarray, minor: np.ndarray
            ) -> np.ndarray:
                return np.maximum((centre - s_ref + major) / np.maximum(start - s_ref, 1.0), 1.0)

        else:
            total, warm, peak, final = schedule.total_steps, schedule.warmup_steps, schedule.lr, schedule.final_lr
            omega = math.pi / (2.0 * (total - warm))
            reach = float(summed.max())
            if 2.0 * omega * reach > math.pi / 2:
                return None
            u = omega * (total - s).astype(np.float64)  # T - s exact
            at_s = final + (peak - final) * np.sin(u) ** 2
            a1, a2 = (peak - final) * np.cos(2.0 * u), -(peak - final) * np.sin(2.0 * u) / 2
            shapes = [np.ones_like, lambda i: np.sin(omega * i) ** 2, lambda i: np.sin(2.0 * omega * i)]
            factors = np.column_stack([at_s, a1, a2])
            ends = np.column_stack([s + 1, s + np.maximum(summed, 1)]).astype(np.float64)
            least = (final + (peak - final) * np.sin(omega * (total - ends)) ** 2).min(axis=1)
            k_f = summed.astype(np.float64)
            spread = at_s + np.abs(a1) * np.sin(omega * k_f) ** 2 + np.abs(a2) * np.sin(2.0 * omega * k_f)
            with np.errstate(divide="ignore", invalid="ignore"):
                if not (spread[live] <= MAX_CANCELLATION * least[live]).all():
                    return None

            def growth(
                start: np.ndarray, n: np.ndarray, centre: np.ndarray, major: np.ndarray, minor: np.ndarray
            ) -> np.ndarray:
                j0 = np.maximum(start - s_ref, 1.0)
                far = centre - s_ref + major
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                    half = np.sin(omega * np.minimum(far, reach)) ** 2 + np.sinh(omega * minor) ** 2
                    half = half / np.sin(omega * j0) ** 2
                    full = np.sin(np.minimum(2.0 * omega * far, math.pi / 2)) ** 2 + np.sinh(2.0 * omega * minor) ** 2
                    full = np.sqrt(full) / np.sin(2.0 * omega * j0)
                return np.maximum(np.maximum(half, full), 1.0)

        return self._rate_summer(), growth, shapes, factors

    def _rate_summer(self) -> AdamCoasting:
        """A constant-rate twin of this catch-up (``lr = 1``, no decay) held to ``tol / 16`` (:meth:`_rate_sequences`)."""
        if self._summer is None:
            self._summer = AdamCoasting(1.0, self.beta1, self.beta2, self.eps, 0.0, self.dtype)
            self._summer.tol = self.tol / 16
        return self._summer

    def _smooth_sums(
        self,
        x: np.ndarray,
        row_class: np.ndarray,
        classes: np.ndarray,
        blocks: tuple[np.ndarray, ...],
        x_min: np.ndarray,
        x_max: np.ndarray,
    ) -> np.ndarray:
        """The block sums of rows ``x`` (``(R, C)``) of windows of many blocks, through piecewise interpolants in ``log x``.

        ``S(x) = sum_i w_i / (b_i x + eps)``, the windows' block sums, is for
        complex ``y = log x`` with ``|Im y| <= phi < pi`` a sum of terms with
        ``|b e**y + eps| >= (b e**(Re y) + eps) cos(phi / 2)``: analytic in that
        strip, and there ``|S(e**y)| <= S(e**(Re y)) / cos(phi / 2)``. Each
        window's range of ``log x``, from ``x_lo = max(x_min, (tol / 8) eps /
        b_max)`` (below it every term is ``w / eps`` to ``tol / 8``: ``x`` is
        clipped there) to ``x_max``, is cut into pieces of width ``<= PIECE_WIDTH``,
        each interpolated at Chebyshev nodes from the blocks (held to ``tol /
        64``; on a piece ``S`` varies by at most ``e**PIECE_WIDTH``, since ``S(x) /
        S(x') <= x' / x``, so the nodes' errors, raised by the Lebesgue constant
        (below 3 for 30 nodes), stay below ``tol / 8`` of ``S``). On the piece's
        Bernstein ellipse of semi-minor axis ``phi`` (half-width ``h``, ``rho =
        phi / h + sqrt((phi / h)**2 + 1)``, semi-major axis ``a = sqrt(h**2 +
        phi**2)``) ``|S|`` is at most ``min(e**(h + a), 1 + b_max x_max / eps) /
        cos(phi / 2)`` times its least value on the piece, and the interpolant
        of degree ``n - 1`` errs by ``4 M rho**(1-n) / (rho - 1)`` (Trefethen,
        Thm 8.2), kept below ``tol / 8`` (:func:`~sparse_opt._log_chebyshev.piece_terms`). An entry costs
        a logarithm and ``n`` steps of Horner's rule (about 9 in float32, 16 in
        float64) in float64, whatever the number of blocks; the nodes cost the
        blocks' evaluation at a few hundred points.
        """
        blk_start, blk_count, b_c, t_mid, t_half, coef, terms = blocks
        b_top = b_c[blk_start[classes]]  # the window's largest b: its first block's
        low, top, lo, pieces, width = self._pieces(x_min[classes], x_max[classes], b_top)
        n = int(piece_terms(width / 2, b_top * top / self.eps, self.tol).max())
        # the nodes: piece by piece of each window, n each
        piece_class = np.repeat(np.arange(classes.size), pieces)
        first_piece = np.cumsum(pieces) - pieces
        offset = np.arange(piece_class.size) - first_piece[piece_class]
        node_x = log_nodes(lo[piece_class] + width[piece_class] * offset, width[piece_class], n)
        # every block of a window (a row each) at every node of its pieces (the columns), summed over the blocks
        at_nodes = np.empty((piece_class.size, n))
        for c in range(classes.size):
            blk = np.arange(blk_start[classes[c]], blk_start[classes[c]] + blk_count[classes[c]])
            mine = slice(first_piece[c], first_piece[c] + pieces[c])
            x_c = np.broadcast_to(node_x[mine].reshape(1, -1), (blk.size, pieces[c] * n))
            values = self._evaluate(
                x_c, b_c[blk], t_mid[blk], t_half[blk], coef[blk, : terms[blk].max()], dtype=np.dtype(np.float64)
            )
            at_nodes[mine] = values.sum(axis=0).reshape(pieces[c], n)
        local = np.searchsorted(classes, row_class)
        coef_y, ranges = log_coefficients(at_nodes), (low[local], top[local], lo[local], width[local])
        return log_interpolate(x, coef_y, *ranges, pieces[local], first_piece[local]).astype(self.dtype)

    def _pieces(self, x_min: np.ndarray, x_max: np.ndarray, b_top: np.ndarray) -> tuple[np.ndarray, ...]:
        """Windows' ranges of ``x`` for :meth:`_smooth_sums`: ``(x_lo, x_max, log x_lo, pieces, width)``.

        ``x_lo = max(x_min, (tol / 8) eps / b_top)``, at most ``x_max``; the
        range of ``log x`` from there is cut into ``pieces`` of ``width <=
        PIECE_WIDTH``.
        """
        low = np.minimum(np.maximum(x_min, (self.tol / 8) * self.eps / b_top), x_max)
        lo = np.log(low)
        pieces = np.maximum(1, np.ceil((np.log(x_max) - lo) / PIECE_WIDTH)).astype(np.int64)
        return low, x_max, lo, pieces, (np.log(x_max) - lo) / pieces

    def _evaluate(
        self,
        x: np.ndarray,
        b_c: np.ndarray,
        mid: np.ndarray,
        half: np.ndarray,
        coef: np.ndarray,
        out: np.ndarray | None = None,
        dtype: np.dtype | None = None,
    ) -> np.ndarray:
        """``H(t) / (b_c x + eps)`` for rows ``x`` (``(R, C)``) of one block each, by Clenshaw's recurrence.

        The per-entry arithmetic is in ``dtype`` (default the parameters', as
        the fast path's; ``x`` in it). Written to ``out`` when given (an ``(R,
        C)`` array of that dtype).
        """
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        bx = b_c.astype(dtype)[:, None] * x
        den = bx + dtype.type(self.eps)
        u = np.divide(bx, den, out=bx)  # t, mapped to [-1, 1] below
        u *= (1.0 / half).astype(dtype)[:, None]
        u -= (mid / half).astype(dtype)[:, None]
        c = coef.astype(dtype)
        used = c.shape[1]
        if used == 1:
            return np.divide(c[:, :1], den, out=out)
        result = clenshaw(u, lambda j: c[:, j : j + 1], used, out=out)  # each row's coefficients, a column
        result /= den
        return result

    def _blocks(
        self,
        s: np.ndarray,
        k: np.ndarray,
        x_min: np.ndarray,
        x_max: np.ndarray,
        windows: np.ndarray | None = None,
        entries: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        """The Chebyshev blocks of the dormant windows ``(s, k)`` for ``x = sqrt(v)`` in ``[x_min, x_max]`` (one per window).

        ``windows`` is :meth:`_block_window` of ``(s, x_max)``, computed here
        unless given (and unused for windows cut from the end); ``entries``
        the number of entries each window sums (none summed through log x
        pieces when not given).

        Returns ``(const, start, count, b_c, t_mid, t_half, coef, terms,
        smooth)``: per window, the weight ``sum w_i`` of its terms whose ``b_i
        x`` is negligible against ``eps`` (``lr m const / eps`` of coasting),
        the range of its blocks, and whether its entries are summed through
        log x pieces (:meth:`_smooth_sums`: windows of at least
        ``SMOOTH_BLOCKS`` blocks with ``SMOOTH_ENTRIES`` entries a piece); per
        block, its largest ``b`` (``b_c``), the centre and half-width of its
        interval in ``t = b_c x / (b_c x + eps)``, the Chebyshev coefficients
        of ``H(t) = sum w_i / (1 - e_i t)`` on it, and how many of them it
        needs.
        """
        if self.reverse:  # the last steps of each gap
            count_steps = np.minimum(k, self._reverse_window(s, k))
            skip = k - count_steps
        else:
            count_steps = np.minimum(k, self._block_window(s, x_max) if windows is None else windows)
            skip = np.zeros(s.shape, dtype=np.int64)
        tail = np.zeros(s.size)
        if self.rate.constant is not None and s.size and int((s + skip + count_steps).max()) >= self.exact_one:
            # from where every term is w / eps and w geometric (the bias corrections 1): one sum (_summed_steps)
            summed = self._summed_steps(s, count_steps, skip, x_max)
            tail = self._geometric_sum(k, skip + summed + 1, skip + count_steps)
            count_steps = summed
        owner, b, w = self._window_terms(s, k, skip, count_steps, x_max)
        return self._terms_blocks(owner, b, w, x_min, x_max, tail, entries)

    def _terms_blocks(
        self,
        owner: np.ndarray,
        b: np.ndarray,
        w: np.ndarray,
        x_min: np.ndarray,
        x_max: np.ndarray,
        tail: np.ndarray,
        entries: np.ndarray | None,
        tight: bool = False,
    ) -> tuple[np.ndarray, ...]:
        """:meth:`_blocks` from the windows' terms ``(owner, b, w)`` (:meth:`_window_terms`): the same 9-tuple.

        ``tail`` is each window's weight already summed (added to its
        constant); ``tight`` holds every block to ``tol / 64``.
        """
        size = x_min.size
        # a term whose b x stays below tol * eps for every x of its window is w / eps to the dtype's rounding
        flat = b * x_max[owner] <= (self.tol / 4) * self.eps
        const = self._flat_sums(owner, flat, w, size) + tail
        keep = ~flat & (w > 0)
        owner, b, w = owner[keep], b[keep], w[keep]
        # the kept terms of a window are contiguous and their b decreases with i, so its blocks (levels of b
        # below the window's largest) are runs: cut where the window or the level changes
        new_block = np.ones(owner.size, dtype=bool)
        new_block[1:] = owner[1:] != owner[:-1]  # a window's first term
        heads = np.flatnonzero(new_block)
        top = np.maximum.reduceat(b, heads) if owner.size else np.zeros(0)
        with np.errstate(divide="ignore"):
            level = np.floor(np.log(np.repeat(top, np.diff(np.append(heads, owner.size))) / b) / math.log(BLOCK_RATIO))
        new_block[1:] |= level[1:] != level[:-1]
        starts = np.flatnonzero(new_block)
        blk = np.cumsum(new_block) - 1
        nb = starts.size
        blk_owner = owner[starts]
        count = np.bincount(blk_owner, minlength=size)
        start = np.cumsum(count) - count
        b_c = np.maximum.reduceat(b, starts) if nb else np.zeros(0)
        e = 1.0 - b / b_c[blk]  # in [0, 1 / 2): the block's poles t = 1 / e lie beyond 2
        e_max = np.maximum.reduceat(e, starts) if nb else np.zeros(0)
        with np.errstate(invalid="ignore"):  # eps = 0: t = 1 for every x
            t_lo, t_hi = (bx / (bx + self.eps) for bx in (b_c * x_min[blk_owner], b_c * x_max[blk_owner]))
        t_lo = np.where(np.isnan(t_lo), 1.0, t_lo)
        t_hi = np.where(np.isnan(t_hi), 1.0, t_hi)
        t_mid = (t_hi + t_lo) / 2
        t_half = np.maximum((t_hi - t_lo) / 2, t_hi * 2.0**-30)
        # windows of many blocks, with entries enough to pay for their pieces' nodes, are summed through log x
        # pieces, and their blocks held to a tighter tolerance
        smooth = np.full(size, tight)
        many = np.flatnonzero(count >= SMOOTH_BLOCKS) if entries is not None else np.zeros(0, dtype=np.int64)
        if many.size:
            pieces = self._pieces(x_min[many], x_max[many], b_c[start[many]])[3]
            smooth[many] = entries[many] >= SMOOTH_ENTRIES * pieces
        target = np.where(smooth[blk_owner], self.tol / 64, self.tol / 4)
        needed = _series_terms(1.0 - e_max * t_mid, e_max * t_half, target)
        terms = int(needed.max()) if nb else 1
        # 1 - e_i t at t = mid + half u of step i's block: (1 - e_i mid) - (e_i half) u
        level, slope = 1.0 - e * t_mid[blk], e * t_half[blk]
        # each run of blocks that need as many terms at that many (a slice of the steps each), where that saves a
        # fifth of the coefficient sums counting a pass's overhead as RUN_COST steps; else every block at as many
        runs = None
        if owner.size * terms > 2 * RUN_COST:  # (a training step's windows: one pass for all, see NODE_BATCH)
            bounds = [0, *(np.flatnonzero(np.diff(needed)) + 1).tolist(), nb]
            ends = np.append(starts, owner.size)
            work = (ends[bounds[1:]] - starts[bounds[:-1]]) * needed[bounds[:-1]]
            runs = bounds if work.sum() + RUN_COST * work.size < 0.8 * owner.size * terms else None
        if runs is None:
            coef = _series_coefficients(w, level, slope, starts, terms)
        else:
            coef = np.zeros((nb, terms))
            for b0, b1 in zip(runs[:-1], runs[1:]):
                lo, hi, n = int(starts[b0]), int(ends[b1]), int(needed[b0])
                coef[b0:b1, :n] = _series_coefficients(w[lo:hi], level[lo:hi], slope[lo:hi], starts[b0:b1] - lo, n)
        return const, start, count, b_c, t_mid, t_half, coef, needed, smooth

    def _window_terms(
        self,
        s: np.ndarray,
        k: np.ndarray,
        skip: np.ndarray,
        count: np.ndarray,
        x_max: np.ndarray,
        growth: Callable[..., np.ndarray] | None = None,
        positions: bool = False,
    ) -> tuple[np.ndarray, ...]:
        """``(owner, b, w)`` of the summed steps ``skip + 1 .. skip + count`` of each window ``(s, k)``, in order.

        ``growth``, when given, bounds a further factor the caller puts on the
        weights (:meth:`_piece_nodes`); ``positions`` adds the global step of
        each term (a real one for a pseudo-step), float64.

        Each window's terms are contiguous, windows in turn, ``b`` decreasing
        along a window. A window of ``QUADRATURE_FROM`` steps or more (where
        :meth:`_by_rules`) is summed through pieces of consecutive steps, each
        a Gauss rule of a few weighted pseudo-steps (:meth:`_plan`,
        :meth:`_node_terms`); the other steps one by one (:meth:`_step_terms`).
        Under a schedule the pieces lie within its segments
        (:func:`sparse_opt._analytic_rates.segments`), where the rate is one
        analytic function of the step.
        """
        quad = count >= QUADRATURE_FROM if self._by_rules() else np.zeros(s.size, dtype=bool)
        if not quad.any():
            owner = np.repeat(np.arange(s.size), count)
            first = np.cumsum(count) - count
            i = np.arange(owner.size, dtype=np.int64) - first[owner] + 1 + skip[owner]
            b, w = self._step_terms(s, k, owner, i)
            return (owner, b, w, (s[owner] + i).astype(np.float64)) if positions else (owner, b, w)
        # items: runs of steps summed one by one (level -1) and pieces of 2**level steps, window by window, each
        # piece within one segment of the schedule (the whole window at a constant rate)
        first, last = s + skip + 1, s + skip + count
        windows = np.flatnonzero(quad)
        if self.rate.constant is not None:
            seg_window, seg_lo, seg_hi = windows, first[quad], last[quad]
            seg_kind, seg_zero, seg_rate = np.zeros(windows.size, dtype=np.int64), None, None
        else:  # cut where the rate's formula changes, and where the decay factor does (runs of one factor)
            runs = self.rate.runs(self.dtype)
            part, seg_lo, seg_hi, seg_kind, seg_zero, seg_rate = analytic_rates.segments(
                self.rate.schedule, first[quad], last[quad], None if runs is None else runs[0]
            )
            seg_window = windows[part]
            if runs is not None:  # the decays after a step change by a factor of at least c_low a step
                seg_rate = seg_rate - math.log(self._c_low)
        seg, start_p, size_p, level_p = self._plan(
            np.arange(seg_window.size), s[seg_window], seg_lo, seg_hi, x_max[seg_window], seg_zero, seg_rate
        )
        alone = np.flatnonzero(~quad & (count > 0))
        owner_i, start_i, size_i, level_i, kind_i = (
            np.concatenate([a, b])
            for a, b in zip(
                (seg_window[seg], start_p, size_p, level_p, seg_kind[seg]),
                (alone, first[alone], count[alone], np.full(alone.size, -1), np.zeros(alone.size, dtype=np.int64)),
            )
        )
        order = np.lexsort((start_i, owner_i))
        owner_i, start_i, size_i, level_i, kind_i = (a[order] for a in (owner_i, start_i, size_i, level_i, kind_i))
        piece = level_i >= 0
        flat = np.zeros(piece.size, dtype=bool)
        flat[piece] = start_i[piece] >= self._flat_step(s[owner_i[piece]], x_max[owner_i[piece]])
        nodes = np.zeros(piece.size, dtype=np.int64)
        nodes[piece] = self._piece_nodes(start_i[piece], level_i[piece], flat[piece], kind_i[piece], growth)
        # a piece whose rule needs more than half its steps is summed one by one (as are its steps)
        direct = ~piece | (2 * nodes > np.left_shift(1, np.maximum(level_i, 0)))
        size_i = np.where(direct, np.where(piece, np.left_shift(1, np.maximum(level_i, 0)), size_i), nodes)
        owner = np.repeat(owner_i, size_i)
        item = np.repeat(np.arange(owner_i.size), size_i)
        within = np.arange(owner.size, dtype=np.int64) - (np.cumsum(size_i) - size_i)[item]
        b, w = np.empty(owner.size), np.empty(owner.size)
        one = direct[item]
        i = start_i[item[one]] + within[one] - s[owner[one]]
        b[one], w[one] = self._step_terms(s, k, owner[one], i)
        j = np.empty(owner.size) if positions else None
        if j is not None:
            j[one] = s[owner[one]] + i
        if not one.all():
            # the rules the pieces use, each once, laid end to end: a piece's nodes start at its rule's offset
            ruled = np.flatnonzero(~direct)
            codes, rule_of = np.unique(level_i[ruled] * (1 << 32) + nodes[ruled], return_inverse=True)
            keys = [(int(c >> 32), int(c & 0xFFFFFFFF)) for c in codes]
            found = gauss_rules(keys)
            table_x = np.concatenate([found[key][0] for key in keys])
            table_w = np.concatenate([found[key][1] for key in keys])
            sizes = codes & 0xFFFFFFFF
            rule_at = np.zeros(level_i.size, dtype=np.int64)
            rule_at[ruled] = (np.cumsum(sizes) - sizes)[rule_of.reshape(-1)]
            node = ~one
            at = rule_at[item[node]] + within[node]
            b[node], w[node] = self._node_terms(
                s[owner[node]], k[owner[node]], start_i[item[node]], table_x[at], table_w[at], kind_i[item[node]]
            )
            if j is not None:
                j[node] = start_i[item[node]] + table_x[at]
        return (owner, b, w, j) if j is not None else (owner, b, w)

    def _by_rules(self) -> bool:
        """Whether long windows are summed through Gauss rules (:meth:`_window_terms`).

        At a constant rate; under a built-in schedule whose rates continue to
        real steps (:mod:`sparse_opt._analytic_rates`), without weight decay or
        with decay factors that come in runs of one value
        (:meth:`~sparse_opt._rates.LearningRate.runs`), on each of which the
        decay after a step is a power of that factor.
        """
        if self.rate.constant is not None:
            return True
        if not analytic_rates.supports(self.rate.schedule):
            return False
        return not self.weight_decay or self.rate.runs(self.dtype) is not None

    def _decays_after(self, steps: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """``prod_{j=step+1}^{end} c_j`` for each step and its window's end (:meth:`LearningRate.decay`, per end).

        Steps that fill their span are taken step by step (``by_runs=False``): a catch-up's window terms late in
        training are hundreds of thousands of distinct steps, whose powers by runs would cost a power each.
        """
        out = np.empty(steps.shape)
        if ends.size and ends.min() == ends.max():  # (every window of a catch-up ends at its step)
            # steps that fill their span (the windows' terms, one by one): one pass over it, not a power per step
            dense = int(ends[0]) - int(steps.min()) <= 2 * steps.size
            out[:] = self.rate.decay(steps, int(ends[0]), self.dtype, by_runs=not dense)
            return out
        for end in distinct(ends)[0].tolist():
            mine = ends == end
            out[mine] = self.rate.decay(steps[mine], end, self.dtype)
        return out

    def _step_terms(self, s: np.ndarray, k: np.ndarray, owner: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(b_i, w_i)`` of the dormant steps ``i`` (int64, from 1) of windows ``owner``, one by one."""
        steps = s[owner] + i
        with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
            a = self._powers(self.decay1, 1.0, i) / self._bias_correction(self.beta1, steps)
            b = self._powers(self.decay2, 0.5, i) / self._bias_correction(self.beta2, steps, root=True)
            if self.rate.constant is None:  # each step's own rate, and the decays of the steps after it
                w = a * self._scheduled_weights(s, k, owner, steps)
            else:
                w = a if self.c == 1.0 else self.c ** (k[owner] - i).astype(np.float64) * a
        return b, w

    def _node_terms(
        self, s: np.ndarray, k: np.ndarray, start: np.ndarray, offset: np.ndarray, weight: np.ndarray, kind: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(b, weight * w)`` at the pseudo-steps ``start + offset`` (global steps; ``start`` an int64 piece start).

        ``w`` and ``b`` are the analytic functions of the step that the steps'
        weights are (module docstring), continued to the real ``j = start +
        offset``: the powers split at the piece's start, ``d**(start - s) *
        d**offset`` (the first from the tables by step, exact; the second
        erring by ``|log d| ulp(offset)``, at most an epsilon on a piece), and
        ``1 - beta**j = -expm1(j log beta)``, within two roundings for every ``j``;
        under a schedule, times the rate continued on the piece's segment of
        ``kind`` (:func:`sparse_opt._analytic_rates.continued`).
        """
        i0 = start - s
        j = start.astype(np.float64) + offset
        # from exact_one on both bias corrections round to 1 (beta**j < 2**-54): dividing by them changes nothing
        young = np.flatnonzero(j < self.exact_one)
        with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
            a = self._powers(self.decay1, 1.0, i0) * np.power(self.decay1, offset)
            b = self._powers(self.decay2, 0.5, i0) * np.power(self.decay2, offset / 2)
            if young.size:
                a[young] /= _one_minus_power(self.beta1, j[young])
                b[young] /= np.sqrt(_one_minus_power(self.beta2, j[young]))
            if self.c != 1.0:
                a *= self.c ** (k - i0).astype(np.float64) * np.power(self.c, -offset)
            if self.rate.constant is None:
                a *= analytic_rates.continued(self.rate.schedule, kind, start, offset)
                if self.weight_decay:  # within a run of one factor c: the decay after j is c**-(j - start) that after start
                    a *= self._decays_after(start, s + k) * np.power(self.rate.run_of(start, self.dtype), -offset)
        return b, a * weight

    def _flat_step(self, s: np.ndarray, x_max: np.ndarray) -> np.ndarray:
        """The first global step of each window ``(s, x_max)`` from which every term is ``w / eps`` to ``tol / 4``.

        ``b_i <= d2**(i/2) / sqrt(1 - beta2**(s+1))`` (the bias correction
        grows with the step), so ``b_i x_max <= tol eps / 4`` from ``i = 2
        log(tol eps sqrt(1 - beta2**(s+1)) / (4 x_max)) / log d2`` on; two
        steps are added for the roundings of the powers.
        """
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if not 0.0 < self.decay2 < 1.0:  # beta2 = 0: b = 0 from the first dormant step on
                return s + 1
            root = np.sqrt(-np.expm1((s + 1).astype(np.float64) * math.log(self.beta2)))
            first = np.ceil(2.0 * np.log((self.tol / 4) * self.eps * root / x_max) / math.log(self.decay2)) + 2
        first = np.where(np.isnan(first) | (first < 1), 1.0, np.minimum(first, 2.0**62))
        return s + first.astype(np.int64)

    def _plan(
        self,
        owner: np.ndarray,
        s: np.ndarray,
        first: np.ndarray,
        last: np.ndarray,
        x_max: np.ndarray,
        zero: np.ndarray | None = None,
        rate: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The items tiling the global steps ``first .. last`` of windows ``owner`` (from ``s``): ``(owner, start, size, level)``.

        Pieces (``level >= 0``: ``2**level`` steps from ``start``) are aligned
        on their size, ``start = q 2**level`` with ``q >= 2``, so that every
        piece lies at least its own length beyond step 0, where the bias
        corrections' poles are; they are at most ``2**cap`` long, ``cap`` the
        level of the window's part (``2**cap`` times the rate at which its terms
        change, :attr:`_rates`, at most 1: where ``b x`` still counts, and from
        :meth:`_flat_step` on; with a schedule's own ``rate`` of change, ``|d
        log lr / dj|``, added to Adam's). Within an octave
        ``[2**t, 2**(t+1))`` the level is at most ``min(cap, t - 1)``, and
        where a window has a ``zero`` (``> 0``: the end of a cosine, where the
        rate has a double zero) a piece also ends at least twice its length
        before it: in ``[zero - 2**(t+1), zero - 2**t)`` the level is at most
        ``t - 1``. Each part of constant level is tiled by the largest aligned
        pieces, ascending from its start to its level, as many as fit at it,
        then descending to its end. Steps that no piece of at least
        ``2**MIN_PIECE_LEVEL`` covers are runs summed one by one (``level =
        -1``). Items come unordered (sort by owner and start).
        """
        if zero is None:
            zero, rate = np.zeros(owner.size, dtype=np.int64), np.zeros(owner.size)
        flat = self._flat_step(s, x_max)
        # the parts of constant cap: where b x counts, and the flat rest
        seg_owner, seg_zero = np.concatenate([owner, owner]), np.concatenate([zero, zero])
        seg_lo = np.concatenate([first, np.maximum(first, flat)])
        seg_hi = np.concatenate([np.minimum(last, flat - 1), last]) + 1  # exclusive
        l1, l2 = self._rates
        seg_cap = _level_caps(np.concatenate([l1 + l2 + rate, l1 + rate]))
        keep = seg_lo < seg_hi
        seg_owner, seg_zero, seg_lo, seg_hi, seg_cap = (a[keep] for a in (seg_owner, seg_zero, seg_lo, seg_hi, seg_cap))
        # cut at the octaves 2**t below 2**(cap + 1), where the level is held to t - 1, and as many before a zero
        top = int(seg_cap.max()) + 1 if seg_cap.size else 0
        powers = np.left_shift(1, np.arange(MIN_PIECE_LEVEL + 1, max(top, MIN_PIECE_LEVEL) + 1, dtype=np.int64))
        mirror = np.where(seg_zero[:, None] > 0, seg_zero[:, None] - powers, 0)
        points = np.concatenate([np.broadcast_to(powers, mirror.shape), mirror], axis=1)
        reach = np.tile(powers, 2)[None, :] <= np.left_shift(1, seg_cap + 1)[:, None]
        cut = (seg_lo[:, None] < points) & (points < seg_hi[:, None]) & reach
        points = np.sort(np.where(cut, points, np.iinfo(np.int64).max), axis=1)
        bounds = np.column_stack([seg_lo, points, seg_hi])
        ends = np.ones((seg_lo.size, 1), dtype=bool)
        marks = np.column_stack([ends, points < np.iinfo(np.int64).max, ends])
        points, row = bounds[marks], np.nonzero(marks)[0]
        pair = (row[1:] == row[:-1]) & (points[:-1] < points[1:])
        lo, hi, part = points[:-1][pair], points[1:][pair], row[:-1][pair]
        level = np.minimum(seg_cap[part], _floor_log2(lo) - 1)
        before = seg_zero[part] > 0  # a piece ends at least twice its length before the zero
        level[before] = np.minimum(level[before], _floor_log2(np.maximum(seg_zero[part][before] - hi[before], 1)) - 1)
        o = seg_owner[part]
        piece = level >= MIN_PIECE_LEVEL
        unit = 1 << MIN_PIECE_LEVEL
        head = np.where(piece, np.minimum(hi, -(-lo // unit) * unit), hi)  # one by one up to the first alignment
        items = [(o, lo, head - lo, np.full(o.size, -1))]
        lv = np.arange(MIN_PIECE_LEVEL, max(int(level.max()) if level.size else 0, MIN_PIECE_LEVEL), dtype=np.int64)
        size, below = np.left_shift(1, lv)[None, :], (lv[None, :] < level[:, None]) & piece[:, None]
        # ascending: the set bits of the distance d to the part's alignment, while they fit (their running sum
        # d mod 2**(l+1) is at most the room), each piece at pos + (d mod 2**l)
        d = (-head) & (np.left_shift(1, np.maximum(level, 0)) - 1)
        bit = ((d[:, None] & size) != 0) & below
        up = bit & ((d[:, None] & (2 * size - 1)) <= (hi - head)[:, None])
        items.append(_pieces_of(up, o, head[:, None] + (d[:, None] & (size - 1)), lv))
        pos = head + (up * size).sum(axis=1)
        # at the alignment: as many pieces of the part's level as fit
        whole = np.where(piece & (pos - head == d), (hi - pos) >> np.maximum(level, 0), 0)
        at = np.repeat(np.arange(o.size), whole)
        nth = np.arange(at.size, dtype=np.int64) - (np.cumsum(whole) - whole)[at]
        items.append((o[at], pos[at] + (nth << level[at]), np.left_shift(1, level[at]), level[at]))
        pos = pos + (whole << np.maximum(level, 0))
        # descending: the set bits of what is left (below the last level reached), each at pos + its higher bits
        rest = hi - pos
        down = ((rest[:, None] & size) != 0) & below
        items.append(_pieces_of(down, o, pos[:, None] + ((rest[:, None] >> (lv + 1)) << (lv + 1)), lv))
        pos = pos + (down * size).sum(axis=1)
        items.append((o, pos, hi - pos, np.full(o.size, -1)))  # what no piece covers at the end
        out = tuple(np.concatenate([item[n] for item in items]).astype(np.int64) for n in range(4))
        used = out[2] > 0
        return tuple(a[used] for a in out)

    def _piece_nodes(
        self,
        start: np.ndarray,
        level: np.ndarray,
        flat: np.ndarray,
        kind: np.ndarray,
        growth: Callable[..., np.ndarray] | None = None,
    ) -> np.ndarray:
        """Gauss nodes each piece (``2**level`` steps from global step ``start``) needs, its error below ``tol / 8``.

        The bound (:meth:`_node_bound`) depends on the start through the bias
        corrections alone at a constant rate. Where both have settled on the
        piece's widest ellipse (``beta**t <= 2**-60`` from its leftmost point
        ``t`` on: every factor they bring is within ``2**-58`` of its limit),
        it is taken once per level (and flatness) at that limit, raised by
        ``2**-50``: a training step's thousands of pieces late in training
        share a few dozen bounds. ``growth(start, n, centre, major, minor)``,
        when given, bounds a further factor on the weights over each ellipse
        against its least value on the piece (:meth:`_prefix_sums` under a
        schedule); the bound is then taken piece by piece.
        """
        if self.rate.constant is None or not start.size or growth is not None:
            return self._node_bound(start, level, flat, kind, growth=growth)
        half = (np.ldexp(1.0, level) - 1.0) / 2
        leftmost = start + half - half * math.hypot(1.0, float(PIECE_SIGMAS.max()))
        settled = leftmost >= self._bias_settled
        out = np.empty(start.size, dtype=np.int64)
        out[~settled] = self._node_bound(start[~settled], level[~settled], flat[~settled], kind[~settled])
        if settled.any():
            codes, which = np.unique(level[settled] * 2 + flat[settled], return_inverse=True)
            limit, constant = np.full(codes.size, np.inf), np.zeros(codes.size, dtype=np.int64)
            shared = self._node_bound(limit, codes >> 1, (codes & 1).astype(bool), constant, slack=True)
            out[settled] = shared[which.reshape(-1)]
        return out

    def _node_bound(
        self,
        start: np.ndarray,
        level: np.ndarray,
        flat: np.ndarray,
        kind: np.ndarray,
        slack: bool = False,
        growth: Callable[..., np.ndarray] | None = None,
    ) -> np.ndarray:
        """:meth:`_piece_nodes` for each piece: the bound on its Bernstein ellipses, below.

        ``start`` may be infinite (the limit of settled bias corrections);
        ``slack`` adds ``2**-56`` to ``psi`` and ``2**-50`` of the bound, which
        cover a settled piece's finite start.

        The piece's terms ``G(j) = A(j) / (B(j) x + eps)`` (``A = c**(T-j)
        d1**(j-s) / (1 - beta1**j)``, ``B = d2**((j-s)/2) / sqrt(1 -
        beta2**j)``) are analytic in ``j`` for ``Re j > 0``. On the Bernstein
        ellipse of the piece's interval ``[J0, J1]`` (centre ``C``, half-width
        ``h``) with semi-minor axis ``Y = sigma h`` (semi-major ``a = h sqrt(1
        + sigma**2)``, ``rho = sigma + sqrt(1 + sigma**2)``), at ``j = t + iy``:

        - ``|A(j)| <= e**(l1 (a + h)) (1 - beta1**J1) / (1 - beta1**(C - a))``
          times ``A``'s least value on the interval (``l1 = |log(d1 / c)|``,
          and ``|1 - beta1**j| >= 1 - beta1**t``);
        - ``|B(j) x + eps| >= cos(psi / 2) (|B(j)| x + eps)`` for ``|arg B| <=
          psi = Y |log d2| / 2 + atan(r min(1, Y |log beta2|) / (1 - r)) / 2``,
          ``r = beta2**(C - a)`` (the second term bounds ``arg(1 - beta2**j)``);
        - ``B(J0) / |B(j)| <= e**(l2 (a + h)) sqrt(((1 - beta2**(C+a)) + r
          min(2, Y |log beta2|)) / (1 - beta2**J0))``, ``l2 = |log d2| / 2``.

        So ``|G| <= M`` there with ``M / min G = R_A R_B / cos(psi / 2)``,
        uniformly in ``x >= 0`` (in a flat piece, where every term is ``A /
        eps``, ``R_A`` alone), times, under a schedule, the rate's own ``sup
        |lr(z)| / min lr(j)`` on the piece's segment of ``kind``
        (:func:`sparse_opt._analytic_rates.growth`), and the ``m``-point rule
        errs by at most ``4 (M / min G) rho**(1 - 2m) / (rho - 1)`` of the
        piece's sum (:mod:`sparse_opt._discrete_gauss`). The best of a few
        ``sigma`` is taken (``C - a > 0`` and ``psi < pi`` required); 0 where
        none applies.
        """
        n = np.ldexp(1.0, level)[:, None]
        h = (n - 1.0) / 2
        centre = start[:, None] + h
        sigma = PIECE_SIGMAS[None, :]
        minor, major = sigma * h, h * np.sqrt(1.0 + sigma * sigma)
        rho = sigma + np.sqrt(1.0 + sigma * sigma)
        left = centre - major
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            bound = np.exp(self._rates[0] * (major + h)) * (
                _one_minus_power(self.beta1, start[:, None] + n - 1.0) / _one_minus_power(self.beta1, left)
            )
            if self.decay2 > 0:
                log2 = -math.log(self.beta2) if self.beta2 > 0 else math.inf
                r = power(self.beta2, left)
                psi = minor * self._rates[1] + np.arctan(r * np.minimum(1.0, minor * log2) / (1.0 - r)) / 2
                top = _one_minus_power(self.beta2, centre + major) + r * np.minimum(2.0, minor * log2)
                ratio = np.exp(self._rates[1] * (major + h)) * np.sqrt(top / _one_minus_power(self.beta2, start[:, None] + 0.0))
                if slack:
                    psi = psi + 2.0**-56
                shaped = bound * np.maximum(ratio, 1.0) / np.cos(psi / 2)
                bound = np.where(flat[:, None], bound, np.where(psi < np.pi, shaped, np.inf))
            bound = np.where(left > 0, bound, np.inf)
            if self.rate.constant is None:
                bound *= analytic_rates.growth(self.rate.schedule, kind[:, None], start[:, None], n, centre, major, minor)
                if self.weight_decay:  # the decay after j, c**-(j - start) on the piece's run, c >= c_low
                    bound *= np.exp(-math.log(self._c_low) * (major + h))
            if slack:
                bound = bound * (1.0 + 2.0**-50)
            if growth is not None:
                bound = bound * growth(start[:, None].astype(np.float64), n, centre, major, minor)
            terms = (np.log(32.0 * bound / (self.tol * (rho - 1.0))) / np.log(rho) + 1.0) / 2
        best = np.fmin.reduce(np.ceil(terms), axis=1)  # the best sigma; NaN only where none applies
        return np.where(np.isfinite(best), np.maximum(best, 2.0), 0.0).astype(np.int64)

    def _decay(self, start: int, stop: int) -> float:
        """``prod_{j=start+1}^{stop} c_j``: the decoupled decay of those steps (``c**(stop - start)`` at a constant rate)."""
        if self.rate.constant is not None:
            return self.c ** (stop - start)
        return float(self.rate.decay(np.array([start]), stop, self.dtype)[0])

    def _scheduled_weights(self, s: np.ndarray, k: np.ndarray, owner: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """``lr_j prod_{j' = j+1}^{s+k} c_j'`` for the summed steps ``j`` (``steps``, of windows ``owner``).

        The rate of each dormant step, and the decoupled decay dense AdamW
        applies to its coasting on the steps after it through the window's end
        ``s + k`` (:meth:`LearningRate.decay`, one call per distinct end: every
        window of a catch-up ends at its step, or at the latest last step of
        its rows): the rates of the summed steps alone, and the decays' cost
        (one pass from the earliest summed step where the steps fill their
        span, else by runs of one factor where the dtype's factors allow:
        :meth:`_decays_after`).
        """
        if not steps.size:
            return np.zeros(0)
        rates = self.rate.at_steps(steps)
        if not self.weight_decay:
            return rates
        return rates * self._decays_after(steps, (s + k)[owner])

    def _bias_correction(self, beta: float, steps: np.ndarray, root: bool = False) -> np.ndarray:
        """``1 - beta**j`` (or its square root) for the int64 steps ``j >= 1``, as torch computes it.

        Torch takes Python's correctly rounded power, then ``1 -`` it. numpy's
        vectorised power can be an ulp off, and where ``beta**j`` is close to 1
        the subtraction raises that to ``eps / (1 - beta**j)`` relative (3e-12
        for beta1 = 0.99999 at step 4). Up to the step where ``1 - beta**j``
        reaches 1/2 (``0.7 / (1 - beta)`` steps) the values are filled with
        :func:`math.pow`; beyond, with numpy's power, where the subtraction at
        most doubles its rounding. Both are tabled by step (:func:`_table`) up
        to the step where ``1 - beta**j`` rounds to 1 (``37 / (1 - beta)``
        steps), at most ``MAX_BIAS_TABLE``; later steps are computed per call.
        """
        near = min(steps_below(beta, 0.5), MAX_BIAS_TABLE) if beta > 0 else 1

        def fill(n: np.ndarray) -> np.ndarray:
            out = 1.0 - np.power(beta, n.astype(np.float64))
            exact = n < near
            out[exact] = [1.0 - math.pow(beta, j) for j in n[exact].tolist()]
            return np.sqrt(out) if root else out

        # from the step where beta**j < 2**-54 on, 1 - beta**j rounds to 1: the table stops there
        return _table(("bias", beta, root), fill, np.minimum(steps, steps_below(beta, 2.0**-54)))

    def _powers(self, base: float, scale: float, n: np.ndarray) -> np.ndarray:
        """``base ** (scale * n)`` for the int64 ``n >= 0``, tabled (:meth:`_table`)."""
        return _table(("power", base, scale), lambda j: np.power(base, scale * j.astype(np.float64)), n)

    def _block_window(self, s: np.ndarray, x_max: np.ndarray) -> np.ndarray:
        """Dormant steps after which the rest of the coasting is below ``tol / 4`` of its first term, for ``x <= x_max``.

        Term ``i`` over term 1 is ``c**(1-i) a_i / a_1 * (b_1 x + eps) / (b_i x
        + eps)``, with ``a_i / a_1 <= beta1**(i-1)``; the last factor is at most
        ``1 + b_1 x_max / eps`` and at most ``b_1 / b_i <= beta2**(-(i-1)/2) /
        sqrt(1 - beta2**(s+1))``. So term ``i`` is below ``C r**(i-1)`` of term
        1 with ``(r, C) = (q, 1 + b_1 x_max / eps)`` (``q = beta1 / c``) and,
        when ``rho_0 = q / sqrt(beta2) < 1``, ``(rho_0, 1 / sqrt(1 - beta2**(s+1)))``;
        the tail beyond ``L`` is below ``C r**L / (1 - r)``. The smaller ``L``
        of the two is returned (``>= 1``).
        """
        q = self.decay1 / self._c_low
        if q == 0.0:
            return np.ones(s.shape, dtype=np.int64)
        g1 = np.sqrt(1.0 - power(self.beta2, s + 1))
        best = np.full(s.shape, np.inf)
        with np.errstate(divide="ignore", over="ignore"):
            if self.eps > 0:
                grow = 1.0 + math.sqrt(self.decay2) / g1 * x_max / self.eps
                best = np.log(self.tol * (1.0 - q) / (4.0 * grow)) / math.log(q)
            rho0 = q / math.sqrt(self.decay2) if self.decay2 > 0 else math.inf
            if rho0 < 1.0:
                best = np.minimum(best, np.log(self.tol * (1.0 - rho0) * g1 / 4.0) / math.log(rho0))
        return np.minimum(np.ceil(best) + 1, 1 << 62).astype(np.int64)

    @staticmethod
    def _flat_sums(owner: np.ndarray, flat: np.ndarray, w: np.ndarray, windows: int) -> np.ndarray:
        """Each window's sum of the weights ``w`` of its flat steps (``owner`` the window of each step).

        A window's flat steps are the last of its steps (``b`` decreases along
        it), so each long run is one slice, summed pairwise by numpy (its
        rounding grows as ``log n``; summing tens of thousands of weights one
        after the other, as ``bincount`` does, erred by up to 280 float64
        epsilons with beta1 = 0.999 and beta2 = 0.5); runs of up to
        ``PAIRWISE_FROM`` steps are summed together by ``bincount``.
        """
        flat_owner = owner[flat]
        counts = np.bincount(flat_owner, minlength=windows)
        long = np.flatnonzero(counts > PAIRWISE_FROM)
        if not long.size:
            return np.bincount(flat_owner, weights=w[flat], minlength=windows)
        short = flat & (counts[owner] <= PAIRWISE_FROM)
        out = np.bincount(owner[short], weights=w[short], minlength=windows).astype(np.float64)  # int64 when empty
        ends = np.cumsum(np.bincount(owner, minlength=windows))
        for o in long.tolist():
            out[o] = w[ends[o] - counts[o] : ends[o]].sum()
        return out

    def _summed_steps(self, s: np.ndarray, count: np.ndarray, skip: np.ndarray, x_max: np.ndarray) -> np.ndarray:
        """How many of the window steps ``skip + 1 .. skip + count`` of each gap from ``s`` are summed one by one.

        The rest are steps where every term is ``w_i / eps`` to ``tol / 4``
        (``b_i x_max <= tol eps / 4``: ``b`` decreases along a gap, so from
        the first such step on) and both bias corrections are 1 in float64
        (``beta**j < 2**-54``), so that ``w_i = c**(k-i) beta1**i`` at a
        constant rate: :meth:`_geometric_sum` adds them up at once. There ``b_i
        = beta2**(i/2)``; the first flat step is taken two steps late, so that
        no rounding of the powers can leave a step out that is not flat.
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            if 0.0 < self.decay2 < 1.0:
                flat = np.ceil(2.0 * np.log((self.tol / 4) * self.eps / x_max) / math.log(self.decay2)) + 2
            else:  # beta2 = 0: b_i = 0 from the first dormant step on
                flat = np.full(np.shape(x_max), 1.0)
        flat = np.where(np.isnan(flat) | (flat < 1), 1.0, np.minimum(flat, 2.0**62))  # x_max = 0: every step
        start = np.maximum(flat, self.exact_one - s)  # the first window step of the geometric sum
        return np.clip(start - 1 - skip, 0, count).astype(np.int64)

    def _geometric_sum(self, k: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """``sum_{i=low}^{high} c**(k-i) beta1**i`` for each gap (0 where ``low > high``), in closed form.

        With ``r = c / beta1`` the sum is its largest term times ``sum_{l<n}
        q**l = expm1(n log q) / expm1(log q)``, ``q = min(r, 1 / r)``, ``n = high
        - low + 1`` (``n`` where ``q = 1``); ``log r = log1p((c - beta1) /
        beta1)``, the difference exact, so that ``log r`` carries a relative
        rounding or two however close ``c`` is to ``beta1`` (``c``, ``beta1``
        the dormant factors of :func:`dormant_factors`).
        """
        n = (high - low + 1).astype(np.float64)
        out = np.zeros(np.shape(n))
        live = n > 0
        if not live.any() or self.decay1 == 0.0:
            return out
        c, d = self.c, self.decay1
        log_r = math.log1p((c - d) / d) if c > 0 else -math.inf
        k, low, high, n = (np.broadcast_to(a, out.shape)[live].astype(np.float64) for a in (k, low, high, n))
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            if log_r <= 0:  # the terms grow with i (c <= beta1): from the last one back
                top = c ** (k - high) * d**high
            else:
                top = c ** (k - low) * d**low
            log_q = -abs(log_r)
            ratio = np.expm1(n * log_q) / math.expm1(log_q) if log_q < 0 else n
        out[live] = top * ratio
        return out

    def _reverse_window(self, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Steps from the end of each gap ``(s, k)`` before which the coasting is below ``tol / 4`` of its last term.

        With ``c <= beta1`` (AdamW with ``1 - lr * weight_decay <= beta1``) the
        terms ``c**(k-i) a_i / (b_i x + eps)`` grow towards the end of the gap.
        Term ``k - l`` over term ``k`` is ``(c / beta1)**l`` times ``(1 - beta1**T)
        / (1 - beta1**(T-l)) <= C = 1 / (1 - beta1**(s+1))`` times ``(b_k x +
        eps) / (b_{k-l} x + eps) <= 1`` (``b`` decreases), so with ``r = c /
        beta1 < 1`` the steps before the last ``L = log(tol (1 - r) / (4 C)) /
        log r`` add less than ``tol / 4``, for every ``x``. With ``r = 1``
        (``c == beta1`` in the dtype) every step counts: ``L = k``.
        """
        k = np.asarray(k, dtype=np.int64)
        r = self.c / self.decay1
        if r == 0.0:
            return np.minimum(k, 1)
        if r >= 1.0:
            return k
        bc1 = -np.expm1(np.asarray(s + 1, dtype=np.float64) * math.log(self.beta1)) if self.beta1 > 0 else 1.0
        with np.errstate(divide="ignore", over="ignore"):
            window = np.log(self.tol * (1.0 - r) * bc1 / 4.0) / math.log(r)
        return np.minimum(np.ceil(window) + 1, k).astype(np.int64)

    def _replay(self, p: np.ndarray, m: np.ndarray, v: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Dense Adam's zero-gradient steps one by one, for 1-D arrays of coordinates; returns the new ``p``.

        Each coordinate stops once the rest of its coasting is provably below
        ``tol * |p|`` or its ``m`` has underflowed to zero; its remaining weight
        decay is then applied in closed form (module docstring). An infinite
        ``p`` (a run that has diverged) stops by the bound only where no step
        can add the opposite infinity: with ``eps = 0`` and a ``v`` that
        reaches 0 in the gap it is replayed until ``m / 0`` makes it NaN, as
        dense Adam does, or until ``m`` underflows.
        """
        dt = self.dtype.type
        b1, b2, eps = dt(self.beta1), dt(self.beta2), dt(self.eps)
        p, m, v = p.copy(), m.copy(), v.copy()
        rest = np.zeros(p.size, dtype=np.int64)
        stopped = np.zeros(p.size, dtype=np.int64)  # the dormant steps replayed
        active = np.arange(p.size)
        r_bound = self.decay1 / math.sqrt(self.decay2) if self.decay2 > 0 else math.inf
        through = int((s + k).max()) if s.size else 0
        scheduled = self.rate.constant is None
        peak = self.rate.peak(through) if scheduled else self.lr  # bounds the rate of every step still to come
        i = 0
        while active.size:
            i += 1
            steps = s[active] + i
            j = steps.astype(np.float64)
            lr = self.rate.at_steps(steps) if scheduled else self.lr
            pa, ma, va = p[active], m[active] * b1, v[active] * b2
            if scheduled and self.weight_decay:
                pa = pa * (1.0 - lr * self.weight_decay).astype(self.dtype)
            elif self.c != 1.0:
                pa = pa * dt(self.c)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                denom = np.sqrt(va) / np.sqrt(1.0 - power(self.beta2, j)).astype(self.dtype) + eps
                pa = pa - (ma / denom) * (lr / (1.0 - power(self.beta1, j))).astype(self.dtype)
            p[active], m[active], v[active] = pa, ma, va
            left = k[active] - i
            finished = (left <= 0) | np.isnan(pa) | (ma == 0)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                scale = peak * np.abs(ma.astype(np.float64)) / (1.0 - power(self.beta1, j + 1))
                bound = np.full(pa.shape, np.inf)
                if self.eps > 0 and self.decay1 < 1:
                    bound = scale * self.decay1 / ((1.0 - self.decay1) * self.eps)
                if r_bound < 1:
                    bound = np.minimum(bound, scale * r_bound / ((1.0 - r_bound) * np.sqrt(va.astype(np.float64))))
            negligible = bound <= self.tol * np.abs(pa.astype(np.float64))
            if self.eps == 0.0:
                # v is (or becomes) 0 before the gap ends (v can reach 0 only if beta2 <= 0.5, see __call__)
                vanishes = (va == 0) | ((va * self.beta2 ** left.astype(np.float64) == 0) & (self.beta2 <= 0.5))
                # an infinite p stays what it is unless a step adds the opposite infinity, m / 0 once v is 0: the
                # bound says nothing of that (tol * inf), so such a p is replayed on
                negligible &= np.isfinite(pa) | ~vanishes
                finished |= negligible
                p[active[finished & (ma == 0) & (left > 0) & vanishes]] = np.nan  # 0 / 0 before the gap ends
            else:
                finished |= negligible
            rest[active[finished]] = np.maximum(left[finished], 0)
            stopped[active[finished]] = i
            active = active[~finished]
        if scheduled and self.weight_decay:  # every coordinate is caught up through the same step
            p *= self.rate.decay(s + stopped, through, self.dtype).astype(self.dtype)
        elif self.c != 1.0:
            p *= power(self.c, rest).astype(self.dtype)
        return p


def _table(key: tuple, fill: Callable[[np.ndarray], np.ndarray], n: np.ndarray) -> np.ndarray:
    """``fill(n)`` for the int64 ``n >= 0``, from a table by ``n`` kept under ``key`` up to ``MAX_BIAS_TABLE``.

    The tables (:data:`_TABLES`) depend on ``key`` and ``n`` alone, so every
    optimizer of the process with the same betas shares them: a step's
    value is computed once, by the first catch-up that reaches it. A table
    grows in whole chunks of ``TABLE_CHUNK`` values, each filled by one call
    of ``fill`` on its aligned range: a value's bits depend on ``n`` alone,
    never on which values were asked for before (numpy's vectorised kernels
    may round a value by its position in the array), so an optimizer
    restored from a checkpoint computes what one that never stopped does.
    Values beyond the table are computed per call.
    """
    table = _TABLES.get(key, np.zeros(0))
    top = int(n.max()) + 1 if n.size else 0
    wanted = min(top, MAX_BIAS_TABLE)
    if wanted > table.size:
        size = min(-(-wanted // TABLE_CHUNK) * TABLE_CHUNK, MAX_BIAS_TABLE)
        table = np.concatenate([table, fill(np.arange(table.size, size, dtype=np.int64))])
        _TABLES[key] = table
    if top <= table.size:
        return table[n]
    out = np.empty(n.shape)
    inside = n < table.size
    out[inside] = table[n[inside]]
    out[~inside] = fill(n[~inside])
    return out


def _level_caps(rate: np.ndarray | float) -> np.ndarray:
    """The largest ``level`` with ``2**level * rate <= 1`` for each rate ``>= 0`` (62 for 0, -1 for inf), int64."""
    rate = np.asarray(rate, dtype=np.float64)
    level = np.full(rate.shape, 62.0)
    positive = rate > 0
    level[positive] = np.clip(np.floor(-np.log2(rate[positive])), -1, 62)
    return level.astype(np.int64)


def _pieces_of(chosen: np.ndarray, owner: np.ndarray, start: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, ...]:
    """The items ``(owner, start, size, level)`` of the pieces ``chosen`` in a (parts x levels) grid."""
    part, col = np.nonzero(chosen)
    return owner[part], start[part, col], np.left_shift(1, levels[col]), levels[col]


def _floor_log2(n: np.ndarray) -> np.ndarray:
    """``floor(log2(n))`` for int64 ``n >= 1``, exactly (a float64 of ``n >= 2**53`` can round up to a power of 2)."""
    e = np.frexp(n.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(np.left_shift(1, e) > n, e - 1, e)


def _one_minus_power(beta: float, t: np.ndarray) -> np.ndarray:
    """``1 - beta**t`` for real ``t > 0`` (1 where ``beta == 0``), by ``expm1``."""
    if beta == 0.0:
        return np.ones(np.shape(t))
    return -np.expm1(np.asarray(t, dtype=np.float64) * math.log(beta))


def _whole_rows(x: np.ndarray, last: np.ndarray) -> bool:
    """Whether ``x`` holds whole table rows with one last step each: ``x`` is ``(R, C)`` and ``last`` ``(R, 1)``."""
    return x.ndim == 2 and np.shape(last) == (x.shape[0], 1)


def _pole_series(level: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(r, q)`` of ``1 / (A - B u) = (1 / r) (1 + 2 sum_{j>=1} q**j T_j(u))`` for ``A = level > B = slope >= 0``.

    ``r = sqrt((A - B)(A + B))`` and ``q = B / (A + r)`` (the generating
    function of the Chebyshev polynomials, ``sum_j q**j T_j(u) = (1 - q u) /
    (1 - 2 q u + q**2)``; Mason and Handscomb, *Chebyshev Polynomials*, 5.1). With
    ``e < 1/2`` and ``t <= 1`` both factors of ``r`` exceed 1/2: no cancellation.
    """
    root = np.sqrt((level - slope) * (level + slope))
    return root, slope / (level + root)


def _series_terms(level: np.ndarray, slope: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Terms of the Chebyshev series of ``H(t) = sum w_i / (1 - e_i t)`` that reach ``target`` of ``H``, per block.

    ``level`` and ``slope`` are :func:`_series_coefficients`' ``A`` and
    ``B`` of each block's step of largest ``e`` (``e_max < 1/2``). The
    series of one step's term is ``(1 / r) (1 + 2 sum_{j>=1} q**j
    T_j(u))``, so the terms from ``j = n`` on are at most ``2 q**n / (r
    (1 - q))`` times its ``w``, while the term itself is at least ``w / (A
    + B)`` on ``u in [-1, 1]``: relative to it, the tail is at most
    ``2 q**n (A + B) / (r (1 - q))``. That grows with ``e`` (``q`` and
    ``(A + B) / (A - B)`` do), and every term is positive, so the step of
    largest ``e`` bounds the whole block's tail relative to ``H``. ``n``
    is the least count that holds the bound below ``target`` (per block:
    ``tol / 4``, or ``tol / 64`` for the blocks :meth:`AdamCoasting._smooth_sums`
    reads); ``q = 0`` (every ``e = 0``: ``H`` constant) takes one term.
    """
    out = np.ones(level.shape, dtype=np.int64)
    root, q = _pole_series(level, slope)
    live = q > 0
    if live.any():
        q, goal = q[live], np.broadcast_to(target, level.shape)[live]
        ratio = 2.0 * (level[live] + slope[live]) / (root[live] * (1.0 - q))
        out[live] = np.maximum(1, np.ceil(np.log(goal / ratio) / np.log(q)))
    return out


def _series_coefficients(w: np.ndarray, level: np.ndarray, slope: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` Chebyshev series coefficients of ``H(t) = sum w_i / (1 - e_i t)`` on each block's interval.

    The steps come in blocks beginning at ``starts``; with ``t = mid + half
    u``, ``1 - e_i t = level_i - slope_i u`` (``A_i - B_i u``), and by
    :func:`_pole_series`::

        c_0 = sum_i w_i / r_i,   c_j = 2 sum_i w_i q_i**j / r_i   (j >= 1),

    sums of positive terms, with ``q_i**j`` by repeated products (``j``
    roundings). Columns of ``j`` are computed ``NODE_BATCH`` steps times
    columns at a time. Returns shape ``(blocks, n)``.
    """
    root, q = _pole_series(level, slope)
    coef = np.empty((starts.size, n))
    group = max(1, NODE_BATCH // max(w.size, 1))  # columns of j a pass
    carry = w / root  # w_i q_i**j / r_i at the pass's first j
    for j in range(0, n if starts.size else 0, group):
        cols = min(group, n - j)
        powers = np.empty((w.size, cols))
        powers[:, 0] = carry
        powers[:, 1:] = q[:, None]
        np.cumprod(powers, axis=1, out=powers)
        coef[:, j : j + cols] = np.add.reduceat(powers, starts, axis=0)
        carry = powers[:, -1] * q
    coef[:, 1:] *= 2
    return coef


def _row_extremes(high: np.ndarray, low: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest entry of each row of ``high`` and the smallest of ``low`` (both ``(R, C)``), in float64.

    Reduced across columns of transposed copies: numpy reduces a contiguous
    axis row by row (one short inner loop per row, several times slower than
    the copy for the catch-up's rows of tens of entries), and a leading axis
    with whole-array passes.
    """
    if high.shape[1] == 1:
        return high[:, 0].astype(np.float64), low[:, 0].astype(np.float64)
    high_t = np.ascontiguousarray(high.T)
    low_t = high_t if low is high else np.ascontiguousarray(low.T)
    return high_t.max(axis=0).astype(np.float64), low_t.min(axis=0).astype(np.float64)


def _rounding_of_rho(rho: np.ndarray, d1: float, d2: float, c: float) -> np.ndarray:
    """``(rho_n - fl(rho_n)) / fl(rho_n)`` for the float64 ``fl(rho_n) = rho[n]`` of ``rho_n = d1 / (c d2**((n+1)/2))``.

    The exact value is that of the float64 factors ``d1``, ``c``, ``d2``, in
    integer arithmetic (their exact ratios, ``sqrt(d2)`` to 256 bits by
    :func:`math.isqrt`); Python divides the integers to the nearest float.
    """
    (a1, b1), (ac, bc), (a2, b2) = d1.as_integer_ratio(), c.as_integer_ratio(), d2.as_integer_ratio()
    root_num, root_den = root_ratio(d2)
    out = np.zeros(rho.size)
    for n, rounded in enumerate(rho.tolist()):
        if rounded == 0.0 or not math.isfinite(rounded):  # beta1 = 0: rho = 0 exactly
            continue
        half = (n + 1) // 2
        power_num, power_den = a2**half, b2**half
        if n % 2 == 0:  # an odd power of sqrt(d2)
            power_num, power_den = power_num * root_num, power_den * root_den
        out[n] = ratio_rounding(rounded, a1 * bc * power_den, b1 * ac * power_num)  # d1 / (c d2**((n+1)/2))
    return out


def _power_of_pair(value: np.ndarray, rounding: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``(value (1 + rounding))**e`` for each ``value[n]`` (axis 0) and exponents ``e``: ``value**e * exp(e * rounding)``.

    numpy's power is within an ulp of the power of its argument; the factor
    carries the argument's own rounding, which raising to ``e`` multiplies by
    ``e``.
    """
    return value[:, None] ** e * np.exp(e * rounding[:, None])


def _discounted_sums(rho: np.ndarray, rounding: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``D[n, d] = sum_{e < d} rho[n]**(d - e) * u[n, e]`` for ``d = 0 .. u.shape[1]``, shape ``(N, L)``.

    Computed as ``rho**d * cumsum(rho**-e * u)`` in blocks of ``e`` short
    enough that ``rho**-e`` cannot overflow, carrying ``D`` from block to block
    (``D[d] = rho**(d - e0) * (D[e0] + sum_{e0 <= e < d} rho**-(e - e0) u[e])``).
    Every term is positive, so the sums lose nothing to cancellation. The
    powers are those of ``rho`` with its ``rounding`` (:func:`_power_of_pair`).
    """
    terms, width = u.shape
    out = np.zeros((terms, width + 1))
    smallest = float(rho.min())
    block = width if smallest >= 1 else max(1, int(600 / math.log(1 / smallest))) if smallest > 0 else 1
    for e0 in range(0, width, block):
        e1 = min(width, e0 + block)
        offsets = np.arange(e1 - e0, dtype=np.float64)
        partial = np.cumsum(_power_of_pair(rho, rounding, -offsets) * u[:, e0:e1], axis=1)
        out[:, e0 + 1 : e1 + 1] = _power_of_pair(rho, rounding, offsets + 1) * (out[:, e0 : e0 + 1] + partial)
    return out


def stall_floor(factor: float, dtype: np.dtype, lerp: bool) -> float:
    """The largest value at which dense Adam's zero-gradient step leaves a subnormal moment unchanged.

    Dense Adam does not reach 0 by decaying: below the smallest normal number
    the moments are whole multiples ``n`` of the smallest subnormal ``u``, each
    step rounds, and once ``n`` is small enough the rounding gives ``n`` back.
    ``v <- v * beta2`` (``lerp=False``, ``factor = beta2``) keeps ``n * u`` when
    ``fl(beta2 * n * u) == n * u``; ``m <- lerp(m, 0, 1 - beta1)``
    (``lerp=True``, ``factor = 1 - beta1``) when ``fl((1 - beta1) * n * u) ==
    0``. Those ``n`` are ``1 .. n_max``; on the way down every step near
    ``n_max`` lowers ``n`` by exactly one, so a decaying moment lands on
    ``n_max * u`` and stays there (or keeps a smaller start). Returns
    ``n_max * u`` in ``dtype`` (0 when no subnormal is kept).
    """
    dt = np.dtype(dtype).type
    tiny = dt(np.finfo(dtype).smallest_subnormal)
    f = dt(factor)

    # torch's lerp(m, 0, w) is m + w * (0 - m) for w < 0.5, else 0 - (0 - m) * (1 - w)
    keep = dt(1) - f if lerp and factor >= 0.5 else f

    def kept(n: int) -> bool:
        with np.errstate(under="ignore"):
            x = dt(n) * tiny
            return bool(f * x == 0) if lerp and factor < 0.5 else bool(keep * x == x)

    if not kept(1):
        return 0.0
    shrink = float(factor) if lerp and factor < 0.5 else 1.0 - float(keep)
    guess = int(0.5 / shrink) if shrink > 0 else 1
    n = max(1, min(guess + 2, 1 << 52))
    while n > 1 and not kept(n):
        n -= 1
    while kept(n + 1) and n < (1 << 52):
        n += 1
    return float(dt(n) * tiny)


def _may_stall(x: np.ndarray, factor: np.ndarray, floor: float) -> bool:
    """Whether decaying ``x`` by ``factor`` (broadcasting) may bring a nonzero entry below ``floor`` (:func:`_stall`).

    False only when it provably does not: the least ``|x|`` times the least
    factor is at least ``2 floor``, so every rounded product of a nonzero entry
    stays above ``floor``. Two passes over ``x``, against the copy and the four
    of :func:`_stall` it saves.
    """
    if floor == 0.0 or not x.size:
        return False
    return not float(np.abs(x).min()) * float(np.min(factor)) >= 2.0 * floor


def _stall(x: np.ndarray, start: np.ndarray, floor: float) -> None:
    """Where decaying ``start`` reached ``x`` (in closed form) below dense Adam's stall, put the stall back, in place.

    Dense Adam's moment ends at ``min(|start|, floor)`` (with its sign) once
    the exact decay falls below ``floor`` (:func:`stall_floor`): never at 0.
    """
    if floor == 0.0:
        return
    low = (np.abs(x) < floor) & (start != 0)
    if low.any():
        x[low] = np.copysign(np.minimum(np.abs(start[low]), floor), start[low])


def dormant_factors(beta1: float, beta2: float, shrink: float, dtype: np.dtype) -> tuple[float, float, float]:
    """What one zero-gradient step multiplies ``m``, ``v`` and ``p`` by, as torch's kernels of ``dtype`` do.

    ``torch.optim.Adam(W)`` decays ``m`` with ``lerp(m, 0, 1 - beta1)``, that is
    by ``1 - dtype(1 - beta1)`` (a fused multiply-add), ``v`` by ``dtype(beta2)``
    and ``p`` by ``dtype(1 - lr * weight_decay)``: in float32 these differ from
    the float64 values by up to a float32 rounding, which ``k`` dormant steps
    raise to the ``k``-th power. In float64 they are the values themselves. (The
    bias corrections use the float64 betas, as torch computes them in Python.)
    """
    def rounded(x: float) -> float:
        return float(np.asarray(x, dtype=dtype))

    return 1.0 - rounded(1.0 - beta1), rounded(beta2), rounded(shrink)


def eps_of(dtype: np.dtype) -> float:
    """The machine epsilon of ``dtype``."""
    return float(np.finfo(dtype).eps)
