r"""When is a trajectory the same as a reference's: the tolerance, and the error measures.

A reference's trajectory ``x`` (float64) is compared with a candidate's ``y``
(in the scenario's dtype ``D``), entry by entry over every step. The tolerance
of an entry is::

    tol = max(ULPS * spacing_D(max(|x|, floor)),  SAFETY_D * noise_D)

- ``spacing_D`` is the distance to the next number of dtype ``D`` (one ulp), and
  ``floor = max|p0| / 64`` keeps it from shrinking to nothing at an entry near
  zero (the scenarios keep entries away from zero; the floor is a guard).
  ``ULPS`` ulps cover a candidate that evaluates the same equations in another
  order, with fused multiply-adds, or with a last-ulp ``sqrt`` (torch's CPU
  ``sqrt`` is not correctly rounded).
- ``noise_D`` is the reference's own rounding on this scenario: the reference
  evaluated entirely in float32 (hyper-parameters rounded too) against the
  float64 evaluation, ``max |x_f32 - x|``, scaled to ``D`` by the ratio of unit
  roundoffs (first-order rounding errors scale with it). Where a scenario
  amplifies rounding (long dense runs, updates that divide by a tiny
  ``sqrt(v)``, hyper-parameters that are not exact in float32), the tolerance
  grows with it; elsewhere it stays at a few ulps.
- ``SAFETY_D`` covers a candidate whose own rounding differs from the
  reference's. In float64 that is operation order only: 8. In float32 it is
  also *where the hyper-parameters are rounded*: they arrive as Python floats,
  so a float32 optimizer may form ``1 - beta`` and ``1 - beta**k`` in double and
  round them (torch: ``lerp(g, 1 - beta1)``; bias corrections as tensors), or
  round ``beta`` first; ``1 - beta2`` cancels, and the two roundings of it
  differ by 1.3e-5 relative, a hundred float32 ulps.

  Measured (``python tests/test_conformance_float32.py``, pinned by that
  test file): 48 operation orders each of ``lazy``, ``rowwise_bias`` and
  ``dense_adamw`` (``1 - beta`` and ``1 - beta**k`` in float32 or double,
  multiply-add or ``lerp``, fused or not, three update orders). On the float32
  scenario the worst scores 1.16 times the noise term at ``SAFETY = 8``, so 8
  judged a correct torch-style Adam wrong; every planted bug and every other
  reference that float32 can resolve at all scores at least 639 times it (the
  closest: a DORMANCY_DECAY whose catch-up forgets one dormant step).
  ``SAFETY_float32 = 128`` puts the line between them with a margin of 13.8 on
  the legitimate side (worst 0.072 tolerances) and 40 on the bug side (at
  least 39.9 tolerances). In float64 the worst order scores 0.061 at
  ``SAFETY = 8`` (a margin of 16).

Any two references either agree within this tolerance on a scenario or differ
there by far more than it (at least 130 times in float32, more than a million
times in float64; on the catalogue's kernel form, float32 ``(rows, 4)``, at
least 26 times (29 without AVX-512), while agreeing pairs score at most 0.144:
``tests/test_conformance_kernel_form.py``), so a match or a mismatch is not a
matter of where the line is drawn. A miss by at most ``ROUNDING_LEVEL = 4`` tolerances, ten times below
the closest bug, is reported as a miss at rounding level (an operation order
the tolerance does not cover), not as another semantics.

**The half form** (float16 weights, float32 state: ``catalogue.HALF_SCENARIOS``).
The reference trajectory is the kit's float16 arithmetic itself (float32
update, weights rounded to nearest float16 where written), not a float64 one,
and the tolerance is ``HALF_ULPS * spacing_float16(max(|x|, floor))``, two
float16 ulps (``atol`` 0): a correct float16 optimizer computes the same
float32 value up to float32 rounding, so it can only land on the other
float16 neighbour of a write whose value lies within that rounding (or, as
FBGEMM's ``EXACT_ADAGRAD``, within the rounding of an fp16 update) of a
midpoint; such a flip moves the entry by one ulp, and in Adagrad and SGD
without decay the weights do not feed back into the update, so flips add up
instead of growing. Two ulps allow one flip measured at a coarser ulp than
the entry's now (an entry that crossed a power of two), or two flips. A
float16 table holds float16 numbers only: a trajectory entry that is not one
(the harness reads half-form tables unrounded, in float32) scores infinity,
whatever its distance: the weights were not rounded.

Measured (``tests/test_conformance_half.py``): the kit's own float16 Adagrad,
row-wise Adagrad and SGD (``SparseAdagradTable``, ``SparseSgdTable``) match
their references bit for bit; FBGEMM's ``EXACT_ADAGRAD``, which rounds the
update to fp16 before subtracting it, is one ulp off in 3 of its 6 scenarios
(0.5 tolerances); the float16 rounding's own effect (the float16 trajectory
against the float64 one) reaches 2.75 ulps. On the bug side, an Adagrad
rounding towards zero instead of to nearest scores 4.5 (its truncations drift
one way, a fraction of an ulp per write, and cross two ulps at the fifth
step of ``adagrad_gap_f16x4``), one that does not round at all is caught at its
first write that float16 cannot hold, and the closest pair of differing
references is 24 tolerances apart (48 ulps).

The measures reported, over the whole trajectory: ``max_abs = max |y - x|``,
``max_rel = max |y - x| / max(|x|, floor)``, ``max_ulps = max |y - x| /
spacing_D(max(|x|, floor))`` and ``score = max |y - x| / tol`` (a match is
``score <= 1``). A non-finite ``y`` scores infinity, except where ``x`` is the
same (a NaN where the semantics computes ``0 / 0``, as with ``eps = 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Budget in ulps of the candidate's dtype (float32 and float64).
ULPS = 32
#: The half form's budget, in float16 ulps (module docstring: measured, with its margins).
HALF_ULPS = 2.0
#: Factor on the reference's own rounding noise, by dtype (module docstring: measured, with its margins).
SAFETY = {"float32": 128.0, "float64": 8.0}
#: A miss by at most this many tolerances is reported as at rounding level (see the module docstring).
ROUNDING_LEVEL = 4.0


def spacing(x: np.ndarray, dtype: np.dtype | str) -> np.ndarray:
    """One ulp of ``dtype`` at ``|x|`` (float64 result)."""
    return np.spacing(np.abs(np.asarray(x, dtype=np.float64)).astype(dtype)).astype(np.float64)


def floor_of(table: np.ndarray) -> float:
    """The magnitude below which errors are measured as at ``floor``: ``max|p0| / 64`` (1/64 for a zero table)."""
    scale = float(np.max(np.abs(table))) if table.size else 0.0
    return (scale if scale > 0 else 1.0) / 64.0


def noise_in(dtype: np.dtype | str, noise_f32: float) -> float:
    """A float32 rounding noise scaled to ``dtype`` by the ratio of unit roundoffs."""
    return noise_f32 * float(np.finfo(dtype).eps / np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Deviation:
    """How far a candidate's trajectory is from one reference's (module docstring)."""

    max_abs: float
    max_rel: float
    max_ulps: float
    score: float

    @property
    def matched(self) -> bool:
        """Within tolerance everywhere."""
        return self.score <= 1.0


@dataclass(frozen=True, eq=False)
class Expected:
    """A reference's trajectory on one scenario, with what its tolerance needs.

    Parameters
    ----------
    reference : str
        The reference's name.
    trajectory : ndarray of float64, shape (T, rows, cols)
        The table after every step.
    dtype : str
        The scenario's dtype (the candidate's).
    floor : float
        See the module docstring.
    atol : float
        ``SAFETY_D * noise_D``.
    ulps : float
        ``ULPS`` (kept so exported vectors state the rule they were made with).
    """

    reference: str
    trajectory: np.ndarray
    dtype: str
    floor: float
    atol: float
    ulps: float = ULPS

    def _scale(self) -> np.ndarray:
        magnitude = np.abs(self.trajectory)
        return np.maximum(np.where(np.isfinite(magnitude), magnitude, 0.0), self.floor)

    def tolerance(self) -> np.ndarray:
        """The entry-wise tolerance, shaped like the trajectory."""
        return np.maximum(self.ulps * spacing(self._scale(), self.dtype), self.atol)

    def _errors(self, got: np.ndarray, observed: np.ndarray | None = None) -> np.ndarray:
        """``|got - expected|``; 0 where both are the same non-finite value (NaN and NaN), inf where one is.

        ``observed`` (bool, ``(T, rows)``): only those rows of each step were
        read (a training-loop run); the others count as 0.
        """
        if got.shape != self.trajectory.shape:
            raise ValueError(f"trajectory has shape {got.shape}, expected {self.trajectory.shape}")
        y = np.asarray(got, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(y - self.trajectory)
        same = (y == self.trajectory) | (np.isnan(y) & np.isnan(self.trajectory))
        if observed is not None:
            if observed.shape != got.shape[:2]:
                raise ValueError(f"observed has shape {observed.shape}, expected {got.shape[:2]}")
            same |= ~observed[:, :, None]
        return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))

    def _scores(self, got: np.ndarray, observed: np.ndarray | None = None) -> np.ndarray:
        """``|got - expected| / tolerance``; infinite where a float16 trajectory holds a number float16 has not.

        (A half-form candidate keeps float16 weights: a read that is not a
        float16 number is one it forgot to round. Read rows only, as ``_errors``.)
        """
        err = self._errors(got, observed)
        score = err / self.tolerance()
        if self.dtype == "float16":
            y = np.asarray(got, dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                unheld = np.isfinite(y) & (y.astype(np.float16).astype(np.float64) != y)
            if observed is not None:
                unheld &= observed[:, :, None]
            score[unheld] = np.inf
        return score

    def deviation(self, got: np.ndarray, observed: np.ndarray | None = None) -> Deviation:
        """The error measures of ``got`` against this trajectory (on the ``observed`` rows: see ``_errors``)."""
        err = self._errors(got, observed)
        scale = self._scale()
        return Deviation(
            max_abs=float(err.max()),
            max_rel=float((err / scale).max()),
            max_ulps=float((err / spacing(scale, self.dtype)).max()),
            score=float(self._scores(got, observed).max()),
        )

    def first_violation(self, got: np.ndarray, observed: np.ndarray | None = None) -> tuple[int, int, int] | None:
        """``(step, row, col)`` of the first entry out of tolerance (step from 1; row-major within a step), or None."""
        bad = np.argwhere(self._scores(got, observed) > 1.0)
        if bad.size == 0:
            return None
        t, r, c = (int(i) for i in bad[0])
        return t + 1, r, c
