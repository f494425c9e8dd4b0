r"""Piecewise Chebyshev interpolants in ``log x``: nodes, coefficients, the node count a piece needs, and evaluation.

A function ``S(x) = sum_i w_i / (b_i x + eps)`` with positive ``w_i``, ``b_i``
and ``eps`` is, in ``y = log x``, analytic in the strip ``|Im y| < pi`` (every
denominator keeps a positive real part there), and varies by at most
``e**width`` over a piece of that width (``S(x) / S(x') <= x' / x`` for ``x <=
x'``). So on pieces of a fixed width in ``y`` a few Chebyshev terms reach a
float's rounding, whatever ``x``, ``b`` or ``eps`` (Trefethen, *Approximation
Theory and Approximation Practice*, Thm 8.2; :func:`piece_terms`). The
catch-up of :mod:`sparse_opt._adam_coasting` sums windows of dormant steps
through such pieces, and :mod:`sparse_opt._settled_sum` the settled sum of
every dormant step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

#: Entries :func:`log_interpolate` evaluates in one numpy pass.
INTERPOLATE_BATCH = 1 << 16


def piece_terms(half: np.ndarray, growth: np.ndarray, tol: float) -> np.ndarray:
    """Chebyshev nodes for pieces of half-width ``half`` in ``log x`` (``AdamCoasting._smooth_sums``), error below ``tol / 8``.

    ``growth`` is ``b_max x_max / eps``: ``S(0) / S(x) <= 1 + growth``. The
    best of a few semi-minor axes ``phi`` (larger: faster convergence, but
    a larger ``M``) is taken.
    """
    h = np.maximum(half, 1e-300)[:, None]
    phi = np.array([1.0, 1.5, 2.0, 2.5, 2.9])[None, :]
    rho = np.hypot(phi / h, 1.0) + phi / h
    semi_major = np.hypot(h, phi)
    bound = np.minimum(np.exp(h + semi_major), 1.0 + growth[:, None]) / np.cos(phi / 2)
    degree = np.maximum(0, np.ceil(np.log(32.0 * bound / (tol * (rho - 1.0))) / np.log(rho)))
    return degree.min(axis=1).astype(np.int64) + 1


def clenshaw(
    u: np.ndarray, coefficient: Callable[[int], np.ndarray], used: int, out: np.ndarray | None = None
) -> np.ndarray:
    """``sum_{j < used} c_j T_j(u)`` by Clenshaw's recurrence, for ``used >= 2``; ``coefficient(j)`` is ``c_j``.

    ``c_j`` broadcasts against ``u`` (a column per row, or one value per
    entry). ``b_j = 2 u b_{j+1} - b_{j+2} + c_j`` from ``b_used = b_{used+1} =
    0``, the sum ``u b_1 - b_2 + c_0``; the recurrence reuses three arrays,
    whatever the terms, and writes the sum to ``out`` when given.
    """
    two_u = u + u
    b1, b2 = coefficient(used - 1), None  # b2 = 0 until the first step
    spare: list[np.ndarray] = []
    for n in range(used - 2, 0, -1):
        step = np.multiply(two_u, b1, out=spare.pop() if spare else None)
        if b2 is not None:
            step -= b2
            if b2.shape == u.shape and b2.flags.writeable:  # an array of the recurrence's own, not a coefficient
                spare.append(b2)
        step += coefficient(n)
        b1, b2 = step, b1
    result = np.multiply(u, b1, out=out)
    if b2 is not None:
        result -= b2
    result += coefficient(0)
    return result


def log_nodes(start: np.ndarray, width: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` Chebyshev nodes (of the first kind) in ``x`` of each piece ``[start, start + width]`` of ``log x``, ``(pieces, n)``."""
    theta = np.pi * (np.arange(n) + 0.5) / n
    return np.exp((start + width / 2)[:, None] + (width / 2)[:, None] * np.cos(theta)[None, :])


