"""Low-precision tables: stochastic rounding by statistics, validation, overflow refusal, checkpoints, memory.

The bit-exact comparisons with torch and FBGEMM are in ``tests/test_lowp_golden.py``.
Here :mod:`sparse_opt._rounding` and the optimizers are checked against
independent oracles:

- *neighbours*: every value of a 16-bit format, enumerated from its 65536 bit
  patterns and sorted, gives by binary search the two representable neighbours of
  any real (the oracle shares nothing with the kit's bit arithmetic);
- *frequencies*: a chi-square test of the round-up counts against the fractions,
  seeded, with its power stated where it is computed;
- *means*: many stochastically rounded updates average to the exact update
  (where round to nearest stagnates);
- *one rounding*: a half parameter with float32 state equals the float32
  computation rounded once, also after a DENSE_EQUIVALENT catch-up.

bfloat16 cases need ``ml_dtypes`` and are skipped without it.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from memory_util import measure_peak

import sparse_opt as so
from sparse_opt._rounding import Precision, round_nearest, round_stochastic

HALF = ("float16", "bfloat16")


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


_GRIDS: dict[str, np.ndarray] = {}


def _grid(dtype: np.dtype) -> np.ndarray:
    """Every finite value of a 16-bit float format, ascending, as float64 (one -0.0/0.0 kept)."""
    if dtype.name not in _GRIDS:
        with np.errstate(invalid="ignore"):  # the NaN patterns
            values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype).astype(np.float64)
        _GRIDS[dtype.name] = np.unique(values[np.isfinite(values)])
    return _GRIDS[dtype.name]


def _neighbours(x: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The largest representable ``<= x`` and the smallest ``>= x`` (the oracle)."""
    grid = _grid(dtype)
    hi_pos = np.searchsorted(grid, x, side="left")
    hi = grid[np.minimum(hi_pos, grid.size - 1)]
    lo = grid[np.maximum(np.searchsorted(grid, x, side="right") - 1, 0)]
    return lo, hi


