r"""Low-precision parameters: where an optimizer rounds, and how.

The sparse optimizers (:class:`~sparse_opt.SparseSgd`, :class:`~sparse_opt.SparseAdam`,
:class:`~sparse_opt.SparseAdagrad`, their tables) and :class:`~sparse_opt.DenseAdam`
accept ``float16`` parameters and ``bfloat16`` ones (the ``ml_dtypes`` package, an
optional dependency: ``import sparse_opt`` never imports it; :func:`bfloat16` does,
and so does the first bfloat16 array an optimizer is given, which already needs it).
This module is the one place that decides the arithmetic of such an optimizer
(:class:`Precision`) and rounds its results (:func:`round_nearest`,
:func:`round_stochastic`); every optimizer calls it at the same points.

**The plan of one optimizer** (:class:`Precision`). Call the parameters' dtype ``P``.

- ``P`` float32 or float64: state and arithmetic are ``P``, nothing here changes
  anything (every method is the identity; the fields ``state_dtype``, ``rounding``
  and ``seed`` have no effect).
- ``P`` half (float16 or bfloat16), ``state_dtype="float32"`` (the default): the
  state is float32, the update is computed in float32 from the parameter's exact
  float32 value, and the parameter is rounded to ``P`` once, where it is written.
  Gradient values are cast to float32.
- ``P`` half, ``state_dtype="param"`` (torch's sparse optimizers on an fp16/bf16
  ``nn.Embedding``): the state is stored in ``P`` and the arithmetic is ``P``'s as
  torch's CPU kernels do it: each operation is evaluated in float32 (Python scalars
  enter as float32) and its result rounded to nearest in ``P`` (:meth:`Precision.q`);
  a fused operation (torch's ``lerp``, ``addcmul``, ``addcdiv``, ``add`` with
  ``alpha``) rounds once. Gradient values are cast to ``P``.

A step that would make a half parameter overflow (a finite value whose rounding is
``inf``) is refused before anything is written (:meth:`Precision.written`), as a
non-finite state is: parameters, state and the generator stay bit-identical.

**Round to nearest** (``rounding="nearest"``): IEEE 754 round-to-nearest-even,
``fl(x)``, as numpy's and ml_dtypes' casts (from float32 and float64 alike,
correctly rounded, subnormals included), torch's and FBGEMM's CPU kernels.
An update smaller than half a unit in the last place of ``p`` is lost
(*stagnation*): ``fl(p - d) = p`` whenever ``|d| < ulp(p) / 2``.

**Stochastic rounding** (``rounding="stochastic"``). For a real ``x`` between two
consecutive representable values ``lo <= x <= hi`` of ``P`` (``hi = lo`` when ``x``
is representable)::

    SR(x) = hi  with probability  f = (x - lo) / (hi - lo),
            lo  with probability  1 - f,                 so  E[SR(x)] = lo + f (hi - lo) = x.

The kit forms ``|x|``'s neighbours from the bit pattern of ``fl(|x|)`` (the two 16-bit
formats order their non-negative values like their bit patterns, subnormals
included, so the neighbour is one pattern away), computes ``f`` exactly in
float64 (``x`` is float32 or float64, ``lo`` and ``hi`` are halves: ``|x| - lo`` is
exact by Sterbenz' lemma or because ``lo = 0``, and ``hi - lo`` is a power of two),
and rounds up when ``u < f`` with ``u = Generator.random()``, uniform on the
multiples of ``2**-53`` in ``[0, 1)``: ``P(up) = ceil(f 2**53) / 2**53``, exactly ``f``
whenever ``f`` is a multiple of ``2**-53`` (always for a float32 ``x`` and for
``|x| >= 2**-14`` in float16; otherwise within ``2**-53``). Rounding the magnitude
away from zero with probability ``f`` is the same law as rounding ``x`` up (towards
``+inf``) with probability ``(x - lo) / (hi - lo)``. One draw per written entry, in
the order of the write (ascending coordinates, rows in row-major order), so the
generator's state after a step depends only on how many entries were written.
An ``|x|`` above the largest finite value has no upper neighbour and is refused.

The generator is ``numpy.random.default_rng(seed)`` (PCG64); its state is part of
the optimizer's ``state_dict()`` (:func:`generator_state`, six uint64 words), so a
run resumed from a checkpoint draws the same numbers as one that never stopped.

Source: IEEE 754-2019, section 4.3.1 (roundTiesToEven); Connolly, Higham & Mary,
"Stochastic Rounding and Its Probabilistic Backward Error Analysis", SIAM J. Sci.
Comput. 43(1), 2021 (SR's definition, ``E[SR(x)] = x``); Croci et al., "Stochastic
rounding: implementation, error analysis and applications", R. Soc. Open Sci. 9,
2022. FBGEMM's GPU kernels round fp16 weights stochastically with 13 random bits
added to the float32 value and then truncated (biased for results below float16's
normal range, as its comment says); its CPU kernels round to nearest. torch's
sparse optimizers keep the state in the parameters' dtype, with no float32 master.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from sparse_opt._arrays import describe_position

#: The accepted values of the configs' ``state_dtype`` and ``rounding``.
STATE_DTYPES = ("float32", "param")
ROUNDINGS = ("nearest", "stochastic")
#: The half-precision dtypes, by name (bfloat16 is recognised without importing ml_dtypes).
HALF_NAMES = ("float16", "bfloat16")
#: The words of a PCG64 generator's state in a state dict: state (2 x 64 bits), inc (2 x 64 bits),
#: has_uint32, uinteger.
GENERATOR_WORDS = 6
_MASK64 = (1 << 64) - 1


def is_half(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is float16 or bfloat16 (by name: no import of ``ml_dtypes``)."""
    return np.dtype(dtype).name in HALF_NAMES


