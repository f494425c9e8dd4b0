r"""Which semantics does each real optimizer implement? The pieces of notebook 08, as plain functions.

Everything here stands on :mod:`sparse_opt.conformance` and needs numpy only,
except the plot (:func:`plot_gap` imports matplotlib when called), so that the
live re-check also runs in a torch or TensorFlow environment without the
notebook extras.

- **Verdicts.** :func:`load_recordings` reads the recorded torch 2.13 and
  TensorFlow 2.21 runs kept in the repository's ``tests/conformance``;
  :func:`verdict_rows` judges each with :func:`~sparse_opt.conformance.check`
  and adds the systems that are *modelled* from published source and never run
  (:data:`MODELLED`: FBGEMM, HugeCTR, TF Addons); :func:`format_verdicts` prints
  them as one fixed-width table. Each row also names the semantics nearest to
  the verdict and the scenario that tells the two apart (:func:`parting`).
- **What each semantics does** (:data:`SEMANTICS`, :func:`format_semantics`):
  dormant rows, where eps goes, the bias-correction counter, weight decay and
  repeated ids, from the references' sources.
- **How far apart the references are** (:func:`separation`): any two either
  agree within tolerance or differ by thousands of times it.
- **One entry through a gap** (:func:`gap_scenario`, :func:`gap_runs`,
  :func:`plot_gap`): a row touched, left dormant for ``k`` steps and touched
  again, under a candidate and several references.
- **Live re-check** (:func:`live_recheck`, :func:`format_live`): where torch or
  TensorFlow imports, run the adapters again and compare with the recordings.
- :func:`describe` turns a :class:`~sparse_opt.conformance.Report` into one sentence.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import sparse_opt
from sparse_opt.conformance import (
    Recording,
    Report,
    Scenario,
    check,
    expected,
    record,
    reference,
    references,
    run,
    scenarios,
)
from sparse_opt.conformance.adapters.kit import KitAdamDenseEquivalent, KitAdamDormancyDecay, KitAdamLazy
from sparse_opt.conformance.catalogue import ADAM, build, gap_schedule

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# --------------------------------------------------------------------------- recordings

#: The recorded adapters (file stems in ``tests/conformance``), in the order the notebook shows them.
RECORDED: tuple[str, ...] = (
    "TorchSparseAdam",
    "TorchAdam",
    "TorchAdamW",
    "KerasAdam",
    "Tf1Adam",
    "TorchAdagrad",
    "TfSparseApplyAdagradV2",
    "TorchSgd",
    "TorchSgdSparse",
    "TfSparseApplyMomentum",
)

#: Adapter module and library of each recorded adapter.
_ADAPTER_MODULE = {"torch": "torch_optim", "tensorflow": "tf_kernels"}


def library_of(name: str) -> str:
    """The library a recorded adapter drives: ``"torch"`` or ``"tensorflow"``.

    >>> library_of("TorchSparseAdam"), library_of("KerasAdam")
    ('torch', 'tensorflow')
    """
    if name not in RECORDED:
        raise KeyError(f"no recorded adapter named {name!r}; they are {list(RECORDED)}")
    return "torch" if name.startswith("Torch") else "tensorflow"


def recordings_dir() -> Path:
    """The repository's ``tests/conformance``, next to the ``sparse_opt`` package (an editable install)."""
    path = Path(sparse_opt.__file__).resolve().parents[1] / "tests" / "conformance"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no recordings at {path}: the notebooks read them from a checkout of the repository "
            "(pip install -e . from its root)"
        )
    return path


def load_recordings(directory: str | Path | None = None) -> dict[str, Recording]:
    """Every recording of :data:`RECORDED`, by adapter name, in that order."""
    folder = Path(directory) if directory is not None else recordings_dir()
    return {name: Recording.load(folder / f"{name}.npz") for name in RECORDED}


