"""Memory measurement for tests: the peak of what a function allocates, and how exact that is.

``measure_peak`` is the instrument notebook 07 measures with
(:func:`sparse_opt.demos.memory.measure_peak`, numpy and the standard library
only), so a test and the notebook cannot disagree about what "a step
allocates" means::

    from memory_util import BOOKKEEPING_BYTES, measure_peak

(pytest puts ``tests/`` on ``sys.path`` for the test modules in it.)
"""

from __future__ import annotations

from sparse_opt.demos.memory import BOOKKEEPING_BYTES, measure_peak

__all__ = ["BOOKKEEPING_BYTES", "measure_peak", "same_peak"]


def same_peak(a: int, b: int, slack: int = BOOKKEEPING_BYTES) -> bool:
    """Whether two peaks of the same work agree to within ``slack`` bytes of numpy/Python bookkeeping.

    >>> same_peak(100_000, 100_600), same_peak(100_000, 120_000)
    (True, False)
    """
    return abs(a - b) <= slack