def bfloat16() -> np.dtype:
    """The ``bfloat16`` dtype of the ``ml_dtypes`` package, imported now (``pip install ml_dtypes``).

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt._rounding import bfloat16
    >>> np.zeros(3, dtype=bfloat16()).nbytes  # doctest: +SKIP
    6
    """
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("bfloat16 parameters need the ml_dtypes package: pip install ml_dtypes") from e
    return np.dtype(ml_dtypes.bfloat16)


def check_state_dtype(value: object) -> str:
    """``value`` if it is one of :data:`STATE_DTYPES`, else ``ValueError`` (``TypeError`` for a non-string)."""
    if not isinstance(value, str):
        raise TypeError(f"state_dtype must be one of {STATE_DTYPES}, got {value!r}")
    if value not in STATE_DTYPES:
        raise ValueError(f"Invalid state_dtype: {value!r} (must be 'float32' or 'param')")
    return value


def check_rounding(value: object) -> str:
    """``value`` if it is one of :data:`ROUNDINGS`, else ``ValueError`` (``TypeError`` for a non-string)."""
    if not isinstance(value, str):
        raise TypeError(f"rounding must be one of {ROUNDINGS}, got {value!r}")
    if value not in ROUNDINGS:
        raise ValueError(f"Invalid rounding: {value!r} (must be 'nearest' or 'stochastic')")
    return value


def check_seed(value: object) -> int:
    """``value`` as an int in ``[0, 2**63 - 1]`` (the generator's seed), else ``TypeError`` / ``ValueError``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"seed must be a non-negative int, got {value!r}")
    v = int(value)
    if not 0 <= v <= 2**63 - 1:
        raise ValueError(f"Invalid seed: {v} (must be in [0, 2**63 - 1])")
    return v


def _finite_max(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).max)


def round_nearest(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` (float32 or float64) rounded to nearest-even in ``dtype`` (a new array; overflow gives ``inf``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x).astype(dtype)


def round_stochastic(x: np.ndarray, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """``x`` (float32 or float64, ``|x| <= max(dtype)`` or NaN) rounded stochastically to ``dtype``.

    Each entry becomes one of its two neighbours in ``dtype``, the upper one (in
    magnitude) with probability equal to the fraction of the gap ``x`` has covered
    (module docstring); one ``rng.random()`` per entry, in C order. A NaN stays NaN
    (it still takes its draw). The caller refuses ``|x| > max(dtype)`` first.

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt._rounding import round_stochastic
    >>> x = np.full(100_000, 1 + 2**-12)   # a quarter of the way from 1 to 1 + 2**-10
    >>> r = round_stochastic(x, np.float16, np.random.default_rng(0))
    >>> sorted(set(r.tolist())), round(float(np.mean(r == 1 + 2**-10)), 2)
    ([1.0, 1.0009765625], 0.25)
    """
    dtype = np.dtype(dtype)
    x64 = np.asarray(x, dtype=np.float64)
    a = np.abs(x64)
    with np.errstate(over="ignore", invalid="ignore"):
        near = a.astype(dtype)  # correctly rounded |x|
        bits = near.view(np.uint16)
        above = near.astype(np.float64) > a  # fl(|x|) is the upper neighbour: the lower is one pattern down
        lo_bits = bits - above.astype(np.uint16)
        lo = lo_bits.view(dtype).astype(np.float64)
        hi = (lo_bits + np.uint16(1)).view(dtype).astype(np.float64)
        frac = (a - lo) / (hi - lo)  # exact: |x| - lo by Sterbenz (or lo = 0), hi - lo a power of two
    up = rng.random(a.shape) < frac
    out_bits = lo_bits + up.astype(np.uint16)
    out_bits |= np.signbit(x64).astype(np.uint16) << np.uint16(15)
    return out_bits.view(dtype)


def fma(x: np.ndarray | float, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``x * y + z`` rounded once to float32 (``x``, ``y``, ``z`` float32): a fused multiply-add.

    Evaluated in float64, where the product of two float32 values is exact and
    the sum is rounded once to 53 bits, then rounded to float32; that differs from
    a true FMA only when the exact result lies within ``2**-53`` (relative) of a
    float32 rounding midpoint. torch's CPU kernels for half tensors fuse ``lerp_``,
    ``addcmul_`` and ``addcdiv_`` this way (measured: ``tests/test_lowp_golden.py``;
    ``lerp_`` of ``-0.0546875`` toward ``0.4921875`` by ``0.1`` gives ``8.149e-10``,
    where the unfused float32 form gives ``0``).
    """
    out = np.float64(x) * np.asarray(y, dtype=np.float64) if np.ndim(x) == 0 else (
        np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64))
    out += np.asarray(z, dtype=np.float64)
    return out.astype(np.float32)


