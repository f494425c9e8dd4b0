"""The conformance report: per scenario the error against each reference, the verdict, the first divergence.

:class:`Report` prints as a fixed-precision text table (``str(report)``, stable
from run to run: the notebooks print it) and renders as HTML in Jupyter
(``_repr_html_``). Its fields are plain data for tests and further analysis.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from sparse_opt.conformance.tolerance import ROUNDING_LEVEL, Deviation


@dataclass(frozen=True)
class Divergence:
    """The first entry where a candidate leaves a reference's tolerance.

    ``step`` counts from 1; the first offending step, then row, then column.
    In the half form an entry within tolerance that is not a float16 number
    is out of it too (:mod:`.tolerance`); the text says so.
    """

    reference: str
    scenario: str
    step: int
    row: int
    col: int
    expected: float
    got: float
    tolerance: float

    def __str__(self) -> str:
        diff = abs(self.got - self.expected)
        why = (f"|diff| {diff:.3e} > tolerance {self.tolerance:.3e}" if diff > self.tolerance
               else "not a float16 number: the weights were not rounded to float16")
        return (f"{self.scenario} step {self.step} row {self.row} col {self.col}: expected {self.expected:.10g}, "
                f"got {self.got:.10g} ({why})")


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's outcome: the deviation from every applicable reference, or why there is none."""

    scenario: str
    point: str
    deviations: dict[str, Deviation]
    skipped: str = ""
    error: str = ""
    #: The scenario's parameter dtype.
    dtype: str = "float64"

    @property
    def ran(self) -> bool:
        """True when the candidate produced a trajectory."""
        return not (self.skipped or self.error)

    @property
    def matches(self) -> tuple[str, ...]:
        """The references matched within tolerance, in report order."""
        return tuple(name for name, d in self.deviations.items() if d.matched)

    @property
    def best(self) -> str | None:
        """The closest reference (smallest score; the first in report order on a tie)."""
        if not self.deviations:
            return None
        return min(self.deviations, key=lambda name: self.deviations[name].score)


#: A deviation of at most this many units in the last place of the trajectory's scale is rounding: its digits
#: change with the CPU (numpy dispatches AVX-512, AVX2 or baseline loops, which round differently), so the
#: report's text prints the bound it meets instead of the numbers (the Deviation keeps them).
ROUNDING_ULPS = 4.0


def _num(x: float) -> str:
    return f"{x:8.1e}"


def _unheld(d: Deviation) -> bool:
    """Out of tolerance only by holding numbers float16 has not (the half form's rule, :mod:`.tolerance`)."""
    return math.isinf(d.score) and math.isfinite(d.max_abs)


def _measures(d: Deviation) -> str:
    """max abs, max rel and ulps in three 8-wide columns, or the rounding bound across them."""
    if _unheld(d):
        return f"{'not float16 numbers':>26}"
    if d.max_ulps <= ROUNDING_ULPS:
        return f"{f'<= {ROUNDING_ULPS:g} ulps (rounding)':>26}"
    return f"{_num(d.max_abs)} {_num(d.max_rel)} {_num(d.max_ulps)}"


def _ulps(d: Deviation) -> str:
    """The ulps column of one reference: 8 wide, the rounding bound below :data:`ROUNDING_ULPS`."""
    if _unheld(d):
        return f"{'not f16':>8}"
    return f"{f'<={ROUNDING_ULPS:g}':>8}" if d.max_ulps <= ROUNDING_ULPS else _num(d.max_ulps)