@functools.lru_cache(maxsize=64)
def chebyshev_matrix(n: int) -> np.ndarray:
    """``(n, n)``: values at the ``n`` nodes of :func:`log_nodes` to the interpolant's Chebyshev coefficients.

    ``c_j = (2 - [j = 0]) / n sum_q f_q cos(j theta_q)``. Read-only, kept per ``n``.
    """
    theta = np.pi * (np.arange(n) + 0.5) / n
    out = np.cos(np.outer(theta, np.arange(n))) * (2.0 / n)
    out[:, 0] /= 2
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def power_matrix(n: int) -> np.ndarray:
    """``(n, n)``: Chebyshev coefficients to coefficients in powers of ``u`` (row ``j``: ``T_j``'s). Read-only, kept per ``n``."""
    out = np.zeros((n, n))
    for j in range(n):
        out[j, : j + 1] = np.polynomial.chebyshev.cheb2poly(np.eye(n)[j])[: j + 1]
    out.flags.writeable = False
    return out


def log_coefficients(at_nodes: np.ndarray) -> np.ndarray:
    """The interpolants through the values ``at_nodes`` (last axis: :func:`log_nodes`'s), in powers of ``u`` on ``[-1, 1]``.

    Through the Chebyshev coefficients, which fall geometrically on a piece
    (:func:`piece_terms`): the power basis then holds the interpolant within a
    few roundings of its value, and Horner's rule evaluates it in ``2 (n -
    1)`` operations (Clenshaw's recurrence takes ``3 (n - 1)``).
    """
    n = at_nodes.shape[-1]
    return (at_nodes @ chebyshev_matrix(n)) @ power_matrix(n)


def log_interpolate(
    x: np.ndarray,
    coef: np.ndarray,
    low: np.ndarray,
    top: np.ndarray,
    lo: np.ndarray,
    width: np.ndarray,
    pieces: np.ndarray,
    first: np.ndarray,
) -> np.ndarray:
    """The piecewise interpolants in ``log x`` at rows ``x`` (``(R, C)``), in float64 (or complex128), by Horner's rule in ``u``.

    Row ``r`` uses the pieces ``first[r] .. first[r] + pieces[r] - 1`` of
    ``coef`` (one piece a row, :func:`log_coefficients`), of width
    ``width[r]`` from ``lo[r] = log low[r]``; its ``x`` is clipped to
    ``[low[r], top[r]]``. ``low``, ``top``, ``lo``, ``width`` and ``pieces``
    may hold one value for every row. Rows are taken ``INTERPOLATE_BATCH``
    entries at a time, so that the batch's arrays stay in cache, and each
    term's coefficients are gathered as Horner's rule takes them (from a row of
    ``coef.T``, contiguous: faster than gathering every term at once).
    """
    n = coef.shape[-1]
    by_term = np.ascontiguousarray(coef.T)  # (n, pieces): a term's coefficients contiguous, for the gathers
    out = np.empty(x.shape, dtype=np.result_type(coef.dtype, np.float64))  # complex for complex coefficients
    rows = max(1, INTERPOLATE_BATCH // max(x.shape[1], 1))
    for r0 in range(0, x.shape[0], rows):
        r = slice(r0, r0 + rows)
        low_r, top_r, lo_r, width_r, pieces_r = (a[r] if a.size > 1 else a for a in (low, top, lo, width, pieces))
        u = np.empty(x[r].shape)  # log x, its position in pieces, then its place within its piece
        np.clip(x[r], low_r[:, None], top_r[:, None], out=u)
        np.log(u, out=u)
        u -= lo_r[:, None]
        u /= np.maximum(width_r, 1e-300)[:, None]
        piece = np.floor(u)
        np.clip(piece, 0, (pieces_r - 1)[:, None], out=piece)
        u -= piece
        u *= 2.0
        u -= 1.0
        np.clip(u, -1.0, 1.0, out=u)
        index = piece.astype(np.int64)
        index += first[r][:, None]  # within the rows' pieces: no bounds to check
        acc = out[r]
        by_term[n - 1].take(index, out=acc, mode="clip")
        term = np.empty_like(acc)
        for j in range(n - 2, -1, -1):
            acc *= u
            acc += by_term[j].take(index, out=term, mode="clip")
    return out
