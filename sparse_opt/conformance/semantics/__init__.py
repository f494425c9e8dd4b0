"""The references: named semantics a candidate's trajectory is compared with.

A :class:`Reference` wraps a plain numpy function ``(table, steps, hyper) ->
trajectory`` (see :mod:`.adam`, :mod:`.adagrad`, :mod:`.sgd`) with its name,
the implementations that follow it, where the semantics comes from, whether it
could be run here or is modelled from published source, and the optional
features it defines. :func:`expected` evaluates one on a scenario, in float64
and (for the tolerance) in float32.

The Adam references, in report order:

- ``lazy``: sparse_opt LAZY = FBGEMM adam with the global ``iter`` (modelled);
- ``dormancy_decay``: sparse_opt DORMANCY_DECAY;
- ``dense_adamw``: dense AdamW = sparse_opt DENSE_EQUIVALENT (torch Adam / AdamW);
- ``current_rate``: DENSE_EQUIVALENT's catch-up with every skipped step at the
  current step's rate, as FBGEMM ``DECOUPLE_GLOBAL`` (TorchRec's GPU tables
  use it) and HugeCTR ``LazyGlobal`` catch rows up (modelled; scenarios with a
  schedule only). TorchRec 1.8.0's CPU fused SGD under its ``WarmupOptimizer``,
  run live, catches nothing up (``TorchrecSgdWarmup``);
- ``dense_l2``: torch.optim.Adam with coupled L2 weight decay;
- ``lazy_l2``: lazy Adam, coupled weight decay on touched rows only;
- ``sparse_adam``: torch SparseAdam / TF-Addons LazyAdam / HugeCTR Local, eps on sqrt(v);
- ``rowwise_bias``: FBGEMM adam, per-row visit-count bias correction (modelled);
- ``hugectr_lazy``: HugeCTR LazyGlobal, approximate catch-up (modelled);
- ``hugectr_dense``: HugeCTR Global, dense, eps on sqrt(v) (modelled);
- ``keras3_adam``: Keras 3 Adam + IndexedSlices, dense, v gets the sum of squares;
- ``tf1_adam``: tf.compat.v1 Adam, dense, eps on sqrt(v), float32 beta powers.

Adagrad: ``adagrad`` (torch / sparse_opt), ``tf_adagrad`` (TF kernel,
duplicates in turn), ``rowwise_adagrad`` (sparse_opt row-wise = FBGEMM
``EXACT_ROWWISE_ADAGRAD``, run live since FBGEMM's CPU wheel loads), and, only
on scenarios with ``weight_decay`` (the kernel form's
``adagrad_weight_decay_f32x4``): ``adagrad_l2``, ``adagrad_no_decay``,
``rowwise_l2``, ``rowwise_decoupled``, ``rowwise_no_decay``,
``rowwise_counter``. SGD:
``sgd_lazy`` (sparse_opt LAZY), ``sgd_dense`` (torch SGD = sparse_opt
DENSE_EQUIVALENT), ``sgd_current_rate`` (DENSE_EQUIVALENT's catch-up at the
current rate: modelled, schedules only), ``sgd_no_decay`` (only with
``weight_decay``), ``tf_momentum`` (TF kernel, duplicates in turn).

Learning-rate schedules (the ``"schedule"`` feature): the kit's modes, torch's
optimizers (run live under ``LambdaLR``) and the modelled FBGEMM and HugeCTR
kernels take each step's rate; ``keras3_adam``, ``tf1_adam``, ``tf_momentum``
and the Adagrad references are defined for a constant rate only (TensorFlow
does not run here to check them under a schedule).

FBGEMM's Adam variants (``lazy``, ``rowwise_bias``) stay modelled from source:
its CPU kernels raise "not supported in CPU mode" for ``ADAM``,
``PARTIAL_ROWWISE_ADAM`` and ``LAMB`` (GPU only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sparse_opt.conformance.case import Scenario, Step, frozen
from sparse_opt.conformance.hyper import FAMILIES, Hyper
from sparse_opt.conformance.semantics import adagrad, adam, sgd
from sparse_opt.conformance.tolerance import HALF_ULPS, SAFETY, Expected, floor_of, noise_in

Trajectory = Callable[[np.ndarray, Sequence[Step], Hyper], np.ndarray]


@dataclass(frozen=True)
class Reference:
    """A named semantics.

    Parameters
    ----------
    name : str
        Short key (a report column).
    family : {"adam", "adagrad", "sgd"}
    title : str
        Who implements it and what sets it apart, one line.
    modelled : bool
        True when written from published source only (the library could not run here).
    supports : frozenset of str
        Optional features it defines (see :meth:`Hyper.features`, plus
        ``"entries"`` for incomplete rows); it does not apply to a scenario
        using any other.
    trajectory : callable
        ``(table, steps, hyper) -> (T, rows, cols)`` in ``table``'s dtype.
    requires : frozenset of str
        Features a scenario must use for it to apply (a semantics of how a
        feature is treated, say "weight decay is ignored", says nothing where
        the feature is off: it would only duplicate its base reference).
    """

    name: str
    family: str
    title: str
    modelled: bool
    supports: frozenset[str]
    trajectory: Trajectory
    requires: frozenset[str] = frozenset()

    def applies_to(self, scenario: Scenario) -> bool:
        """Whether this semantics is defined for ``scenario`` (same family, features supported and required)."""
        return scenario.family == self.family and self.requires <= scenario.features <= self.supports

    @property
    def source(self) -> str:
        """The reference function's docstring: equations and sources."""
        return self.trajectory.__doc__ or ""