@dataclass(frozen=True)
class Report:
    """What :func:`~sparse_opt.conformance.check` found.

    Attributes
    ----------
    candidate, family : str
    claims : str or None
        The reference the candidate claims (divergences are measured from it).
    results : tuple of ScenarioResult
        In scenario order.
    titles : dict of str to str
        Every reference of the family, in report order, with its title.
    tally : dict of str to (int, int)
        Per reference: scenarios matched, scenarios it applies to (among those run).
    verdict : tuple of str
        The references matched in every run scenario they apply to, most
        scenarios first: the semantics the candidate implements.
    closest : str or None
        ``verdict[0]``, or else the reference matched in most scenarios.
    divergence : Divergence or None
        The first divergence from ``claims`` (or from ``closest`` when nothing
        is claimed and nothing matches everywhere); None when there is none.
    separation : Divergence or None
        When nothing matches everywhere: the first divergence from ``closest``
        (the point that separates the candidate from it); None otherwise.
    unrun : tuple of str
        The scenarios that tell the claimed (or else the matched) semantics
        apart from another reference of the family but were not run: while
        there are any, the report is not ``ok``.
    """

    candidate: str
    family: str
    claims: str | None
    results: tuple[ScenarioResult, ...]
    titles: dict[str, str]
    tally: dict[str, tuple[int, int]]
    verdict: tuple[str, ...]
    closest: str | None
    divergence: Divergence | None
    separation: Divergence | None = None
    unrun: tuple[str, ...] = ()

    @property
    def semantics(self) -> str | None:
        """The best-matching semantics: ``verdict[0]``, or None when no reference matches every scenario."""
        return self.verdict[0] if self.verdict else None

    @property
    def errors(self) -> dict[str, str]:
        """Scenario -> the error the candidate stopped with."""
        return {r.scenario: r.error for r in self.results if r.error}

    @property
    def ok(self) -> bool:
        """No error, nothing in ``unrun``, and the claimed semantics (or, unclaimed, some reference) matches
        every run scenario."""
        if self.errors or self.unrun:
            return False
        return self.claims in self.verdict if self.claims else bool(self.verdict)

    def rounding_misses(self, ref: str) -> tuple[str, ...]:
        """The scenarios ``ref`` misses, when it misses them all by at most ``ROUNDING_LEVEL`` tolerances (else ()).

        Such a miss is most likely a floating-point operation order the
        tolerance does not cover: every planted bug and every other reference
        is far beyond it (``tolerance.py``).
        """
        missed = [r for r in self.results if ref in r.deviations and not r.deviations[ref].matched]
        if missed and all(r.deviations[ref].score <= ROUNDING_LEVEL for r in missed):
            return tuple(r.scenario for r in missed)
        return ()

    def _headline(self) -> list[tuple[str, str]]:
        def named(ref: str | None) -> str:
            if ref is None:
                return "none"
            matched, applicable = self.tally[ref]
            return f"{ref} ({matched}/{applicable} scenarios) -- {self.titles[ref]}"

        first = f"{self.candidate} (family {self.family})"
        if self.unrun:
            semantics = self.claims or self.verdict[0]
            first += (f" -- not conclusive: skipped {', '.join(self.unrun)}, which tell"
                      f"{'s' if len(self.unrun) == 1 else ''} {semantics} apart from other references")
        lines = [("candidate", first)]
        if self.claims:
            lines.append(("claims", named(self.claims)))
        if self.verdict:
            lines.append(("verdict", named(self.verdict[0])))
            lines += [("also matches", named(ref)) for ref in self.verdict[1:]]
        else:
            lines.append(("verdict", "no reference matches every scenario"))
            lines.append(("closest", named(self.closest)))
        if self.claims:
            lines.append((f"first divergence from {self.claims}", str(self.divergence) if self.divergence else "none"))
        if not self.verdict and self.closest is not None and self.closest != self.claims:
            lines.append((f"first divergence from {self.closest}", str(self.separation) if self.separation else "none"))
        for ref in dict.fromkeys(r for r in (self.claims, self.closest) if r and r not in self.verdict):
            missed = self.rounding_misses(ref)
            if missed:
                dtypes = sorted({r.dtype for r in self.results if r.scenario in missed})
                worst = max(r.deviations[ref].score for r in self.results if r.scenario in missed)
                lines.append((f"{ref} missed only at rounding level",
                              f"{', '.join(missed)} by at most {worst:.2f} tolerances ({'/'.join(dtypes)}), far "
                              "below any other semantics or planted bug: most likely a floating-point operation "
                              "order the tolerance does not cover"))
        skipped = [r.scenario for r in self.results if r.skipped]
        if skipped:
            lines.append(("skipped", ", ".join(skipped)))
        if self.errors:
            lines.append(("errors", ", ".join(self.errors)))
        return lines

    def __str__(self) -> str:
        refs = list(self.titles)
        width = max([len(r.scenario) for r in self.results] + [8])
        out = [f"{key}: {value}" for key, value in self._headline()]
        against = self.claims or "best"
        out += ["", f"{'scenario':<{width}}  {'best':<15} {'max abs':>8} {'max rel':>8} {'ulps':>8}  "
                f"(against {against}); matches"]
        for r in self.results:
            if not r.ran:
                out.append(f"{r.scenario:<{width}}  {'skipped: ' + r.skipped if r.skipped else 'error: ' + r.error}")
                continue
            d = r.deviations.get(self.claims or r.best or "")
            nums = _measures(d) if d else f"{'-':>8} {'-':>8} {'-':>8}"
            out.append(f"{r.scenario:<{width}}  {r.best or '-':<15} {nums}  {', '.join(r.matches) or '-'}")
        out += ["", "max ulps against each reference (* within tolerance, - not applicable)"]
        out.append(f"{'scenario':<{width}}  " + " ".join(f"{f'[{i}]':>9}" for i in range(1, len(refs) + 1)))
        for r in self.results:
            if not r.ran:
                continue
            cells = []
            for ref in refs:
                d = r.deviations.get(ref)
                cells.append(f"{'-':>9}" if d is None else f"{_ulps(d)}{'*' if d.matched else ' '}")
            out.append(f"{r.scenario:<{width}}  " + " ".join(cells))
        out.append("")
        for i, ref in enumerate(refs, 1):
            matched, applicable = self.tally[ref]
            out.append(f"{f'[{i}]':<4} {ref:<15} {matched:>2}/{applicable:<2} {self.titles[ref]}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        e = html.escape
        refs = list(self.titles)
        head = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td style='text-align:left'>{e(v)}</td></tr>"
                       for k, v in self._headline())
        cols = "".join(f"<th title='{e(self.titles[ref])}'>{e(ref)}</th>" for ref in refs)
        body = []
        for r in self.results:
            if not r.ran:
                why = f"skipped: {r.skipped}" if r.skipped else f"error: {r.error}"
                body.append(f"<tr><td style='text-align:left'>{e(r.scenario)}</td>"
                            f"<td colspan='{len(refs)}' style='text-align:left'>{e(why)}</td></tr>")
                continue
            cells = []
            for ref in refs:
                d = r.deviations.get(ref)
                if d is None:
                    cells.append("<td style='color:#999'>-</td>")
                    continue
                if _unheld(d):
                    tip = "not float16 numbers: the weights were not rounded to float16"
                elif d.max_ulps <= ROUNDING_ULPS:
                    tip = f"within {ROUNDING_ULPS:g} ulps: rounding"
                else:
                    # not the score: its tolerance includes float32 noise measured on this CPU (tolerance.py)
                    tip = f"max abs {d.max_abs:.3e}, max rel {d.max_rel:.3e}, max ulps {d.max_ulps:.3e}"
                style = "background:#d4edda;font-weight:bold" if d.matched else ""
                cells.append(f"<td style='{style}' title='{e(tip)}'>{e(_ulps(d).strip())}</td>")
            name = f"<td style='text-align:left' title='{e(r.point)}'>{e(r.scenario)}</td>"
            body.append(f"<tr>{name}{''.join(cells)}</tr>")
        return (
            f"<table>{head}</table>"
            "<p>max ulps against each reference; green: within tolerance; hover for abs and rel</p>"
            f"<table><tr><th style='text-align:left'>scenario</th>{cols}</tr>{''.join(body)}</table>"
        )