def lerp(a: np.ndarray, b: np.ndarray, weight: float) -> np.ndarray:
    """torch's ``a.lerp(b, weight)`` on float32: ``a + w (b - a)`` if ``|w| < 0.5``, else ``b - (b - a)(1 - w)``, fused.

    The form of ``torch.lerp``'s CPU kernel (``ATen/native/Lerp.h``) with its
    multiply-add fused (:func:`fma`), for the per-operation arithmetic of a half
    state: rounding its one result gives torch's bits, where ``beta1 * m + (1 -
    beta1) * g`` differs from it in float32 on about 0.5% of entries (measured).
    """
    w = np.float32(weight)
    d = b - a
    if abs(weight) < 0.5:
        return fma(w, d, a)
    return fma(-(np.float32(1) - w), d, b)


def generator_state(rng: np.random.Generator) -> np.ndarray:
    """A PCG64 generator's state as six uint64 words (:data:`GENERATOR_WORDS`): plain, ``np.savez``-able."""
    s = rng.bit_generator.state
    state, inc = int(s["state"]["state"]), int(s["state"]["inc"])
    words = [state & _MASK64, state >> 64, inc & _MASK64, inc >> 64, int(s["has_uint32"]), int(s["uinteger"])]
    return np.array(words, dtype=np.uint64)


def check_generator_state(words: object, key: str = "rng_state") -> np.ndarray:
    """``words`` as a valid :func:`generator_state` (a fresh copy), else ``ValueError`` naming ``key``."""
    a = np.asarray(words)
    if a.shape != (GENERATOR_WORDS,) or a.dtype != np.uint64:
        raise ValueError(
            f"state_dict[{key!r}] must be {GENERATOR_WORDS} uint64 words, got shape {a.shape} dtype {a.dtype}"
        )
    if int(a[4]) > 1 or int(a[5]) > 0xFFFFFFFF:
        raise ValueError(f"state_dict[{key!r}] holds has_uint32 = {int(a[4])}, uinteger = {int(a[5])}: not a PCG64 state")
    if int(a[2]) % 2 == 0:
        raise ValueError(f"state_dict[{key!r}] holds an even increment: not a PCG64 state")
    return a.copy()


def set_generator_state(rng: np.random.Generator, words: np.ndarray) -> None:
    """Restore what :func:`generator_state` saved (``words`` already checked)."""
    w = [int(x) for x in words]
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": w[0] | (w[1] << 64), "inc": w[2] | (w[3] << 64)},
        "has_uint32": w[4],
        "uinteger": w[5],
    }