def _sample_reals(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """Reals (float64) across the format's whole range, both signs, subnormals and exact values included."""
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    lo, hi = np.log2(float(fi.smallest_subnormal)) - 2, np.log2(float(fi.max)) - 0.01
    x = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(lo, hi, n)
    x[: n // 10] = _grid(dtype)[rng.integers(0, _grid(dtype).size, n // 10)]  # representable: must stay
    return x


# ------------------------------------------------------------------------------ stochastic rounding: neighbours


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("source", [np.float32, np.float64])
def test_each_stochastic_result_is_one_of_the_two_neighbours(name, source):
    dtype = _dtype(name)
    x = _sample_reals(dtype, 200_000, seed=1).astype(source).astype(np.float64)
    x = x[np.abs(x) <= float(np.finfo(dtype).max)]
    r = round_stochastic(x.astype(source), dtype, np.random.default_rng(2)).astype(np.float64)
    lo, hi = _neighbours(x, dtype)
    assert np.all((r == lo) | (r == hi))
    exact = lo == hi
    assert np.array_equal(r[exact], x[exact])  # representable values never move
    assert np.all(np.signbit(r[x != 0]) == np.signbit(x[x != 0]))
    both = ~exact
    assert (r[both] == lo[both]).any() and (r[both] == hi[both]).any()


@pytest.mark.parametrize("name", HALF)
def test_round_nearest_is_ieee_round_to_nearest_even(name):
    """Against the oracle: the nearer neighbour, ties to the even significand (float64 inputs, double-rounding free)."""
    dtype = _dtype(name)
    x = _sample_reals(dtype, 100_000, seed=3)
    x = x[np.abs(x) <= float(np.finfo(dtype).max)]
    lo, hi = _neighbours(x, dtype)
    mid = (lo + hi) / 2  # exact in float64
    ties = np.random.default_rng(4).choice(x.size, 2000, replace=False)
    x[ties] = mid[ties]
    r = round_nearest(x, dtype).astype(np.float64)
    even_lo = (lo.astype(dtype).view(np.uint16) & 1) == 0
    want = np.where(x < mid, lo, np.where(x > mid, hi, np.where(even_lo, lo, hi)))
    assert np.array_equal(r, want)


# ------------------------------------------------------------------------------ stochastic rounding: frequencies


#: 24 fractions x 20000 draws, chi-square at alpha = 1e-3 (critical value 51.18 with 24 dof). Power against a
#: systematic bias d of the round-up probability (noncentral chi-square, lambda = sum N d**2 / (f (1 - f)),
#: worst case f = 1/2, scipy.stats.ncx2): 0.92 for d = 0.005, 0.18 for d = 0.003.
DRAWS, CHI2_CRITICAL = 20_000, 51.18


def _fractions() -> np.ndarray:
    return np.array([1 / 1024, 1 / 64, 0.05, 0.1, 1 / 8, 0.2, 0.25, 0.3, 1 / 3, 0.4, 0.45, 0.49,
                     0.5, 0.51, 0.55, 0.6, 2 / 3, 0.7, 0.75, 0.8, 0.875, 0.9, 0.95, 1 - 1 / 64])


def _chi_square(ups: np.ndarray, fractions: np.ndarray, n: int) -> float:
    return float(np.sum((ups - n * fractions) ** 2 / (n * fractions * (1 - fractions))))


def _up_counts(dtype: np.dtype, base: np.ndarray, fractions: np.ndarray, rounder) -> np.ndarray:
    """For each base value ``b`` (representable, > 0) and fraction ``f``: how often ``b + f * gap`` rounds up."""
    lo = base.astype(np.float64)
    hi = (base.view(np.uint16) + np.uint16(1)).view(dtype).astype(np.float64)
    x = np.repeat(lo + fractions * (hi - lo), DRAWS).reshape(-1, DRAWS)
    r = rounder(x).astype(np.float64)
    assert np.all((r == lo[:, None]) | (r == hi[:, None]))
    return (r == hi[:, None]).sum(axis=1)


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("where", ["normal", "subnormal", "below_smallest"])
def test_round_up_frequency_matches_the_fraction(name, where):
    """Chi-square of the round-up counts, at normal values, subnormals, and between 0 and the smallest subnormal."""
    dtype = _dtype(name)
    fi = np.finfo(dtype)
    start = {"normal": 1.5, "subnormal": float(fi.smallest_subnormal) * 37, "below_smallest": 0.0}[where]
    fractions = _fractions()
    base = np.full(fractions.size, start, dtype=np.float64).astype(dtype)
    rng = np.random.default_rng([5, len(where)])
    ups = _up_counts(dtype, base, fractions, lambda x: round_stochastic(x, dtype, rng))
    assert _chi_square(ups, fractions, DRAWS) < CHI2_CRITICAL


def test_the_chi_square_catches_a_biased_rounding():
    """The test has teeth: FBGEMM's GPU recipe (13 random bits added below float16's 10-bit significand, then
    truncation, applied from float32) is biased in the subnormals, where a gap spans more float32 bits than 13."""
    dtype = np.dtype(np.float16)
    fractions = _fractions()
    base = np.full(fractions.size, float(np.finfo(dtype).smallest_subnormal) * 37).astype(dtype)
    rng = np.random.default_rng(6)

    def thirteen_bits(x: np.ndarray) -> np.ndarray:
        bits = x.astype(np.float32).view(np.uint32)
        noisy = bits + rng.integers(0, 1 << 13, size=bits.shape, dtype=np.uint32)
        truncated = (noisy & ~np.uint32((1 << 13) - 1)).view(np.float32)
        return truncated.astype(np.float16)  # exact for normals; subnormals round again

    ups = _up_counts(dtype, base, fractions, thirteen_bits)
    assert _chi_square(ups, fractions, DRAWS) > 10 * CHI2_CRITICAL


# ------------------------------------------------------------------------------ stochastic rounding: the mean


@pytest.mark.parametrize("name", HALF)
def test_mean_of_rounded_updates_converges_to_the_exact_update(name):
    """SGD on 2000 coordinates, each step 0.3 of an ulp at 1.0: nearest stagnates, stochastic tracks the exact sum.

    After 400 steps the exact value is ``1 - 400 * 0.3 ulp``; the mean over 2000 coordinates has standard
    deviation ``sqrt(400 * 0.21 / 2000) = 0.205`` ulp, so 5 sd is 1.02 ulp while a bias of 0.01 ulp per step
    (4 ulp) would be 19.5 sd away.
    """
    dtype = _dtype(name)
    ulp = float(np.spacing(np.float32(1.0)).astype(np.float64)) if False else float(
        (np.array([1.0], dtype).view(np.uint16) + np.uint16(1)).view(dtype).astype(np.float64)[0] - 1.0
    )
    n, steps = 2000, 400
    results = {}
    for rounding in ("nearest", "stochastic"):
        p = np.ones(n, dtype)
        opt = so.SparseSgd(p, so.SparseSgdConfig(lr=1.0, rounding=rounding, seed=7))
        grad = so.CooGradient(np.arange(n), np.full(n, 0.3 * ulp / 2), n)  # below 1.0 the ulp halves
        for _ in range(steps):
            opt.step(grad)
        results[rounding] = p.astype(np.float64)
    exact = 1.0 - steps * 0.3 * ulp / 2
    assert np.all(results["nearest"] == 1.0)  # stagnation: 0.3 of the ulp below 1 is under half of it
    sd = np.sqrt(steps * 0.21 / n) * ulp / 2
    assert abs(results["stochastic"].mean() - exact) < 5 * sd


# ------------------------------------------------------------------------------ validation


CONFIGS = {
    "sgd": lambda **kw: so.SparseSgdConfig(lr=0.1, **kw),
    "adam": lambda **kw: so.SparseAdamConfig(**kw),
    "adagrad": lambda **kw: so.SparseAdagradConfig(**kw),
    "dense_adam": lambda **kw: so.DenseAdam(np.zeros(3, np.float16), **kw),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(
    ("field", "value", "exc", "match"),
    [
        ("state_dtype", "float64", ValueError, r"Invalid state_dtype: 'float64'"),
        ("state_dtype", "half", ValueError, r"Invalid state_dtype: 'half'"),
        ("state_dtype", None, TypeError, r"state_dtype must be one of .* got None"),
        ("rounding", "up", ValueError, r"Invalid rounding: 'up'"),
        ("rounding", 1, TypeError, r"rounding must be one of .* got 1"),
        ("seed", -1, ValueError, r"Invalid seed: -1"),
        ("seed", 2**63, ValueError, r"Invalid seed: 9223372036854775808"),
        ("seed", 1.5, TypeError, r"seed must be a non-negative int, got 1.5"),
        ("seed", True, TypeError, r"seed must be a non-negative int, got True"),
    ],
)
def test_bad_precision_fields_are_refused_naming_field_and_value(name, field, value, exc, match):
    with pytest.raises(exc, match=match):
        CONFIGS[name](**{field: value})


def test_half_params_are_accepted_only_where_the_spec_says():
    with pytest.raises(TypeError, match="float32 or float64, got float16"):
        so.Adafactor(np.zeros(3, np.float16))


def test_import_sparse_opt_does_not_import_ml_dtypes():
    code = "import sys, numpy as np, sparse_opt as so; so.SparseAdam(np.zeros(3, np.float16)); print('ml_dtypes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _snapshot(opt) -> dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in opt.state_dict().items() if isinstance(v, np.ndarray)}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)) for k in a)


def _optimizers(dtype, rounding, state_dtype="float32", lr=0.1, seed=3):
    """One of each optimizer; Adam's and Adagrad's steps move a parameter by about ``lr``."""
    kw = dict(rounding=rounding, state_dtype=state_dtype, seed=seed)
    return {
        "sgd": lambda p: so.SparseSgdTable(p, so.SparseSgdConfig(lr=1.0, momentum=0.5, mode="dense_equivalent", **kw)),
        "adam": lambda p: so.SparseAdamTable(p, so.SparseAdamConfig(lr=lr, mode="dense_equivalent", **kw)),
        "adagrad": lambda p: so.SparseAdagradTable(p, so.SparseAdagradConfig(lr=lr, rowwise=True, **kw)),
        "dense_adam": lambda p: so.DenseAdam(p, lr=lr, **kw),
    }


def _grad(opt, rows, value, shape):
    if isinstance(opt, so.DenseAdam):
        g = np.zeros(shape)
        g[rows] = value
        return g
    return so.CsrGradient.from_rows(rows, np.full((len(rows), shape[1]), value), shape[0])


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("which", ["sgd", "adam", "adagrad", "dense_adam"])
def test_a_step_that_would_overflow_the_half_type_changes_nothing(name, rounding, which):
    """Parameters near the largest finite value pushed over it: refused naming the value; params, state and the
    generator bit-identical, and the optimizer still steps afterwards."""
    dtype = _dtype(name)
    big = float(np.finfo(dtype).max)
    table = np.full((4, 4), big * 0.999, dtype=np.float64).astype(dtype)
    opt = _optimizers(dtype, rounding, lr=big / 100)[which](table)
    opt.step(_grad(opt, [0], 1.0, table.shape))
    before, params = _snapshot(opt), table.copy()
    rng_before = None if opt._precision.rng is None else opt._precision.rng.bit_generator.state
    push = -big if which in ("sgd",) else -1.0
    with pytest.raises(ValueError, match=f"overflows {name}"):
        opt.step(_grad(opt, [1, 2], push, table.shape))
    assert np.array_equal(table.view(np.uint16), params.view(np.uint16))
    assert _same(_snapshot(opt), before)
    if rng_before is not None:
        assert opt._precision.rng.bit_generator.state == rng_before
    opt.step(_grad(opt, [3], 1.0, table.shape))


def test_half_state_overflow_is_refused_like_any_non_finite_state():
    """state_dtype='param': g = 300 makes v = 0.001 * 90000 = 90 fine, but the first step's v of g = 8192 is
    0.001 * 2**26 = 67109 > 65504: refused, nothing changed."""
    p = np.zeros(4, np.float16)
    opt = so.SparseAdam(p, so.SparseAdamConfig(state_dtype="param"))
    opt.step(so.CooGradient([0], [300.0], 4))
    before = _snapshot(opt)
    with pytest.raises(ValueError, match="v.* not finite"):
        opt.step(so.CooGradient([1], [8192.0], 4))
    assert _same(_snapshot(opt), before)


def test_torch_fp16_adam_writes_inf_where_the_kit_refuses():
    """A gradient of 6e-4 on a fresh float16 Adam: v = 0.001 * g**2 = 3.6e-10 rounds to 0 in float16 and
    m / (sqrt(0) + 1e-8 rounded to 0) is inf (torch 2.13 writes it); the kit refuses the step."""
    p = np.ones(2, np.float16)
    opt = so.SparseAdam(p, so.SparseAdamConfig(state_dtype="param"))
    with pytest.raises(ValueError, match="inf .* overflows float16"):
        opt.step(so.CooGradient([0], [6e-4], 2))
    assert np.all(p == 1) and opt.step_count == 0


# ------------------------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("state_dtype", ["float32", "param"])
@pytest.mark.parametrize("which", ["sgd", "adam", "adagrad", "dense_adam"])
def test_resume_with_stochastic_rounding_mid_run_is_bit_identical(name, state_dtype, which):
    """Save after 12 steps (through np.savez / np.load(allow_pickle=False)), load into a fresh optimizer over a
    copy of the parameters, continue 12 steps: the same bits as a run that never stopped, generator included."""
    dtype = _dtype(name)
    rng = np.random.default_rng(11)
    start = rng.normal(size=(16, 4)).astype(dtype)
    grads = [(np.unique(rng.integers(0, 16, 5)), rng.normal() * 0.1) for _ in range(24)]
    make = {k: v for k, v in _optimizers(dtype, "stochastic", state_dtype).items()}[which]

    def run(table, opt, steps):
        for rows, value in steps:
            opt.step(_grad(opt, rows, value, table.shape))

    whole = start.copy()
    ref = make(whole)
    run(whole, ref, grads)
    first = start.copy()
    opt = make(first)
    run(first, opt, grads[:12])
    buf = io.BytesIO()
    np.savez(buf, **opt.state_dict())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as f:
        saved = {k: f[k] for k in f.files}
    assert saved["rng_state"].dtype == np.uint64
    second = first.copy()
    resumed = make(second)
    resumed.load_state_dict(saved)
    run(second, resumed, grads[12:])
    if hasattr(resumed, "catch_up") and getattr(resumed.config, "mode", None) is so.LazyMode.DENSE_EQUIVALENT:
        resumed.catch_up()
        ref.catch_up()
    assert np.array_equal(second.view(np.uint16), whole.view(np.uint16))
    assert _same(_snapshot(resumed), _snapshot(ref))


def test_a_bad_generator_state_is_refused_and_changes_nothing():
    p = np.zeros(4, np.float16)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, rounding="stochastic"))
    opt.step(so.CooGradient([1], [0.3], 4))
    good = opt.state_dict()
    for words, match in [(good["rng_state"][:5], r"state_dict\['rng_state'\] has shape \(5,\), expected \(6,\)"),
                         (good["rng_state"].astype(np.int64), "has dtype int64, expected uint64"),
                         (good["rng_state"] - np.array([0, 0, 1, 0, 0, 0], np.uint64), "even increment")]:
        before = opt._precision.rng.bit_generator.state
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict({**good, "rng_state": words})
        assert opt._precision.rng.bit_generator.state == before
    with pytest.raises(ValueError, match="missing \\['rng_state'\\]"):
        opt.load_state_dict({k: v for k, v in good.items() if k != "rng_state"})


def test_bfloat16_state_round_trips_through_savez_as_bits():
    bf16 = _dtype("bfloat16")
    p = np.ones((3, 4), bf16)
    opt = so.SparseAdamTable(p, so.SparseAdamConfig(state_dtype="param"))
    opt.step(so.CsrGradient.from_rows([1], np.full((1, 4), 0.3), 3))
    d = opt.state_dict()
    assert d["m"].dtype == np.uint16
    buf = io.BytesIO()
    np.savez(buf, **d)
    buf.seek(0)
    fresh = so.SparseAdamTable(np.ones((3, 4), bf16), so.SparseAdamConfig(state_dtype="param"))
    with np.load(buf, allow_pickle=False) as f:
        fresh.load_state_dict({k: f[k] for k in f.files})
    assert fresh.m.dtype == bf16 and np.array_equal(fresh.m.view(np.uint16), opt.m.view(np.uint16))
    bad = {**d, "v": np.where(np.arange(12).reshape(3, 4) == 5, np.uint16(0x7F80), d["v"])}  # +inf bits
    with pytest.raises(ValueError, match=r"state_dict\['v'\] holds inf"):
        fresh.load_state_dict(bad)


# ------------------------------------------------------------------------------ one rounding per write


@given(
    values=st.lists(st.floats(-4, 4, allow_nan=False, width=32), min_size=4, max_size=4),
    grads=st.lists(st.floats(-2, 2, allow_nan=False, width=32), min_size=4, max_size=4),
    lr=st.floats(1e-4, 1.0),
    momentum=st.sampled_from([0.0, 0.9]),
    weight_decay=st.sampled_from([0.0, 0.01]),
    gap=st.integers(0, 50),
)
def test_half_params_with_float32_state_round_once_per_write(values, grads, lr, momentum, weight_decay, gap):
    """fp16 parameters, float32 state, DENSE_EQUIVALENT SGD: after a touch, ``gap`` dormant steps and a catch-up,
    the parameters are the float32 optimizer's values rounded once, and the buffer is the float32 one, whatever
    the path taken (the float32 run starts from the fp16 values and is rounded at each write too)."""
    half = np.array(values, np.float32).astype(np.float16)
    cfg = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, mode="dense_equivalent")
    p16 = half.copy()
    p32 = half.astype(np.float32)
    opt16 = so.SparseSgd(p16, so.SparseSgdConfig(**cfg))
    opt32 = so.SparseSgd(p32, so.SparseSgdConfig(**cfg))
    g = so.CooGradient([0, 2], np.array(grads[:2], np.float32), 4)
    for opt in (opt16, opt32):
        opt.step(g)
    p32[[0, 2]] = p32[[0, 2]].astype(np.float16).astype(np.float32)  # the touch wrote fp16 values
    for opt in (opt16, opt32):
        for _ in range(gap):
            opt.step(so.CooGradient([], [], 4))
        opt.catch_up()
    with np.errstate(over="ignore"):
        want = p32.astype(np.float16)
    assert np.array_equal(p16.view(np.uint16), want.view(np.uint16))
    if momentum:
        assert np.array_equal(opt16.momentum_buffer, opt32.momentum_buffer)


