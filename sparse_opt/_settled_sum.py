r"""The coasting of every dormant step once the bias corrections have settled: one function of ``x`` for every window.

Late in training (both bias corrections are 1: ``beta**s < 2**-54``), at a
constant rate without weight decay, a window of ``K`` dormant steps after any
last step coasts by ``lr m S_K(x)`` with (:mod:`sparse_opt._adam_coasting`;
with weight decay ``d1`` stands for ``beta1 / c``, and the window is ``c**K``
times that)::

    S_K(x) = sum_{i=1..K} d1**i / (q**i x + eps),    q = sqrt(d2),

``d1`` and ``d2`` the dormant factors and ``x = sqrt(v)``. The steps after the
``K``-th are ``d1**K`` times the first ones seen at ``q**K x``, so every window
is a difference of one function of ``x`` alone, the sum of *all* the steps::

    F(x) = sum_{i>=1} d1**i / (q**i x + eps),        S_K(x) = F(x) - d1**K F(q**K x).        (1)

:class:`SettledSum` tabulates ``F`` once per ``(d1, d2, eps)`` (kept for the
process) as a piecewise Chebyshev interpolant in ``y = log x``
(:mod:`sparse_opt._log_chebyshev`); a window then costs one evaluation per
entry, two while ``d1**K`` still counts, whatever ``K`` and however many
windows a step brings current.

**Building F.** With ``h = -log q``, ``l = -log d1`` and a *link* of ``M =
2**p`` steps (the largest with ``M h <= LINK_WIDTH`` and ``M (l + h) <=
LINK_DECAY``), (1) at ``K = M`` reads, in ``y``::

    F(y) = B(y) + d1**M F(y - M h),    B(y) = sum_{i=1..M} d1**i / (q**i e**y + eps).    (2)

The pieces are ``[Y0 + j w, Y0 + (j + 1) w]``, ``j = 0, 1, ...``, with ``w =
M h / lag <= PIECE_WIDTH`` (``lag`` pieces to a link): piece ``j - lag`` is
piece ``j`` moved by ``-M h``, so (2) gives the values at piece ``j``'s
Chebyshev nodes from piece ``j - lag``'s at the same nodes. Narrow pieces keep
the interpolant short (8 terms for ``w = 1/16``); long links keep the chain
of (2) short. At and below ``Y0 = log eps - 7 log 2`` (``z = x / eps <=
2**-7``) ``F`` is its series in ``z``::

    F = (1 / eps) sum_{n>=0} (-z)**n c_n,    c_n = d1 q**n / (1 - d1 q**n),

alternating with decreasing terms: ``SERIES_TERMS = 9`` of them leave at most
``z**9 / (1 - z) < 2**-62`` of ``F``. The series gives the values of pieces
``-lag .. -1``, and ``F`` wherever ``y <= Y0``.

``B`` sums ``g(t) = d1**(1+t) / (q**(1+t) e**y + eps)`` over ``t = 0 .. M -
1``, and ``g`` is analytic in ``t``: the ``m``-point discrete Gauss rule of
:mod:`sparse_opt._discrete_gauss` errs by at most ``4 R rho**(1-2m) / (rho -
1)`` of ``B``, where on the Bernstein ellipse of ``[0, M - 1]`` with
semi-minor axis ``sigma H`` (``H = (M - 1) / 2``, semi-major ``a = H sqrt(1 +
sigma**2)``, ``rho = sigma + sqrt(1 + sigma**2)``)::

    R = e**((l + h) (a + H)) / cos(psi / 2),    psi = h sigma H < pi,

bounds ``|g|`` there over its least value on ``[0, M - 1]``, uniformly in
``y``: ``|d1**(1+t)| <= d1**(1 + H - a)`` against ``d1**M``, and ``|q**(1+t)
e**y + eps| >= cos(psi / 2) (q**(1 + H + a) e**y + eps)`` (``|arg q**(1+t)| <=
psi``) against ``q e**y + eps``. The least ``m`` (over a few ``sigma``) for
``GAUSS_TOL`` is taken; a link the rules cannot halve is summed step by step.

**Error.** With ``u = 2**-53``: each piece's values are sums of positive
terms, so a piece errs by at most ``gamma e + LINK_ERROR`` relatively, ``e``
the error of the piece ``lag`` below and ``gamma = min(1, d1**M e**(M h))``
the largest share ``d1**M F(y - M h)`` can have of ``F(y)`` (``F(x) / F(x')
<= x' / x``), ``LINK_ERROR = GAUSS_TOL + (24 + 4 Y) u`` (the rule's nodes and
weights, the terms' powers and exponentials, the sums; ``Y`` the largest
``|y|`` of a node, whose position is known to ``2 Y u``, and ``|d log F / dy|
<= 1``). So after ``J`` pieces ``e_J <= 4 u + LINK_ERROR min(J / lag + 2, 1 /
(1 - gamma))``. The interpolant of degree ``n - 1`` (``piece_terms``, below
``INTERPOLATION_TOL``) raises the nodes' errors by its Lebesgue constant
(below 3) times ``e**w`` (``F`` varies by at most that on a piece); its
coefficients in powers of ``u`` (:func:`~sparse_opt._log_chebyshev.log_coefficients`)
and Horner's rule add at most ``kappa u`` of the piece's least value at the
nodes, ``kappa = (n + 2) (sum_{q,j} |f_q C_qj| + sum_{j,k} |c_j T_jk|) + 2 n
sum_k |a_k|`` computed from each piece (``f_q`` the values, ``C`` them to
Chebyshev coefficients ``c_j``, ``T`` those to the powers' ``a_k``; Higham,
*Accuracy and Stability of Numerical Algorithms*, 2002, eq. 5.3, for Horner's
rule), times ``3 e**w`` for the least at the nodes against the least on the
piece; and ``y = log x`` is placed within ``8 (Y + 1) u``, so::

    delta = INTERPOLATION_TOL + 3 e**w e_J + 3 e**w kappa u + 8 (Y + 1) u

bounds ``|F~ - F| / F`` below ``Y_J`` (:meth:`SettledSum.error`). Through (1)
a window errs by at most ``delta (F(x) + d1**K F(q**K x))``: the catch-up
takes it where that is within its tolerance of ``S_K`` (all but the shortest
windows, where ``S_K`` is a small part of ``F``) and sums the others as
before.

**Complex factors.** Under a cosine schedule a window's rates are ``A +
Re(B_s e**(-2 i omega i))`` (:meth:`AdamCoasting._settled_rates
<sparse_opt._adam_coasting.AdamCoasting._settled_rates>`), so the catch-up also
needs ``F`` for ``z = d1 e**(i phase)``: (1) and (2) hold for it as they are,
with ``z**K`` for ``d1**K``. Every bound above holds for the *moduli*: with
``|F|(x) = sum |z|**i / (q**i x + eps)`` (the real ``F`` of ``|z|``), a piece
errs by at most ``gamma e + LINK_ERROR`` of ``|F|``, the series' tail is below
``2**-62`` of ``|F|``, and on a link's ellipse ``|e**(i phase (1 + t))| <=
e**(|phase| sigma H)`` multiplies ``R`` (a link spans at most ``LINK_TURN /
|phase|`` steps, which keeps that factor small). A link's terms carry ``8 u``
more (the angle ``phase (1 + t)``, below ``LINK_TURN`` and rounded to ``2 u``,
its cosine and sine, the complex products), and the rounding of a complex sum
or Horner's rule is that of its two parts, ``sqrt(2)`` times it in modulus
(counted twice). So :meth:`SettledSum.error` bounds ``|F~ - F| / |F|``, and
``|F|`` is computed alongside at every node.

A factor that is not a float64 (``d1 / c`` under weight decay, and ``sqrt(d2) c /
d1`` for the sum of the steps before a window, :meth:`AdamCoasting._sums_before
<sparse_opt._adam_coasting.AdamCoasting._sums_before>`) comes with its relative
rounding (:func:`ratio_rounding`, exact), which its powers carry: ``d1**e
exp(e rounding)``, so that raising it does not multiply its rounding.

Pieces are built on demand, at most ``MAX_PIECES``, each from the one below by
the same arithmetic, value by value: what a piece holds does not depend on
which pieces were asked for before, so a catch-up resumed in a fresh process
gives the same bits.
"""