class Precision:
    """The arithmetic of one optimizer: state dtype, work dtype, rounding points (module docstring).

    Parameters
    ----------
    param_dtype : numpy dtype
        float32, float64, float16 or bfloat16.
    state_dtype : {"float32", "param"}
        For half parameters: float32 state, or the parameters' dtype. No effect otherwise.
    rounding : {"nearest", "stochastic"}
        How a half parameter is rounded where it is written. No effect otherwise.
    seed : int
        Seed of the generator of stochastic rounding (made only for half parameters
        with ``rounding="stochastic"``).

    Attributes
    ----------
    param, state, work : numpy dtype
        The parameters', the state's and the arithmetic's dtypes (``work`` is
        float32 for half parameters).
    per_op : bool
        The state is half: every operation's result is rounded to it (:meth:`q`).
    rng : numpy.random.Generator or None
        The generator of stochastic rounding, or None.

    Examples
    --------
    >>> import numpy as np
    >>> from sparse_opt._rounding import Precision
    >>> prec = Precision(np.dtype(np.float16), "float32", "nearest", 0)
    >>> prec.state, prec.work, prec.per_op
    (dtype('float32'), dtype('float32'), False)
    >>> p = np.array([1.0], dtype=np.float16)
    >>> prec.written(p.astype(np.float32) - np.float32(2**-12))   # below half an ulp: stagnation
    array([1.], dtype=float16)
    """

    def __init__(self, param_dtype: np.dtype, state_dtype: str = "float32", rounding: str = "nearest", seed: int = 0):
        self.param = np.dtype(param_dtype)
        self.half = is_half(self.param)
        self.rounding = rounding
        if self.half:
            self.state = self.param if state_dtype == "param" else np.dtype(np.float32)
            self.work = np.dtype(np.float32)
        else:
            self.state = self.work = self.param
        self.per_op = self.state != self.work
        self.rng = np.random.default_rng(seed) if self.half and rounding == "stochastic" else None
        self._max = _finite_max(self.param) if self.half else float("inf")

    def wide(self, a: np.ndarray) -> np.ndarray:
        """``a`` in the work dtype (itself if it already is; exact: a half widens to float32 exactly)."""
        return a if a.dtype == self.work else a.astype(self.work)

    def q(self, a: np.ndarray) -> np.ndarray:
        """An operation's result rounded to nearest in a half state dtype, kept in the work dtype (else ``a``)."""
        if not self.per_op:
            return a
        with np.errstate(over="ignore"):  # an overflow to inf is refused by the state's finiteness check
            return a.astype(self.state).astype(self.work)

    def qs(self, c: float) -> float:
        """A Python scalar as torch's ``add(other, alpha=c)`` on a half tensor uses it: rounded to the half state.

        torch's CPU ``add`` kernels for float16/bfloat16 convert ``alpha`` to the
        tensor's dtype (``mul_``, ``lerp_``, ``addcmul_`` and ``addcdiv_`` keep their
        scalar in float32). Only with per-operation rounding; else ``c`` itself.
        """
        if not self.per_op:
            return c
        return float(np.asarray(np.float32(c)).astype(self.state).astype(np.float32))

    def q_(self, a: np.ndarray) -> np.ndarray:
        """:meth:`q` in place (``a`` a work-dtype array); returns ``a``."""
        if self.per_op:
            with np.errstate(over="ignore"):
                a[...] = a.astype(self.state)
        return a

    def stored(self, a: np.ndarray) -> np.ndarray:
        """Work-dtype state values in the state dtype (exact after :meth:`q`)."""
        if a.dtype == self.state:
            return a
        with np.errstate(over="ignore"):
            return a.astype(self.state)

    def written(
        self,
        p: np.ndarray,
        positions: np.ndarray | None = None,
        position_name: str = "coordinate",
        name: str = "params",
    ) -> np.ndarray:
        """New parameter values ``p`` (work dtype) as they are written: rounded once by ``rounding``.

        The identity for float32/float64 parameters. For half parameters, a finite
        value that would overflow (round to ``inf``; for stochastic rounding, exceed
        the largest finite value) raises ``ValueError`` before any random number is
        drawn; the caller has written nothing yet. NaN (``eps = 0``'s ``0 / 0``, as
        torch) passes through.
        """
        if not self.half:
            return p
        with np.errstate(invalid="ignore"):
            if p.size and np.nanmax(np.abs(p), initial=0.0) > self._max:
                over = np.abs(p) > self._max
                out = None if self.rng is not None else round_nearest(p, self.param)
                if out is not None:
                    over &= np.isinf(out)
                if over.any():
                    k = int(np.flatnonzero(over.reshape(-1))[0])
                    where = describe_position(name, p, k, "", positions, position_name)
                    raise ValueError(
                        f"step refused: it would make {where}, which overflows {self.param.name} (largest finite "
                        f"{self._max:.6g}); parameters and state are unchanged"
                    )
                if out is not None:
                    return out
        if self.rng is None:
            return round_nearest(p, self.param)
        return round_stochastic(p, self.param, self.rng)

    def generator_entries(self) -> dict[str, Any]:
        """The generator's state-dict entry (``{"rng_state": words}``), or ``{}`` without a generator."""
        return {} if self.rng is None else {"rng_state": generator_state(self.rng)}