def test_catch_up_rounds_once_where_dense_low_precision_rounds_every_step():
    """A decay of 0.4 of an ulp per dormant step: dense fp16 SGD (rounding every step) stagnates; the
    DENSE_EQUIVALENT catch-up applies the whole gap in float32 and rounds once, landing where float32 would."""
    p = np.full(2, 1.0, np.float16)
    lr, wd = 1.0, 0.4 * 2.0**-11  # below 1.0 the float16 ulp is 2**-11: 0.4 ulp per step
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=lr, weight_decay=wd, mode="dense_equivalent"))
    dense = np.full(2, 1.0, np.float16)
    dense_opt = so.SparseSgd(dense, so.SparseSgdConfig(lr=lr, weight_decay=wd))
    for _ in range(100):
        opt.step(so.CooGradient([], [], 2))
        dense_opt.step(so.CooGradient([0, 1], [0.0, 0.0], 2))  # a dense run: every coordinate every step
    opt.catch_up()
    assert np.all(dense == 1.0)
    assert np.all(p == np.float16((1 - lr * wd) ** 100)) and p[0] < 1.0


# ------------------------------------------------------------------------------ memory


def test_half_table_step_allocates_o_nnz():
    """A step of 64 rows on a 2,000,000 x 8 float16 table (32 MB; float32 state 64 MB per array) allocates what it
    does on a table 100x smaller, far below the table."""
    def peak(rows):
        table = np.zeros((rows, 8), np.float16)
        opt = so.SparseAdamTable(table, so.SparseAdamConfig(mode="dense_equivalent", rounding="stochastic"))
        g = so.CsrGradient.from_rows(np.arange(0, 6400, 100), np.ones((64, 8)), rows)
        opt.step(g)
        return measure_peak(lambda: opt.step(g)), table.nbytes

    small, _ = peak(20_000)
    big, nbytes = peak(2_000_000)
    assert big < nbytes / 100 and abs(big - small) < 64 * 1024