from __future__ import annotations

import math

import numpy as np

from sparse_opt._discrete_gauss import rules as gauss_rules
from sparse_opt._log_chebyshev import chebyshev_matrix, log_interpolate, piece_terms, power_matrix

#: Widest piece in ``log x`` (a link's shift ``M h`` is cut into ``lag`` pieces of at most this).
PIECE_WIDTH = 2.0**-4
#: Widest shift ``M h`` of a link (and ``h = -log sqrt(d2)`` at most that: ``d2 >= e**-8``).
LINK_WIDTH = 4.0
#: Most ``M (l + h)`` a link may span: how much its terms may fall, ``e**-LINK_DECAY`` at most.
LINK_DECAY = 8.0
#: Most ``M |phase|`` a link may span: how far a complex factor's terms may turn.
LINK_TURN = 2.0
#: Relative error of a link's Gauss rule.
GAUSS_TOL = 2.0**-56
#: Relative error of the interpolant through exact values at its nodes.
INTERPOLATION_TOL = 2.0**-50
#: Terms of the series below ``Y0``.
SERIES_TERMS = 9
#: Most pieces kept per function (``MAX_PIECES * n`` coefficients).
MAX_PIECES = 1 << 13
#: Functions kept for the process (the oldest is dropped beyond).
KEPT_SUMS = 16
#: The semi-minor axes (in half-widths of the link) tried for its Gauss rule.
LINK_SIGMAS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: Largest ``|phase|`` of a complex factor (a cosine's ``2 omega``; beyond, its links would need many nodes).
MAX_PHASE = 0.5
#: A float64 rounding.
U = 2.0**-53

_SUMS: dict[tuple[float, float, float, float, float], SettledSum] = {}


def settled_sum(d1: float, d2: float, eps: float, rounding: float = 0.0, phase: float = 0.0) -> SettledSum | None:
    """The process's :class:`SettledSum` of the factors ``d1 (1 + rounding) e**(i phase)``, ``d2`` and ``eps``; None where it does not apply.

    It applies for ``0 < d1 < 1``, ``e**(-2 LINK_WIDTH) <= d2 < 1``, ``|rounding|
    <= 2**-52``, a finite ``|phase| <= MAX_PHASE`` and a finite ``eps > 0``
    whose ``|F|(0) = d1 / ((1 - d1) eps)`` is below ``2**1000``.
    """
    if not (0.0 < d1 < 1.0 and math.exp(-2.0 * LINK_WIDTH) <= d2 < 1.0 and 0.0 < eps < math.inf):
        return None
    if abs(rounding) > 2.0**-52 or math.log(d1) - math.log1p(-d1) - math.log(eps) > 1000.0 * math.log(2.0):
        return None
    if not abs(phase) <= MAX_PHASE:
        return None
    key = (d1, d2, eps, rounding, phase)
    if key not in _SUMS:
        if len(_SUMS) >= KEPT_SUMS:
            del _SUMS[next(iter(_SUMS))]
        _SUMS[key] = SettledSum(d1, d2, eps, rounding, phase)
    return _SUMS[key]


def ratio_rounding(value: float, numerator: int, denominator: int) -> float:
    """``(n / d - value) / value``: the relative rounding of the float64 ``value`` of the exact ratio of two integers."""
    a, b = value.as_integer_ratio()
    return (numerator * b - a * denominator) / (a * denominator)


def root_ratio(value: float, bits: int = 256) -> tuple[int, int]:
    """``sqrt(value)`` of a float64 ``value > 0`` as a ratio of integers, within ``2**-bits`` of it (:func:`math.isqrt`)."""
    a, b = value.as_integer_ratio()
    return math.isqrt((a * b) << (2 * bits)), b << bits


class SettledSum:
    """``F(x) = sum_{i>=1} z**i / (q**i x + eps)``, ``z = d1 e**(i phase)``, ``q = sqrt(d2)``, by pieces in ``log x`` (module docstring).

    Parameters
    ----------
    d1, d2 : float
        The dormant factors of ``m`` and ``v`` (``0 < d1 < 1``, ``e**-8 <= d2 < 1``).
    eps : float
        Adam's ``eps`` (``> 0``).
    rounding : float
        ``d1``'s relative rounding where the factor is not a float64 (``d1 / c``):
        the sum is that of ``d1 (1 + rounding)``, whose powers are ``d1**e exp(e
        rounding)`` (``e rounding`` grows with ``e``, ``d1**e`` alone would err by
        it).
    phase : float
        The argument of a complex factor (*Complex factors* in the module
        docstring): 0, the default, for a real ``F``; otherwise ``F`` and its
        values are complex, and :meth:`error` is relative to ``|F|(x) = sum
        d1**i / (q**i x + eps)``, the sum of the terms' moduli.
    """

    def __init__(self, d1: float, d2: float, eps: float, rounding: float = 0.0, phase: float = 0.0) -> None:
        self.eps = eps
        self.phase = phase
        self.h = -0.5 * math.log(d2)
        self.l = -(math.log(d1) + math.log1p(rounding))
        longest = min(LINK_WIDTH / self.h, LINK_DECAY / (self.l + self.h), LINK_TURN / max(abs(phase), 1e-300))
        p = max(0, math.floor(math.log2(longest)))
        #: The link ``M`` and its shift in ``log x``, ``M h``, which ``lag`` pieces of ``width`` make up.
        self.link = 1 << p
        self.lag = max(1, math.ceil(self.link * self.h / PIECE_WIDTH))
        self.width = self.link * self.h / self.lag
        self.bottom = math.log(eps) - 7.0 * math.log(2.0)
        self.n = int(piece_terms(np.array([self.width / 2]), np.array([np.inf]), 8.0 * INTERPOLATION_TOL)[0])
        theta = np.pi * (np.arange(self.n) + 0.5) / self.n
        self._offsets = self.width / 2 * (1.0 + np.cos(theta))  # a piece's nodes in y, from its start
        self._chebyshev, self._power = chebyshev_matrix(self.n), power_matrix(self.n)
        e = -self.l - self.h * np.arange(SERIES_TERMS)  # log |z q**n|
        self._series = self._moduli = np.exp(e) / -np.expm1(e)
        if phase:
            e = e + 1j * phase  # log(z q**n)
            self._series = np.exp(e) / -np.expm1(e)
        #: ``|F|(0) = d1 / ((1 - d1) eps)``, the largest modulus of ``F``.
        self.ceiling = float(self._moduli[0]) / eps
        t, w = self._link_rule(p)
        self._numerators = w * np.power(d1, 1.0 + t) * np.exp((1.0 + t) * rounding)  # the weights times |z|**(1+t)
        self._link_decay = math.pow(d1, self.link) * math.exp(self.link * rounding)
        self._link_moduli = (self._numerators, self._link_decay)
        if phase:  # times e**(i phase (1 + t)): each power from its own exponent
            self._numerators = self._numerators * np.exp(1j * phase * (1.0 + t))
            self._link_decay = self._link_decay * complex(math.cos(phase * self.link), math.sin(phase * self.link))
        self._exponents = -(1.0 + t) * self.h  # log q**(1+t)
        self.coef = np.zeros((0, self.n), dtype=self._series.dtype)
        # pieces -lag .. -1 at their nodes, by the series: the values (2) takes from `lag` pieces below; for a
        # complex F also |F|'s, which bound its error
        below = np.exp(self.bottom + np.arange(-self.lag, 0)[:, None] * self.width + self._offsets[None, :])
        self._below = self._series_values(below)
        self._below_moduli = self._series_values(below, self._moduli) if phase else self._below
        self._rounding = 0.0  # the evaluation's rounding over a piece's least |F|, the largest so far (error)

    @property
    def pieces(self) -> int:
        """The pieces built so far (``F`` is known for ``x`` up to ``exp(Y0 + pieces width)``)."""
        return self.coef.shape[0]

    def _link_rule(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """``(t, w)``: the link's pseudo-steps (``0 .. M - 1``) and weights, a Gauss rule or every step (module docstring)."""
        M, H = 1 << p, ((1 << p) - 1) / 2
        best = math.inf
        for sigma in LINK_SIGMAS:
            psi = self.h * sigma * H
            if psi >= math.pi:
                continue
            a, rho = H * math.hypot(1.0, sigma), sigma + math.hypot(1.0, sigma)
            # |e**(i phase (1 + t))| = e**(-phase Im t) <= e**(|phase| sigma H) on the ellipse
            log_r = (self.l + self.h) * (a + H) + abs(self.phase) * sigma * H - math.log(math.cos(psi / 2))
            log_needed = math.log(4.0) + log_r - math.log(GAUSS_TOL * (rho - 1.0))
            best = min(best, math.ceil((log_needed / math.log(rho) + 1.0) / 2))
        if 2 * best > M:
            return np.arange(M, dtype=np.float64), np.ones(M)
        m = max(1, int(best))
        return gauss_rules([(p, m)])[(p, m)]

    def _series_values(self, x: np.ndarray, series: np.ndarray | None = None) -> np.ndarray:
        """``F(x)`` for ``x <= exp(Y0)`` by its series in ``x / eps`` (Horner's rule; ``series``: other ``c_n``, ``|F|``'s)."""
        series = self._series if series is None else series
        z = -(x / self.eps)
        acc = np.full(x.shape, series[-1])
        for c in series[-2::-1]:
            acc = acc * z + c
        return acc / self.eps

    def reach(self, x_max: float) -> bool:
        """Build the pieces up to ``x_max``; False where that would exceed ``MAX_PIECES`` (or ``x_max`` is not finite)."""
        if not math.isfinite(x_max):
            return False
        if x_max <= 0.0:
            return True
        need = math.floor((math.log(x_max) - self.bottom) / self.width) + 2
        if need > MAX_PIECES:
            return False
        if need > self.pieces:
            self._extend(need)
        return True

    def _extend(self, need: int) -> None:
        """Build pieces ``pieces .. need - 1`` by (2), each from the one ``lag`` below, value by value."""
        j = np.arange(self.pieces, need, dtype=np.float64)
        y = self.bottom + j[:, None] * self.width + self._offsets[None, :]
        denominators = np.exp(y[:, :, None] + self._exponents) + self.eps
        values = self._chain(self._below, (self._numerators / denominators).sum(axis=2), self._link_decay)
        self._below = values[-self.lag :]
        values = values[self.lag :]
        moduli = values
        if self.phase:  # |F| at the nodes, the scale of the error bound
            numerators, decay = self._link_moduli
            moduli = self._chain(self._below_moduli, (numerators / denominators).sum(axis=2), decay)
            self._below_moduli = moduli[-self.lag :]
            moduli = moduli[self.lag :]
        # the interpolants in powers of u through their Chebyshev coefficients (log_coefficients), term by
        # term: not a matrix product, whose bits could depend on the other pieces of the batch
        by_node = values[:, :, None] * self._chebyshev[None, :, :]
        chebyshev = by_node.sum(axis=1)
        by_degree = chebyshev[:, :, None] * self._power[None, :, :]
        coef = by_degree.sum(axis=1)
        # each sum of n products errs by (n + 2) u of its terms' sum of magnitudes, and a Chebyshev coefficient's
        # error moves the value by as much (|T_j| <= 1); Horner's rule errs by 2 n u sum |a_k| (|u| <= 1); complex
        # values err so in each part, sqrt(2) times that in modulus
        magnitudes = np.abs(by_node).sum(axis=(1, 2)) + np.abs(by_degree).sum(axis=(1, 2))
        rounding = ((self.n + 2) * magnitudes + 2 * self.n * np.abs(coef).sum(axis=1)) * (2.0 if self.phase else 1.0)
        self._rounding = max(self._rounding, float((rounding / moduli.min(axis=1)).max()))
        self.coef = np.concatenate([self.coef, coef])

    def _chain(self, below: np.ndarray, link_sums: np.ndarray, decay: float | complex) -> np.ndarray:
        """(2) piece by piece: the ``lag`` pieces ``below`` at their nodes, then each piece from the one ``lag`` below."""
        values = np.concatenate([below, np.empty_like(link_sums)])
        for r in range(link_sums.shape[0]):
            values[r + self.lag] = link_sums[r] + decay * values[r]
        return values

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``F(x)`` for a 2-D float64 ``x >= 0`` within the pieces built (:meth:`reach`), within :meth:`error` of it.

        The entries at or below ``exp(Y0)`` take the series, the others the
        pieces: where those are most, every entry goes through the pieces (at
        ``exp(Y0)`` at least) and the few below are then replaced, which costs
        less than gathering the others apart.
        """
        low = x <= math.exp(self.bottom)
        below = np.count_nonzero(low)
        if below == x.size:
            return self._series_values(x)
        if 2 * below <= x.size:
            out = self._interpolate(x)
            if below:
                out[low] = self._series_values(x[low])
            return out
        out = np.empty(x.shape, dtype=self.coef.dtype)
        out[low] = self._series_values(x[low])
        high = ~low
        out[high] = self._interpolate(x[high].reshape(-1, 1))[:, 0]
        return out

    def _interpolate(self, x: np.ndarray) -> np.ndarray:
        """``F(x)`` through the pieces for a 2-D float64 ``x`` above ``exp(Y0)``."""
        bottom = np.array([self.bottom])
        top = np.array([math.exp(self.bottom + self.pieces * self.width)])
        return log_interpolate(
            x, self.coef, np.exp(bottom), top, bottom, np.array([self.width]), np.array([self.pieces]),
            np.zeros(x.shape[0], dtype=np.int64),
        )

    def error(self) -> float:
        """``delta``: the relative error of :meth:`__call__` over the pieces built (module docstring)."""
        grow = math.exp(self.width)
        top = max(abs(self.bottom), abs(self.bottom + self.pieces * self.width))  # the largest |y| of a piece
        gamma = min(1.0, self._link_moduli[1] * math.exp(self.link * self.h))
        links = self.pieces // self.lag + 2
        if gamma < 1.0:
            links = min(links, 1.0 / (1.0 - gamma))
        turn = 8 if self.phase else 0  # a complex term's angle and products
        chain = 4 * U + (GAUSS_TOL + (24 + turn + 4 * top) * U) * links
        rounding = 3 * grow * self._rounding * U + 8 * (top + 1) * U
        return INTERPOLATION_TOL + 3 * grow * chain + rounding