#: The production kernels run live, as ``tests/conformance`` sub-folder / file stem: FBGEMM's CPU TBE optimizers
#: (:mod:`sparse_opt.conformance.adapters.fbgemm`) and TorchRec's fused optimizers under
#: ``DistributedModelParallel`` (:mod:`sparse_opt.conformance.adapters.torchrec`); ``make test-live`` runs them
#: again and requires the recordings bit for bit. They take the kernel-form scenarios (float32, 4 columns), the
#: fp16 ones its half form (float16 tables); TorchRec's ``WarmupOptimizer`` takes the schedule scenarios too.
PRODUCTION: tuple[str, ...] = (
    "fbgemm/FbgemmExactSgd",
    "fbgemm/FbgemmExactSgdL2",
    "fbgemm/FbgemmExactSgdDecouple",
    "fbgemm/FbgemmExactAdagrad",
    "fbgemm/FbgemmExactAdagradL2",
    "fbgemm/FbgemmExactAdagradDecouple",
    "fbgemm/FbgemmRowwiseAdagrad",
    "fbgemm/FbgemmRowwiseAdagradL2",
    "fbgemm/FbgemmRowwiseAdagradDecouple",
    "fbgemm/FbgemmRowwiseAdagradCounter",
    "fbgemm/FbgemmRowwiseAdagradDecoupleGlobal",
    "fbgemm/FbgemmRowwiseAdagradSum",
    "fbgemm/FbgemmEmaInplaceRowwiseAdagrad",
    "fbgemm/FbgemmExactSgdFp16",
    "fbgemm/FbgemmExactAdagradFp16",
    "fbgemm/FbgemmRowwiseAdagradFp16",
    "torchrec/TorchrecSgd",
    "torchrec/TorchrecAdagrad",
    "torchrec/TorchrecRowwiseAdagrad",
    "torchrec/TorchrecSgdWarmup",
)


def load_production_recordings(directory: str | Path | None = None) -> dict[str, Recording]:
    """Every recording of :data:`PRODUCTION`, by file stem, in that order."""
    folder = Path(directory) if directory is not None else recordings_dir()
    return {name.split("/")[1]: Recording.load(folder / f"{name}.npz") for name in PRODUCTION}


def library_version(recording: Recording) -> str:
    """``"torch 2.13.0+cpu"``, ``"TF 2.21.0"``, ``"FBGEMM 1.8.0"`` or ``"TorchRec 1.8.0"``: the library recorded.

    The most specific library the recording names: TorchRec runs on FBGEMM's
    kernels, and both on torch.
    """
    if "torchrec" in recording.versions:
        return f"TorchRec {recording.versions['torchrec']}"
    if "fbgemm_gpu" in recording.versions:
        return f"FBGEMM {recording.versions['fbgemm_gpu']}"
    if "torch" in recording.versions:
        return f"torch {recording.versions['torch']}"
    if "tensorflow" in recording.versions:
        return f"TF {recording.versions['tensorflow']}"
    raise ValueError(f"recording of {recording.candidate} names no library: {recording.versions}")