def test_precision_plan():
    assert Precision(np.dtype(np.float64)).work == np.float64 and not Precision(np.dtype(np.float64)).per_op
    prec = Precision(np.dtype(np.float16), "param", "stochastic", 5)
    assert prec.state == np.float16 and prec.work == np.float32 and prec.per_op and prec.rng is not None


SHADOW_CONFIGS = {
    "adam-lazy": lambda: so.SparseAdamConfig(lr=0.05, weight_decay=0.1),
    "adam-dormancy": lambda: so.SparseAdamConfig(lr=0.05, weight_decay=0.1, mode="dormancy_decay"),
    "adam-dense-equivalent": lambda: so.SparseAdamConfig(lr=0.05, weight_decay=0.1, mode="dense_equivalent"),
    "adagrad": lambda: so.SparseAdagradConfig(lr=0.1, lr_decay=0.01),
    "adagrad-rowwise": lambda: so.SparseAdagradConfig(lr=0.1, rowwise=True),
    "sgd-lazy": lambda: so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd-dense-equivalent": lambda: so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.01,
                                                       mode="dense_equivalent"),
}


@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("which", list(SHADOW_CONFIGS))
def test_every_mode_computes_in_float32_and_rounds_each_write_once(name, which):
    """The kit on a half table (float32 state, nearest) equals a float32 *shadow*: the same optimizer on float32
    parameters whose written rows are rounded to the half type after each step (and after the final catch-up),
    bit for bit, state included -- in LAZY, DORMANCY_DECAY and DENSE_EQUIVALENT, with gaps, whole and partial rows."""
    dtype = _dtype(name)
    cls = {"adam": so.SparseAdamTable, "adagrad": so.SparseAdagradTable, "sgd": so.SparseSgdTable}[which.split("-")[0]]
    rng = np.random.default_rng(21)
    half = rng.normal(size=(12, 4)).astype(dtype)
    shadow = half.astype(np.float32)
    opt, ref = cls(half, SHADOW_CONFIGS[which]()), cls(shadow, SHADOW_CONFIGS[which]())

    def write_back(rows):
        shadow[rows] = shadow[rows].astype(dtype).astype(np.float32)

    for t in range(30):
        rows = np.unique(rng.integers(0, 12, 4))
        if t % 7 == 3 and not which.endswith("rowwise"):  # incomplete rows: a coordinate-wise step
            cols = rng.integers(0, 4, rows.size)
            dense = np.zeros((12, 4), np.float32)
            dense[rows, cols] = rng.normal(size=rows.size).astype(np.float32)
            grad = so.CsrGradient.from_dense(dense)
        else:
            grad = so.CsrGradient.from_rows(rows, rng.normal(size=(rows.size, 4)).astype(np.float32), 12)
        opt.step(grad)
        ref.step(grad)
        write_back(rows)
        assert np.array_equal(half.astype(np.float32), shadow), t
    if getattr(opt.config, "mode", None) is so.LazyMode.DENSE_EQUIVALENT:
        opt.catch_up()
        ref.catch_up()
        write_back(np.arange(12))
        assert np.array_equal(half.astype(np.float32), shadow)
    mine, theirs = opt.state_dict(), ref.state_dict()
    assert all(np.array_equal(mine[k], theirs[k]) for k in theirs if isinstance(theirs[k], np.ndarray))