def _ref(
    name: str, family: str, title: str, fn: Trajectory, *features: str, modelled: bool = False, requires: str = ""
) -> Reference:
    needs = frozenset((requires,) if requires else ())
    return Reference(name, family, title, modelled, frozenset(("maximize",) + features) | needs, fn, needs)


_WD, _ENTRIES, _LR = "weight_decay", "entries", "schedule"

#: Every reference, in report order (Adam, Adagrad, SGD).
REFERENCES: tuple[Reference, ...] = (
    _ref("lazy", "adam", "sparse_opt LAZY = FBGEMM adam, global iter (modelled from source): lazy, eps on sqrt(v_hat)",
         adam.lazy, _WD, _ENTRIES, _LR),
    _ref("dormancy_decay", "adam", "sparse_opt DORMANCY_DECAY: moments and decay caught up at the touch, no coasting",
         adam.dormancy_decay, _WD, _ENTRIES, _LR),
    _ref("dense_adamw", "adam", "dense AdamW = sparse_opt DENSE_EQUIVALENT (torch.optim.AdamW; Adam without decay)",
         adam.dense_adamw, _WD, _ENTRIES, _LR),
    _ref("current_rate", "adam",
         "FBGEMM DECOUPLE_GLOBAL / HugeCTR LazyGlobal rule (modelled from source): dense catch-up, "
         "skipped steps at the current rate",
         adam.current_rate, _WD, _ENTRIES, modelled=True, requires=_LR),
    _ref("dense_l2", "adam", "torch.optim.Adam(weight_decay): dense, coupled L2 on every row",
         adam.dense_l2, _WD, _ENTRIES, _LR),
    _ref("lazy_l2", "adam", "lazy Adam with coupled weight decay on touched rows only",
         adam.lazy_l2, _WD, _ENTRIES, _LR),
    _ref("sparse_adam", "adam", "torch.optim.SparseAdam / TF-Addons LazyAdam / HugeCTR Local: lazy, eps on sqrt(v)",
         adam.sparse_adam, _ENTRIES, _LR),
    _ref("rowwise_bias", "adam",
         "FBGEMM adam with use_rowwise_bias_correction (modelled from source): bias by per-row visit count",
         adam.rowwise_bias_correction, _WD, _LR, modelled=True),
    _ref("hugectr_lazy", "adam",
         "HugeCTR LazyGlobal (modelled from source): approximate catch-up, current update deferred",
         adam.hugectr_lazy_global, _LR, modelled=True),
    _ref("hugectr_dense", "adam", "HugeCTR Global (modelled from source): dense, eps on sqrt(v)",
         adam.dense_eps_on_sqrt_v, _LR, modelled=True),
    _ref("keras3_adam", "adam",
         "Keras 3 Adam with IndexedSlices: dense moments, v gets sum of squares of duplicates, eps on sqrt(v)",
         adam.keras3_adam, _WD),
    _ref("tf1_adam", "adam", "tf.compat.v1 Adam: dense, eps on sqrt(v), float32 hyper-parameters and beta powers",
         adam.tf1_adam),
    _ref("adagrad", "adagrad", "torch.optim.Adagrad (sparse) = sparse_opt SparseAdagrad: duplicates summed",
         adagrad.adagrad, "lr_decay", "initial_accumulator_value", _ENTRIES),
    _ref("tf_adagrad", "adagrad", "TF raw sparse kernel ResourceSparseApplyAdagradV2: duplicates applied sequentially",
         adagrad.sequential_duplicates, "initial_accumulator_value"),
    _ref("rowwise_adagrad", "adagrad",
         "sparse_opt rowwise = FBGEMM EXACT_ROWWISE_ADAGRAD (run live on CPU): one accumulator per row",
         adagrad.rowwise, "lr_decay", "initial_accumulator_value", _ENTRIES),
    _ref("adagrad_l2", "adagrad", "Adagrad with coupled L2 decay on the touched entries (g + wd * p, then Adagrad)",
         adagrad.lazy_l2, "initial_accumulator_value", requires=_WD),
    _ref("adagrad_no_decay", "adagrad", "Adagrad that ignores weight_decay (FBGEMM EXACT_ADAGRAD on CPU, any mode)",
         adagrad.ignoring_decay, "initial_accumulator_value", requires=_WD),
    _ref("rowwise_l2", "adagrad", "FBGEMM EXACT_ROWWISE_ADAGRAD, weight_decay_mode L2: g + wd * p in the row's mean",
         adagrad.rowwise_l2, "initial_accumulator_value", requires=_WD),
    _ref("rowwise_decoupled", "adagrad",
         "FBGEMM EXACT_ROWWISE_ADAGRAD, weight_decay_mode DECOUPLE: p * (1 - lr * wd) at touches",
         adagrad.rowwise_decoupled, "initial_accumulator_value", requires=_WD),
    _ref("rowwise_no_decay", "adagrad", "row-wise Adagrad that ignores weight_decay",
         adagrad.rowwise_ignoring_decay, "initial_accumulator_value", requires=_WD),
    _ref("rowwise_counter", "adagrad",
         "FBGEMM EXACT_ROWWISE_ADAGRAD, COUNTER mode, default halflife -1: p * (1 + lr * wd / count) at touches",
         adagrad.rowwise_counter, "initial_accumulator_value", requires=_WD),
    _ref("sgd_lazy", "sgd", "sparse_opt SparseSgd LAZY: coupled decay and momentum on touched rows only",
         sgd.lazy, _WD, _ENTRIES, _LR),
    _ref("sgd_dense", "sgd", "dense SGD = sparse_opt DENSE_EQUIVALENT (torch.optim.SGD, dampening 0)",
         sgd.dense, _WD, _ENTRIES, _LR),
    _ref("sgd_current_rate", "sgd",
         "the FBGEMM DECOUPLE_GLOBAL / HugeCTR LazyGlobal rule on SGD (modelled from source): dense catch-up, "
         "skipped steps at the current rate",
         sgd.current_rate, _WD, _ENTRIES, modelled=True, requires=_LR),
    _ref("sgd_no_decay", "sgd", "lazy SGD that ignores weight_decay (FBGEMM EXACT_SGD on CPU, any mode)",
         sgd.ignoring_decay, _LR, requires=_WD),
    _ref("tf_momentum", "sgd",
         "TF raw sparse kernel ResourceSparseApplyMomentum: lazy, duplicates applied sequentially, lr outside",
         sgd.sequential_duplicates),
)