def format_production(recordings: Mapping[str, Recording]) -> str:
    """The production kernels' table: every reference each recording matches, and whether its verdict is complete.

    A production kernel takes fewer scenarios than a library optimizer (FBGEMM's
    ``EXACT_SGD`` has no momentum, TorchRec hands no ``weight_decay`` over), so
    several references can fit what it did: all are listed, nearest first as
    :func:`~sparse_opt.conformance.check` orders them, and ``complete`` says
    whether every scenario that tells them apart ran (the report's ``ok``).
    """
    reports = {name: check(rec) for name, rec in recordings.items()}
    width = max(len(r.candidate) for r in recordings.values())
    head = f"{'optimizer':<{width}}  {'run as':<15} {'complete':<8} {'skipped':>7}  matches"
    lines = [head, "-" * len(head)]
    for name, rec in recordings.items():
        rep = reports[name]
        skipped = sum(1 for r in rep.results if r.skipped)
        matches = ", ".join(rep.verdict) or "none"
        lines.append(f"{rec.candidate:<{width}}  {library_version(rec):<15} {'yes' if rep.ok else 'no':<8} "
                     f"{skipped:>7}  {matches}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- modelled systems


@dataclass(frozen=True)
class Modelled:
    """A system whose semantics is known from its published source only (never run here).

    ``evidence`` is ``"modelled"`` when its reference was written from that
    source, ``"read from source"`` when its source was read and found to follow
    a reference that other libraries run.
    """

    optimizer: str
    semantics: str
    why: str
    evidence: str = "modelled"


#: Systems that could not be run here; their reference was written from their source. (FBGEMM's CPU
#: optimizers run live: ``sparse_opt.conformance.adapters.fbgemm``, recorded in ``tests/conformance``.)
MODELLED: tuple[Modelled, ...] = (
    Modelled("FBGEMM / TorchRec adam", "lazy",
             "FBGEMM's CPU TBE raises 'not supported in CPU mode' for ADAM: GPU only"),
    Modelled("FBGEMM adam, rowwise bias", "rowwise_bias",
             "FBGEMM's CPU TBE raises 'not supported in CPU mode' for ADAM: GPU only"),
    Modelled("HugeCTR Adam Local", "sparse_adam", "HugeCTR needs CUDA"),
    Modelled("HugeCTR Adam Global", "hugectr_dense", "HugeCTR needs CUDA"),
    Modelled("HugeCTR Adam LazyGlobal", "hugectr_lazy", "HugeCTR needs CUDA"),
    Modelled("TF Addons LazyAdam", "sparse_adam",
             "TF Addons is end-of-life and needs Keras 2's legacy optimizers, which Keras 3 does not provide",
             evidence="read from source"),
)


# --------------------------------------------------------------------------- what each semantics does


@dataclass(frozen=True)
class Semantics:
    """What a reference does, in five short phrases (from its source; see the reference's docstring)."""

    dormant: str
    eps: str
    bias: str
    decay: str
    repeats: str


#: Per reference: dormant rows, where eps is added, the bias-correction counter, weight decay, repeated ids.
SEMANTICS: dict[str, Semantics] = {
    "lazy": Semantics("frozen", "sqrt(v_hat)", "global step", "decoupled, at touches", "summed"),
    "dormancy_decay": Semantics("frozen; beta**gap at touch", "sqrt(v_hat)", "global step",
                                "decoupled, c**gap at touch", "summed"),
    "dense_adamw": Semantics("decay and move", "sqrt(v_hat)", "global step", "decoupled, every row", "summed"),
    "current_rate": Semantics("caught up at the current lr", "sqrt(v_hat)", "global step",
                              "decoupled, current lr at catch-up", "summed"),
    "dense_l2": Semantics("decay and move", "sqrt(v_hat)", "global step", "coupled L2, every row", "summed"),
    "lazy_l2": Semantics("frozen", "sqrt(v_hat)", "global step", "coupled L2, at touches", "summed"),
    "sparse_adam": Semantics("frozen", "sqrt(v)", "global step", "none", "summed"),
    "rowwise_bias": Semantics("frozen", "sqrt(v_hat)", "visits of the row", "decoupled, at touches", "summed"),
    "hugectr_lazy": Semantics("frozen; approx. catch-up", "sqrt(v)", "step of last touch", "none",
                              "summed"),
    "hugectr_dense": Semantics("decay and move", "sqrt(v)", "global step", "none", "summed"),
    "keras3_adam": Semantics("decay and move", "sqrt(v)", "global step (f32 betas)", "decoupled, every row",
                             "v: sum of squares"),
    "tf1_adam": Semantics("decay and move", "sqrt(v)", "f32 running beta**t", "none", "summed"),
    "adagrad": Semantics("frozen (= dense)", "sqrt(sum)", "-", "-", "summed"),
    "tf_adagrad": Semantics("frozen (= dense)", "sqrt(sum)", "-", "-", "one after another"),
    "rowwise_adagrad": Semantics("frozen (= dense)", "sqrt(row mean)", "-", "-", "summed"),
    "adagrad_l2": Semantics("frozen", "sqrt(sum)", "-", "coupled L2, at touches", "summed"),
    "adagrad_no_decay": Semantics("frozen (= dense)", "sqrt(sum)", "-", "none (weight_decay ignored)", "summed"),
    "rowwise_l2": Semantics("frozen", "sqrt(row mean)", "-", "coupled L2, at touches", "summed"),
    "rowwise_decoupled": Semantics("frozen", "sqrt(row mean)", "-", "decoupled, at touches", "summed"),
    "rowwise_no_decay": Semantics("frozen (= dense)", "sqrt(row mean)", "-", "none (weight_decay ignored)", "summed"),
    "rowwise_counter": Semantics("frozen", "sqrt(row mean)", "-", "growth lr*wd/count, at touches", "summed"),
    "sgd_lazy": Semantics("frozen", "-", "-", "coupled L2, at touches", "summed"),
    "sgd_dense": Semantics("momentum moves it", "-", "-", "coupled L2, every row", "summed"),
    "sgd_current_rate": Semantics("caught up at the current lr", "-", "-", "coupled L2, current lr at catch-up",
                                  "summed"),
    "sgd_no_decay": Semantics("frozen", "-", "-", "none (weight_decay ignored)", "summed"),
    "tf_momentum": Semantics("frozen", "-", "-", "none", "one after another"),
}


def format_semantics(names: Iterable[str] | None = None) -> str:
    """A fixed-width table of :data:`SEMANTICS` (default: every reference, in report order).

    >>> print(format_semantics(["sparse_adam"]).splitlines()[2].split())
    ['sparse_adam', 'frozen', 'sqrt(v)', 'global', 'step', 'none', 'summed']
    """
    chosen = list(names) if names is not None else [r.name for r in references()]
    head = (f"{'semantics':<15} {'dormant rows':<26} {'eps added to':<15} {'bias correction':<24} "
            f"{'weight decay':<27} {'repeated ids'}")
    lines = [head, "-" * len(head)]
    for name in chosen:
        s = SEMANTICS[name]
        lines.append(f"{name:<15} {s.dormant:<26} {s.eps:<15} {s.bias:<24} {s.decay:<27} {s.repeats}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- how references part

#: A relative difference above this is a difference of semantics, not of rounding.
CLEAR = 0.01


@dataclass(frozen=True)
class Parting:
    """How two references compare over the scenarios both apply to.

    ``agree`` of ``shared`` scenarios within tolerance; ``scenario`` tells them
    apart: the first (catalogue order) where they differ by more than
    :data:`CLEAR` relative, or else the one where they differ most;
    ``rel`` is their largest relative difference there (``max_rel``).
    """

    first: str
    second: str
    agree: int
    shared: int
    scenario: str
    rel: float
    median_rel: float


@lru_cache(maxsize=None)
def parting(first: str, second: str) -> Parting:
    """Compare reference ``first``'s trajectories with ``second``'s (tolerances of ``second``).

    >>> p = parting("sparse_adam", "lazy")
    >>> p.scenario, round(p.rel, 3)
    ('adam_near_eps', 0.223)
    """
    a, b = reference(first), reference(second)
    if a.family != b.family:
        raise ValueError(f"{first} ({a.family}) and {second} ({b.family}) are not of one family")
    devs = []
    for s in scenarios(a.family):
        if a.applies_to(s) and b.applies_to(s):
            devs.append((s.name, expected(s, b).deviation(expected(s, a).trajectory)))
    if not devs:
        raise ValueError(f"no scenario applies to both {first} and {second}")
    clear = [(name, d) for name, d in devs if d.max_rel > CLEAR]
    name, d = clear[0] if clear else max(devs, key=lambda item: item[1].max_rel)
    return Parting(first, second, sum(d.matched for _, d in devs), len(devs), name, d.max_rel,
                   float(np.median([d.max_rel for _, d in devs])))


def nearest(name: str) -> Parting:
    """The reference closest to ``name``: agreeing in the most scenarios, then the smallest median difference.

    >>> nearest("dense_l2").second, nearest("dense_l2").scenario
    ('dense_adamw', 'adam_weight_decay')
    """
    ref = reference(name)
    # a reference that exists only where a feature is on (requires weight_decay) is a variant, not a neighbour
    meet = [r for r in references(ref.family) if r.name != name and r.requires == ref.requires
            and any(r.applies_to(s) and ref.applies_to(s) for s in scenarios(ref.family))]
    others = [parting(name, r.name) for r in meet]
    return min(others, key=lambda p: (-p.agree, p.median_rel))


# --------------------------------------------------------------------------- the verdict table


@dataclass(frozen=True)
class VerdictRow:
    """One optimizer people run, and the semantics it implements.

    ``evidence`` is the library version of a recording, or the
    :attr:`Modelled.evidence` of a system never run; ``recorded`` says which;
    ``semantics`` is the verdict (None when a recording matches nothing);
    ``skipped`` the scenarios the library could not take (recordings only).
    """

    optimizer: str
    evidence: str
    family: str
    semantics: str | None
    skipped: tuple[str, ...]
    parting: Parting | None
    recorded: bool


def recorded_row(recording: Recording) -> VerdictRow:
    """Judge a recording with :func:`~sparse_opt.conformance.check`."""
    report = check(recording)
    semantics = report.semantics
    skipped = tuple(r.scenario for r in report.results if r.skipped)
    return VerdictRow(recording.candidate, library_version(recording), recording.family, semantics, skipped,
                      nearest(semantics) if semantics else None, recorded=True)


def modelled_row(system: Modelled) -> VerdictRow:
    """A modelled system's row: its semantics is its reference, by construction."""
    ref = reference(system.semantics)
    return VerdictRow(system.optimizer, system.evidence, ref.family, ref.name, (), nearest(ref.name), recorded=False)


def verdict_rows(recordings: Mapping[str, Recording]) -> list[VerdictRow]:
    """The recorded rows (in the mapping's order), then :data:`MODELLED`."""
    return [recorded_row(r) for r in recordings.values()] + [modelled_row(m) for m in MODELLED]


def format_verdicts(rows: Sequence[VerdictRow]) -> str:
    """The verdict table: optimizer, evidence, semantics, nearest other semantics and what tells them apart."""
    width = max(len(r.optimizer) for r in rows)
    head = (f"{'optimizer':<{width}}  {'run as':<17} {'semantics':<15} {'nearest other':<15} "
            f"{'told apart by':<24} {'rel. diff':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.parting is None:
            tail = f"{'none':<15} {'-':<15} {'-':<24} {'-':>9}"
        else:
            p = r.parting
            tail = f"{r.semantics:<15} {p.second:<15} {p.scenario:<24} {p.rel:>9.2e}"
        lines.append(f"{r.optimizer:<{width}}  {r.evidence:<17} {tail}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- separation


@dataclass(frozen=True)
class Pair:
    """Two references on one scenario: ``score`` = largest error / tolerance (a match is ``score <= 1``)."""

    score: float
    first: str
    second: str
    scenario: str


def separation(dtype: str | None = None) -> tuple[Pair, Pair]:
    """Over every scenario and every ordered pair of references applying to it: the closest call either side.

    Returns the largest score among the pairs that agree and the smallest
    among those that do not; ``dtype`` (``"float32"`` or ``"float64"``) keeps
    the scenarios of that dtype only.
    """
    agree, differ = [], []
    for fam in ("adam", "adagrad", "sgd"):
        for s in scenarios(fam):
            if dtype is not None and s.dtype.name != dtype:
                continue
            refs = [r for r in references(fam) if r.applies_to(s)]
            for a in refs:
                for b in refs:
                    if a is b:
                        continue
                    score = expected(s, b).deviation(expected(s, a).trajectory).score
                    (agree if score <= 1.0 else differ).append(Pair(score, a.name, b.name, s.name))
    return max(agree, key=lambda p: p.score), min(differ, key=lambda p: p.score)


# --------------------------------------------------------------------------- one entry through a gap

#: The hyper-parameters of the catalogue's Adam scenarios.
GAP_HYPER = ADAM

#: The references drawn by :func:`plot_gap`, with their labels.
GAP_REFERENCES: dict[str, str] = {
    "dense_adamw": "dense Adam = DENSE_EQUIVALENT",
    "lazy": "LAZY",
    "dormancy_decay": "DORMANCY_DECAY",
    "sparse_adam": "SparseAdam (eps on sqrt(v))",
    "hugectr_lazy": "HugeCTR LazyGlobal (modelled)",
}

#: Candidates offered by the notebook's widget.
GAP_CANDIDATES: dict[str, type] = {
    "kit LAZY": KitAdamLazy,
    "kit DORMANCY_DECAY": KitAdamDormancyDecay,
    "kit DENSE_EQUIVALENT": KitAdamDenseEquivalent,
}

#: The entry followed: row 1 (the one that goes dormant), column 0.
GAP_ENTRY = (1, 0)

#: Scores below this are drawn at it (an exact match has score 0, which a log axis cannot show).
SCORE_FLOOR = 1e-2

_STYLE: dict[str, dict[str, object]] = {
    "dense_adamw": {"color": "0.25", "linestyle": "-", "linewidth": 2.0},
    "lazy": {"color": "tab:red", "linestyle": "-", "linewidth": 1.6},
    "dormancy_decay": {"color": "tab:blue", "linestyle": "--", "linewidth": 1.6},
    "sparse_adam": {"color": "tab:orange", "linestyle": ":", "linewidth": 2.2},
    "hugectr_lazy": {"color": "tab:purple", "linestyle": "-.", "linewidth": 1.6},
}


def gap_scenario(k: int, seed: int = 8) -> Scenario:
    """Row 1 touched at step 2 and again after ``k`` dormant steps (step ``k + 3``), the catalogue's way.

    Row 0 is looked up on every step, row 2 at step 1 only, row 3 never; ``k + 5``
    steps in all, the Adam hyper-parameters of the catalogue (:data:`GAP_HYPER`).

    >>> s = gap_scenario(4)
    >>> [t for t, step in enumerate(s.steps, 1) if 1 in step.row_ids], len(s.steps)
    ([2, 7], 9)
    """
    if int(k) != k or k < 1:
        raise ValueError(f"the gap k must be a positive integer, got {k!r}")
    k = int(k)
    point = f"row 1 is touched at step 2 and again after {k} dormant steps"
    return build(f"gap_{k}", "adam", point, GAP_HYPER, gap_schedule(k), seed=seed)


@dataclass(frozen=True)
class GapRuns:
    """One entry of :func:`gap_scenario` ``(k)`` under a candidate and the references.

    ``values[name]`` and ``candidate_values`` have ``k + 6`` entries (step 0, the
    initial table, to step ``k + 5``); ``scores[name]`` has ``k + 5``: per step,
    ``|candidate - reference| / tolerance`` at the entry (``<= 1`` is a match).
    """

    k: int
    candidate: str
    entry: tuple[int, int]
    touches: tuple[int, ...]
    values: dict[str, np.ndarray]
    candidate_values: np.ndarray
    scores: dict[str, np.ndarray]

    @property
    def steps(self) -> np.ndarray:
        """0, 1, ..., k + 5."""
        return np.arange(self.candidate_values.size)

    def matches(self) -> tuple[str, ...]:
        """The references the candidate's entry stays within tolerance of at every step."""
        return tuple(name for name, s in self.scores.items() if (s <= 1.0).all())

    def first_parting(self, name: str) -> int | None:
        """The first step at which the candidate leaves reference ``name``'s tolerance, or None."""
        bad = np.flatnonzero(self.scores[name] > 1.0)
        return int(bad[0]) + 1 if bad.size else None


def candidate_label(candidate: type) -> str:
    """A short label: the key of :data:`GAP_CANDIDATES`, else the candidate's ``name`` or class name.

    >>> candidate_label(KitAdamLazy)
    'kit LAZY'
    """
    for label, cls in GAP_CANDIDATES.items():
        if cls is candidate:
            return label
    return str(getattr(candidate, "name", None) or candidate.__name__)


def gap_runs(k: int, candidate: type = KitAdamLazy, names: Iterable[str] = tuple(GAP_REFERENCES)) -> GapRuns:
    """Run ``candidate`` through :func:`gap_scenario` ``(k)`` and read :data:`GAP_ENTRY` off it and the references."""
    s = gap_scenario(k)
    result = run(candidate, s)
    if result.trajectory is None:
        raise ValueError(f"{getattr(candidate, '__name__', candidate)} did not run: {result.skipped or result.error}")
    r, c = GAP_ENTRY
    start = float(s.table[r, c])
    got = result.trajectory[:, r, c].astype(np.float64)
    values, scores = {}, {}
    for name in names:
        e = expected(s, reference(name))
        values[name] = np.concatenate([[start], e.trajectory[:, r, c]])
        tol = e.tolerance()[:, r, c]
        scores[name] = np.abs(got - e.trajectory[:, r, c]) / tol
    touches = tuple(t for t, step in enumerate(s.steps, 1) if r in step.row_ids)
    trace = np.concatenate([[start], got])
    return GapRuns(int(k), candidate_label(candidate), GAP_ENTRY, touches, values, trace, scores)


def plot_gap(k: int, candidate: type = KitAdamLazy) -> Figure:
    """Two panels: the entry's value under each reference with the candidate's as dots, and the candidate's
    distance from each reference in tolerances (log scale; below the line at 1 is a match)."""
    from sparse_opt.demos.figures import LEGEND, finish, new_figure

    runs = gap_runs(k, candidate)
    fig = new_figure(7.2, 7.0)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    dormant = (runs.touches[0], runs.touches[1])
    for ax in (top, bottom):
        ax.axvspan(dormant[0] + 0.5, dormant[1] - 0.5, color="0.92", zorder=0)
        for t in runs.touches:
            ax.axvline(t, color="0.6", linewidth=0.8, zorder=0)
    for name, label in GAP_REFERENCES.items():
        top.plot(runs.steps, runs.values[name], label=label, **_STYLE[name])
        bottom.plot(runs.steps[1:], np.maximum(runs.scores[name], SCORE_FLOOR), label=label, **_STYLE[name])
    top.plot(runs.steps, runs.candidate_values, "o", color="black", markersize=4.5,
             label=f"candidate: {runs.candidate} (dots)")
    r, c = runs.entry
    top.set_ylabel(f"entry ({r}, {c})")
    top.set_title(f"row {r} touched at steps {runs.touches[0]} and {runs.touches[1]}, dormant for {k} steps (shaded)")
    handles, labels = top.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=LEGEND, frameon=False)
    bottom.axhline(1.0, color="black", linewidth=1.0, linestyle="--")
    bottom.set_yscale("log")
    bottom.set_ylim(SCORE_FLOOR / 2, None)
    bottom.set_ylabel("|candidate - ref| / tol")
    bottom.set_xlabel("global step")
    bottom.set_title("distance from each reference, in tolerances (below 1: a match)")
    return finish(fig)


# --------------------------------------------------------------------------- live re-check


@dataclass(frozen=True)
class LiveResult:
    """A live re-run of one recorded adapter: ``status`` is ``"skipped"``, ``"same"`` or ``"differs"``."""

    name: str
    library: str
    status: str
    message: str


def _installed_version(library: str) -> str:
    return str(getattr(importlib.import_module(library), "__version__", "?"))


def _live_one(name: str, recorded: Recording) -> LiveResult:
    library = library_of(name)
    module = importlib.import_module(f"sparse_opt.conformance.adapters.{_ADAPTER_MODULE[library]}")
    live = record(getattr(module, name))
    version = _installed_version(library)
    got, want = check(live), check(recorded)
    problems = []
    if got.verdict != want.verdict:
        problems.append(f"verdict {got.semantics or 'none'} (recorded {want.semantics or 'none'})")
    for scenario_name, live_run in live.runs.items():
        was = recorded.runs.get(scenario_name)
        if was is None or (live_run.skipped, live_run.error) != (was.skipped, was.error):
            problems.append(f"{scenario_name} ran differently")
        elif live_run.trajectory is not None and was.trajectory is not None:
            rtol = 1e-5 if live_run.trajectory.dtype == np.float32 else 1e-12
            if not np.allclose(live_run.trajectory, was.trajectory, rtol=rtol, atol=0.0):
                problems.append(f"{scenario_name} trajectory moved")
    if problems:
        return LiveResult(name, library, "differs", f"{library} {version}: " + "; ".join(problems))
    return LiveResult(name, library, "same", f"{library} {version}: verdict {got.semantics}, as recorded")


def live_recheck(recordings: Mapping[str, Recording], available: Mapping[str, bool] | None = None) -> list[LiveResult]:
    """Re-run each recorded adapter whose library imports here; say which were skipped and why.

    ``available`` overrides the import check (library name to bool), for tests.
    """
    def importable(library: str) -> bool:
        if available is not None:
            return bool(available.get(library, False))
        return importlib.util.find_spec(library) is not None

    out = []
    for name, recorded in recordings.items():
        library = library_of(name)
        if not importable(library):
            why = f"skipped: {library} is not importable here (recorded with {library_version(recorded)})"
            out.append(LiveResult(name, library, "skipped", why))
            continue
        out.append(_live_one(name, recorded))
    return out


def format_live(results: Sequence[LiveResult]) -> str:
    """One line per adapter, then a sentence counting each status."""
    width = max(len(r.name) for r in results)
    lines = [f"{r.name:<{width}}  {r.message}" for r in results]
    counts = {status: sum(r.status == status for r in results) for status in ("same", "differs", "skipped")}
    lines.append("")
    lines.append(f"{counts['same']} re-run with the recorded verdict, {counts['differs']} differing, "
                 f"{counts['skipped']} skipped.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- one sentence per report


def describe(report: Report) -> str:
    """The report's headline as one sentence (verdict or closest reference, first divergence, skips, unrun).

    >>> print(describe(check(KitAdamLazy)))
    sparse_opt SparseAdamTable(LAZY) implements lazy (17 of 17 scenarios).
    """
    ran = sum(r.ran for r in report.results)
    skipped = [r for r in report.results if r.skipped]
    if ran == 0:
        parts = []
        if skipped:
            parts.append(f"{len(skipped)} skipped; the first because: {skipped[0].skipped}")
        if report.errors:
            first, error = next(iter(report.errors.items()))
            parts.append(f"{len(report.errors)} stopped with an error; the first, {first}: {error}")
        return f"{report.candidate}: no scenario ran ({'; '.join(parts) or 'no scenario given'})."
    if report.verdict:
        m, n = report.tally[report.verdict[0]]
        text = f"{report.candidate} implements {report.verdict[0]} ({m} of {n} scenarios)"
        if len(report.verdict) > 1:
            text += f", and also matches {', '.join(report.verdict[1:])}"
    else:
        m, n = report.tally[report.closest] if report.closest else (0, 0)
        text = f"{report.candidate} matches no reference everywhere; closest {report.closest} ({m} of {n} scenarios)"
    if report.claims and report.claims not in report.verdict:
        text += f"; it claims {report.claims}"
    if report.divergence is not None:
        d = report.divergence
        text += (f"; first divergence from {d.reference}: {d.scenario} step {d.step} row {d.row} col {d.col}, "
                 f"off by {abs(d.got - d.expected) / d.tolerance:.1e} tolerances")
    if skipped:
        text += f"; {len(skipped)} skipped ({', '.join(r.scenario for r in skipped)})"
    inconclusive = [name for name in report.unrun if name not in report.errors]  # errors are named below
    if inconclusive:
        text += f"; not conclusive: {', '.join(inconclusive)} would tell it apart from other references"
    if report.errors:
        text += f"; errors in {', '.join(report.errors)}"
    return text + "."