@pytest.mark.parametrize("which", ["sgd", "adam", "adagrad", "dense_adam"])
def test_a_checkpoint_from_before_the_precision_fields_still_loads(which):
    """A round-2 state dict has no state_dtype/rounding/seed: it loads where those are the defaults, not elsewhere."""
    p = np.ones((4, 4))
    opt = _optimizers(np.float64, "nearest", seed=0)[which](p)
    opt.step(_grad(opt, [1], 0.5, p.shape))
    old = {k: v for k, v in opt.state_dict().items() if k not in ("state_dtype", "rounding", "seed")}
    fresh = _optimizers(np.float64, "nearest", seed=0)[which](p.copy())
    fresh.load_state_dict(old)
    assert _same(_snapshot(fresh), _snapshot(opt))
    other = _optimizers(np.float64, "stochastic", seed=0)[which](p.copy())
    with pytest.raises(ValueError, match=r"missing \['rounding'\]"):
        other.load_state_dict(old)


@given(x=st.floats(allow_nan=False, allow_infinity=False, width=64), seed=st.integers(0, 2**32))
def test_stochastic_rounding_of_any_float(x, seed):
    """Any float64: within range it lands on a neighbour (the enumeration's); beyond the largest finite value
    a written parameter is refused; nearest overflows only past max + half an ulp."""
    dtype = np.dtype(np.float16)
    big = float(np.finfo(dtype).max)
    prec = Precision(dtype, "float32", "stochastic", seed)
    if abs(x) > big:
        with pytest.raises(ValueError, match="overflows float16"):
            prec.written(np.array([x], np.float64))
        return
    r = float(prec.written(np.array([x], np.float64))[0])
    lo, hi = _neighbours(np.array([x]), dtype)
    assert r in (lo[0], hi[0]) and np.signbit(r) == np.signbit(x)
    nearest = Precision(dtype)
    assert float(nearest.written(np.array([x]))[0]) == float(np.float16(x))


def test_an_initial_accumulator_the_half_state_cannot_hold_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"Invalid initial_accumulator_value: 100000.0 overflows the float16 state"):
        so.SparseAdagrad(np.zeros(3, np.float16), so.SparseAdagradConfig(initial_accumulator_value=1e5,
                                                                          state_dtype="param"))
    so.SparseAdagrad(np.zeros(3, np.float16), so.SparseAdagradConfig(initial_accumulator_value=1e5))