def references(family: str | None = None) -> tuple[Reference, ...]:
    """The references of ``family`` (all when ``None``), in report order."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    return tuple(r for r in REFERENCES if family is None or r.family == family)


def reference(name: str) -> Reference:
    """The reference called ``name``."""
    for r in REFERENCES:
        if r.name == name:
            return r
    raise KeyError(f"no reference named {name!r}; the names are {[r.name for r in REFERENCES]}")


@lru_cache(maxsize=1024)
def expected(scenario: Scenario, ref: Reference) -> Expected:
    """``ref``'s trajectory on ``scenario`` (float64), with its tolerance (see :mod:`..tolerance`).

    The reference is evaluated twice, in float64 and in float32; their largest
    difference, scaled to the scenario's dtype, is the reference's rounding
    noise (entries where the float32 evaluation is not finite are left out:
    they would make the tolerance infinite). A float16 scenario (the half form)
    is evaluated once, as the kit's float16 optimizers compute (float32 state,
    the weights rounded to float16 where written), and judged within
    ``HALF_ULPS`` float16 ulps. Cached per (scenario, reference).
    """
    if not ref.applies_to(scenario):
        raise ValueError(f"reference {ref.name!r} does not apply to scenario {scenario.name!r}")
    dtype, floor = scenario.dtype.name, floor_of(scenario.table)
    with np.errstate(all="ignore"):  # a semantics that computes 0 / 0 (say eps = 0) gives NaN, as the libraries do
        if dtype == "float16":
            half = ref.trajectory(scenario.table, scenario.steps, scenario.hyper).astype(np.float64)
            return Expected(ref.name, frozen(half), dtype, floor, 0.0, HALF_ULPS)
        exact = ref.trajectory(scenario.table.astype(np.float64), scenario.steps, scenario.hyper)
        rounded = ref.trajectory(scenario.table.astype(np.float32), scenario.steps, scenario.hyper)
        diff = np.abs(rounded - exact)
    noise = float(diff[np.isfinite(diff)].max(initial=0.0))
    return Expected(ref.name, frozen(exact), dtype, floor, SAFETY[dtype] * noise_in(dtype, noise))
