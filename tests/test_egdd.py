"""Tests of ``so.EGDD`` against the real lingvo EGDD and against hand derivations.

The goldens in ``tests/golden/lingvo_egdd_*.npz`` are trajectories of
``lingvo.core.egdd.EGDD`` under TensorFlow (``make_lingvo_egdd.py`` writes them;
lingvo's EGDD is float32 only). Tolerances: a tensor is compared with
``rtol`` relative to each entry and ``rtol * max|reference|`` absolute, i.e.
relative to the tensor's scale, because entries that come out of a cancellation
(a momentum near zero, ``param - lr_scale * m``) carry the rounding of the terms
that cancelled.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sparse_opt as so

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
OPTIONS = (
    "learning_rate",
    "momentum",
    "beta",
    "gain_learning_rate",
    "scale_learning_rate",
    "initial_gain",
    "min_gain",
    "max_gain",
    "initial_scale",
    "min_scale",
    "max_scale",
    "use_directions",
    "use_signs",
)
SLOTS = ("momentum", "gbar", "gain", "lr_scale", "counter")
CASES = (
    "unit_signs0",
    "unit_signs1",
    "defaults",
    "signs1_dirs1",
    "signs1_dirs0",
    "signs0_dirs1",
    "signs0_dirs0",
    "clip_high",
    "clip_low",
    "overflow",
)
# Largest observed gap to lingvo is 1.7e-6 (float32, per-op rounding of numpy's
# float32 exp and of the order of the sums in the norms) and 8.4e-7 (float64,
# which is lingvo's own float32 rounding).
RTOL = 1e-5


def load_golden(name: str) -> dict[str, np.ndarray]:
    with np.load(GOLDEN_DIR / f"lingvo_egdd_{name}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def golden_options(d: dict[str, np.ndarray]) -> dict[str, float | bool]:
    return {k: d[k].item() for k in OPTIONS}


def snapshot(opt: so.EGDD) -> list[tuple[bytes, ...]]:
    """Every byte of the parameters and of the state, to check "left untouched"."""
    return [
        (p.tobytes(), *(np.asarray(s[k]).tobytes() for k in SLOTS))
        for p, s in zip(opt.params, opt.state)
    ]


def assert_close(ours: np.ndarray, ref: np.ndarray, rtol: float, msg: str) -> None:
    ref = np.asarray(ref, np.float64)
    atol = rtol * float(np.abs(ref).max(initial=0.0))
    np.testing.assert_allclose(np.asarray(ours, np.float64), ref, rtol=rtol, atol=atol, err_msg=msg)


# --------------------------------------------------------------------------- goldens


def test_golden_set_is_complete() -> None:
    names = sorted(p.name for p in GOLDEN_DIR.glob("lingvo_egdd_*.npz"))
    assert names == sorted(f"lingvo_egdd_{c}.npz" for c in CASES)
    assert sum((GOLDEN_DIR / n).stat().st_size for n in names) < 1_000_000
    combos, ndims, skipped = set(), set(), False
    for case in CASES:
        d = load_golden(case)
        assert str(d["lingvo_version"]) == "0.14.2"
        assert str(d["tf_version"]).startswith("2.")
        combos.add((bool(d["use_signs"]), bool(d["use_directions"])))
        ndims |= {d[f"var.{j}"].ndim - 1 for j in range(int(d["num_vars"]))}
        skipped |= not d["mask"].all()
    assert combos == {(True, True), (True, False), (False, True), (False, False)}
    assert ndims == {1, 2, 3}
    assert skipped


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_replays_lingvo_trajectory(case: str, dtype: type) -> None:
    """Every step, every variable and slot, against lingvo.

    lingvo cannot run float64 (its lr_scale and counter slots are float32), so a
    float64 run is compared with the float32 trajectory: the gap is lingvo's
    float32 rounding, well under ``RTOL``.
    """
    d = load_golden(case)
    n, steps = int(d["num_vars"]), int(d["steps"])
    params = [d[f"var.{j}"][0].astype(dtype) for j in range(n)]
    opt = so.EGDD(params, **golden_options(d))
    for t in range(steps):
        opt.step([d[f"grad.{j}"][t] if d["mask"][t, j] else None for j in range(n)])
        for j in range(n):
            where = f"{case} step {t + 1} var {j}"
            assert_close(params[j], d[f"var.{j}"][t + 1], RTOL, f"{where}: var")
            for key in ("momentum", "gbar", "gain", "lr_scale"):
                assert opt.state[j][key].dtype == dtype
                assert_close(opt.state[j][key], d[f"{key}.{j}"][t + 1], RTOL, f"{where}: {key}")
            assert opt.state[j]["counter"] == d[f"counter.{j}"][t + 1]


def _bounds(d: dict[str, np.ndarray], key: str) -> tuple[np.float32, np.float32]:
    what = "gain" if key == "gain" else "scale"
    return np.float32(d[f"min_{what}"]), np.float32(d[f"max_{what}"])


@pytest.mark.parametrize(
    ("case", "key", "low", "high"),
    [
        ("clip_high", "gain", True, True),
        ("clip_high", "lr_scale", False, True),
        ("clip_low", "gain", True, False),
        ("clip_low", "lr_scale", True, False),
        ("overflow", "gain", True, True),
        ("overflow", "lr_scale", True, True),
    ],
)
def test_goldens_hit_the_clip_bounds(case: str, key: str, low: bool, high: bool) -> None:
    """lingvo's slot sits exactly at the (float32) clip bound in the golden, and so
    does the replay's."""
    d = load_golden(case)
    n = int(d["num_vars"])
    bounds = _bounds(d, key)
    lingvo_hits = [any((d[f"{key}.{j}"] == b).any() for j in range(n)) for b in bounds]
    params = [d[f"var.{j}"][0].copy() for j in range(n)]
    opt = so.EGDD(params, **golden_options(d))
    ours_hits = [False, False]
    for t in range(int(d["steps"])):
        opt.step([d[f"grad.{j}"][t] if d["mask"][t, j] else None for j in range(n)])
        ours_hits = [h or any((s[key] == b).any() for s in opt.state) for h, b in zip(ours_hits, bounds)]
    assert lingvo_hits == ours_hits
    assert lingvo_hits[0] >= low and lingvo_hits[1] >= high


def test_overflow_golden_overflows_and_underflows_exp() -> None:
    """The ``overflow`` case really sends float32 exp to inf and to 0 (then clips)."""
    d = load_golden("overflow")
    hi = math.log(float(np.finfo(np.float32).max))
    lo = math.log(float(np.finfo(np.float32).smallest_subnormal))
    beta = float(d["beta"])
    gain_x, scale_x = [], []
    for j in range(int(d["num_vars"])):
        for t in range(int(d["steps"])):
            k = int(d[f"counter.{j}"][t + 1])
            g = d[f"grad.{j}"][t].astype(np.float64)
            corrected = d[f"gbar.{j}"][t] / (1.0 - beta ** max(k - 1, 1))
            gain_x.append(float(d["gain_learning_rate"]) * g * corrected)
            scale_x.append(float(d["scale_learning_rate"]) * np.sum(g * d[f"momentum.{j}"][t]))
    gx, sx = np.concatenate([x.ravel() for x in gain_x]), np.array(scale_x)
    assert (gx > hi).any() and (gx < lo).any()
    assert (sx > hi).any() and (sx < lo).any()


def test_exp_overflow_is_clipped_without_warning() -> None:
    """pyproject turns RuntimeWarnings from sparse_opt into errors: none may escape."""
    p = np.array([1.0, -1.0], np.float32)
    opt = so.EGDD(p, 0.01, 0.9, gain_learning_rate=1.0, scale_learning_rate=1.0, use_signs=False,
                  use_directions=False, max_gain=5.0, max_scale=3.0)
    for _ in range(3):
        opt.step([np.array([1e4, -1e4], np.float32)])
    assert (opt.state[0]["gain"] == np.float32(5.0)).all()
    assert opt.state[0]["lr_scale"] == np.float32(3.0)


# ------------------------------------------------------------- lingvo's unit test, by hand


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("use_signs", "var2", "momentum2", "gain2"),
    [
        (False, [0.5810, 1.2463], [-0.0909, -0.1961], [0.9990, 1.0075]),
        (True, [0.5801, 1.2466], [-0.0900, -0.1965], [0.9900, 1.0101]),
    ],
)
def test_lingvo_unit_test_numbers(use_signs: bool, var2: list, momentum2: list, gain2: list, dtype: type) -> None:
    """The assertions of lingvo's ``egdd_test.py`` (testDenseLayer, testDenseLayerSigns)."""
    var = np.array([0.5, 1.0], dtype)
    opt = so.EGDD([var], learning_rate=0.1, momentum=0.9, beta=0.1, gain_learning_rate=1e-2,
                  scale_learning_rate=1e-3, use_signs=use_signs)
    s = opt.state[0]
    opt.step([np.array([0.1, -0.5])])
    np.testing.assert_allclose(var, [0.49, 1.05], rtol=1e-6)
    np.testing.assert_allclose(s["momentum"], [0.01, -0.05], rtol=1e-6)
    np.testing.assert_allclose(s["gain"], [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(s["lr_scale"], 1.0, rtol=1e-6)
    opt.step([np.array([-1.0, -1.5])])
    np.testing.assert_allclose(var, var2, atol=1e-4)
    np.testing.assert_allclose(s["momentum"], momentum2, atol=1e-4)
    np.testing.assert_allclose(s["gain"], gain2, atol=1e-4)
    np.testing.assert_allclose(s["lr_scale"], 1.0007, atol=1e-4)


@pytest.mark.parametrize("use_signs", [False, True])
def test_lingvo_unit_test_closed_form_float64(use_signs: bool) -> None:
    """Both steps of lingvo's unit test derived by hand, exact to float64 rounding."""
    lr, mu, beta, glr, slr = 0.1, 0.9, 0.1, 1e-2, 1e-3
    g1, g2 = [0.1, -0.5], [-1.0, -1.5]
    # Step 1: m_old = gbar_old = 0, so lr_scale and gain stay 1.
    m1 = [lr * g for g in g1]
    gbar1 = [(1 - beta) * g for g in g1]
    v1 = [0.5 - m1[0], 1.0 - m1[1]]
    # Step 2: lr_scale from the cosine of g2 and m1 (norms + 1e-10, which is
    # visible here: 1e-10 / |m1| ~ 2e-9); gain from gbar1 (bias correction
    # 1 - beta**max(2 - 1, 1) = 1 - beta).
    cos = sum(a * b for a, b in zip(g2, m1)) / ((math.hypot(*g2) + 1e-10) * (math.hypot(*m1) + 1e-10))
    scale2 = math.exp(slr * cos)
    if use_signs:
        gain2 = [math.exp(glr * math.copysign(1, g) * math.copysign(1, b)) for g, b in zip(g2, gbar1)]
    else:
        gain2 = [math.exp(glr * g * b / (1 - beta)) for g, b in zip(g2, gbar1)]
    m2 = [mu * m + lr * k * g for m, k, g in zip(m1, gain2, g2)]
    v2 = [v - scale2 * m for v, m in zip(v1, m2)]

    var = np.array([0.5, 1.0])
    opt = so.EGDD([var], lr, mu, beta=beta, gain_learning_rate=glr, scale_learning_rate=slr, use_signs=use_signs)
    opt.step([np.array(g1)])
    np.testing.assert_allclose(var, v1, rtol=1e-15)
    np.testing.assert_allclose(opt.state[0]["gbar"], gbar1, rtol=1e-15)
    opt.step([np.array(g2)])
    s = opt.state[0]
    np.testing.assert_allclose(s["lr_scale"], scale2, rtol=1e-12)
    np.testing.assert_allclose(s["gain"], gain2, rtol=1e-12)
    np.testing.assert_allclose(s["momentum"], m2, rtol=1e-12)
    np.testing.assert_allclose(var, v2, rtol=1e-12)
    assert s["counter"] == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_first_step_by_hand(dtype: type) -> None:
    """From fresh state (zero momentum and gbar) the first step is plain SGD scaled
    by ``initial_scale * learning_rate * initial_gain``; nothing else moves."""
    g = np.array([[0.3, 0.0], [-2.0, 5.0]], dtype)
    p0 = np.array([[1.0, 2.0], [3.0, -4.0]], dtype)
    p = p0.copy()
    opt = so.EGDD(p, learning_rate=0.1, momentum=0.5, beta=0.75, initial_gain=2.0, initial_scale=0.5,
                  use_signs=False, use_directions=False)
    opt.step(g)
    s = opt.state[0]
    m = dtype(0.1) * dtype(2.0) * g
    np.testing.assert_array_equal(s["momentum"], m)
    np.testing.assert_array_equal(s["gbar"], dtype(0.25) * g)
    np.testing.assert_array_equal(s["gain"], np.full_like(p, 2.0))
    assert s["lr_scale"] == dtype(0.5) and s["counter"] == 1
    np.testing.assert_array_equal(p, p0 - dtype(0.5) * m)


@pytest.mark.parametrize("use_signs", [False, True])
@pytest.mark.parametrize("use_directions", [False, True])
def test_later_step_by_hand_float64(use_signs: bool, use_directions: bool) -> None:
    """One step from a hand-set state at counter 4: bias correction ``1 - beta**4``,
    old momentum in the lr_scale rule, old gbar in the gain rule, clip after exp."""
    lr, mu, beta, glr, slr = 0.05, 0.8, 0.7, 0.3, 0.2
    opts = dict(beta=beta, gain_learning_rate=glr, scale_learning_rate=slr, min_gain=0.9, max_gain=1.2,
                use_signs=use_signs, use_directions=use_directions)
    p0, g = [0.2, -0.4, 1.0], [1.5, -0.25, 0.0]
    m_old, gbar_old, gain_old, scale_old = [0.3, 0.1, -0.2], [1.0, 0.5, -2.0], [1.1, 1.0, 0.95], 1.3
    p = np.array(p0)
    opt = so.EGDD([p], lr, mu, **opts)
    opt.state[0].update(momentum=np.array(m_old), gbar=np.array(gbar_old), gain=np.array(gain_old),
                        lr_scale=np.array(scale_old), counter=4)
    opt.step([np.array(g)])

    if use_directions:
        inner = sum(a * b for a, b in zip(g, m_old)) / ((math.hypot(*g) + 1e-10) * (math.hypot(*m_old) + 1e-10))
    else:
        inner = sum(a * b for a, b in zip(g, m_old))
    scale = min(max(scale_old * math.exp(slr * inner), 0.1), 10.0)

    def sign(x: float) -> float:
        return float((x > 0) - (x < 0))

    if use_signs:
        x = [glr * sign(a) * sign(b) for a, b in zip(g, gbar_old)]
    else:
        x = [glr * a * b / (1 - beta**4) for a, b in zip(g, gbar_old)]
    gain = [min(max(k * math.exp(e), 0.9), 1.2) for k, e in zip(gain_old, x)]
    m = [mu * a + lr * k * b for a, k, b in zip(m_old, gain, g)]
    gbar = [beta * a + (1 - beta) * b for a, b in zip(gbar_old, g)]
    s = opt.state[0]
    assert s["counter"] == 5
    np.testing.assert_allclose(s["lr_scale"], scale, rtol=1e-13)
    np.testing.assert_allclose(s["gain"], gain, rtol=1e-13)
    np.testing.assert_allclose(s["momentum"], m, rtol=1e-13)
    np.testing.assert_allclose(s["gbar"], gbar, rtol=1e-13)
    np.testing.assert_allclose(p, [a - scale * b for a, b in zip(p0, m)], rtol=1e-13)
    assert 1.2 in gain  # the clip is exercised


# ------------------------------------------------------------------- API and validation


def test_updates_callers_arrays_in_place_and_none_skips() -> None:
    a, b = np.ones(3, np.float32), np.zeros((2, 2))
    opt = so.EGDD([a, b], 0.1, 0.9)
    assert opt.params[0] is a and opt.params[1] is b
    before_b = snapshot(opt)[1]
    state_arrays = [opt.state[0][k] for k in ("momentum", "gbar", "gain", "lr_scale")]
    opt.step([np.full(3, 0.5), None])
    assert (a < 1).all()
    assert snapshot(opt)[1] == before_b
    assert opt.state[0]["counter"] == 1 and opt.state[1]["counter"] == 0
    assert all(x is opt.state[0][k] for x, k in zip(state_arrays, ("momentum", "gbar", "gain", "lr_scale")))


def test_single_array_params_and_grad() -> None:
    p = np.array([1.0, 2.0])
    opt = so.EGDD(p, 0.1, 0.0)
    opt.step(np.array([1.0, 1.0]))
    np.testing.assert_allclose(p, [0.9, 1.9])


@pytest.mark.parametrize(
    "make",
    [
        lambda: so.CooGradient(np.array([1]), np.array([0.5]), 4),
        lambda: type("Sparse", (), {"nnz": 1, "shape": (4,)})(),
    ],
    ids=["CooGradient", "anything-with-nnz"],
)
def test_sparse_gradient_is_refused(make) -> None:
    """lingvo would silently skip it (``_apply_sparse`` is a no-op); here it is an error."""
    p, q = np.arange(4.0), np.ones(4, np.float32)
    opt = so.EGDD([p, q], 0.1, 0.9)
    opt.step([np.ones(4), np.ones(4)])
    before = snapshot(opt)
    with pytest.raises(TypeError, match=r"grads\[1\].*dense"):
        opt.step([np.ones(4), make()])
    assert snapshot(opt) == before


def test_sparse_table_gradient_is_refused() -> None:
    p = np.ones((2, 3))
    opt = so.EGDD([p], 0.1, 0.9)
    before = snapshot(opt)
    with pytest.raises(TypeError, match="dense"):
        opt.step([so.CsrGradient.from_dense(np.eye(2, 3))])
    assert snapshot(opt) == before


@pytest.mark.parametrize(
    ("grads", "error", "match"),
    [
        ([np.ones(3)], ValueError, "1 entries but there are 2"),
        ([np.ones(3), np.ones((2, 3)), np.ones(1)], ValueError, "3 entries"),
        ([np.ones(3), np.ones((3, 2))], ValueError, r"grads\[1\] has shape \(3, 2\)"),
        ([np.ones(3), np.ones(6)], ValueError, "shape"),
        ([np.ones(3), np.array([[1.0, np.nan, 0], [0, 0, 0]])], ValueError, "not finite"),
        ([np.ones(3), np.array([[1.0, 0, 0], [0, -np.inf, 0]])], ValueError, "not finite"),
        ([np.array([0.0, np.inf, 1.0]), np.ones((2, 3))], ValueError, r"grads\[0\]"),
        ([np.ones(3), np.full((2, 3), "x")], TypeError, "real numbers"),
        ([np.ones(3), {"a": 1}], TypeError, "array of numbers"),
        (np.ones(3), TypeError, "list"),
        ("abc", TypeError, "list"),
    ],
)
def test_bad_gradients_leave_everything_bit_identical(grads: object, error: type, match: str) -> None:
    p, q = np.array([0.1, 0.2, 0.3], np.float32), np.ones((2, 3))
    opt = so.EGDD([p, q], 0.1, 0.9, use_signs=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        opt.step([rng.standard_normal(3), rng.standard_normal((2, 3))])
    before = snapshot(opt)
    with pytest.raises(error, match=match):
        opt.step(grads)
    assert snapshot(opt) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"learning_rate": -0.1}, ValueError, "Invalid learning_rate"),
        ({"learning_rate": float("nan")}, ValueError, "learning_rate.*finite"),
        ({"learning_rate": float("inf")}, ValueError, "learning_rate.*finite"),
        ({"learning_rate": "0.1"}, TypeError, "learning_rate"),
        ({"learning_rate": True}, TypeError, "learning_rate"),
        ({"momentum": -0.9}, ValueError, "Invalid momentum"),
        ({"beta": 1.0}, ValueError, "Invalid beta"),
        ({"beta": -0.1}, ValueError, "Invalid beta"),
        ({"gain_learning_rate": -1e-3}, ValueError, "Invalid gain_learning_rate"),
        ({"scale_learning_rate": -1e-3}, ValueError, "Invalid scale_learning_rate"),
        ({"scale_learning_rate": float("nan")}, ValueError, "scale_learning_rate"),
        ({"min_gain": 0.0}, ValueError, "Invalid min_gain"),
        ({"min_gain": 2.0, "max_gain": 1.0, "initial_gain": 1.5}, ValueError, "min_gain / max_gain"),
        ({"max_gain": float("inf")}, ValueError, "max_gain"),
        ({"initial_gain": 200.0}, ValueError, "Invalid initial_gain"),
        ({"initial_gain": 0.001}, ValueError, "Invalid initial_gain"),
        ({"min_scale": -1.0}, ValueError, "Invalid min_scale"),
        ({"min_scale": 5.0, "max_scale": 2.0, "initial_scale": 3.0}, ValueError, "min_scale / max_scale"),
        ({"initial_scale": 0.05}, ValueError, "Invalid initial_scale"),
        ({"use_signs": 1}, TypeError, "use_signs"),
        ({"use_directions": "yes"}, TypeError, "use_directions"),
        ({"beta": 1 - 1e-9, "use_signs": False}, ValueError, "rounds to 1 in float32"),
    ],
)
def test_bad_hyperparameters(kwargs: dict, error: type, match: str) -> None:
    p = np.ones(3, np.float32)
    args = {"learning_rate": 0.1, "momentum": 0.9, **kwargs}
    with pytest.raises(error, match=match):
        so.EGDD(p, **args)
    assert (p == 1).all()


def test_beta_close_to_one_is_fine_where_it_cannot_divide_by_zero() -> None:
    so.EGDD(np.ones(3, np.float32), 0.1, 0.9, beta=1 - 1e-9, use_signs=True)
    so.EGDD(np.ones(3), 0.1, 0.9, beta=1 - 1e-9, use_signs=False)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ([], ValueError),
        (np.ones(3, np.int64), TypeError),
        (np.ones((3, 4))[:, 0], ValueError),
        ([[1.0, 2.0]], TypeError),
    ],
)
def test_bad_params(params: object, error: type) -> None:
    with pytest.raises(error):
        so.EGDD(params, 0.1, 0.9)


# ------------------------------------------------------------------------ state dict


def _stream(seed: int, shapes: list[tuple[int, ...]], steps: int) -> list[list[np.ndarray | None]]:
    rng = np.random.default_rng(seed)
    return [
        [None if rng.random() < 0.2 else rng.standard_normal(s) for s in shapes] for _ in range(steps)
    ]


def _make_params() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(4).astype(np.float32), rng.standard_normal((2, 3)), np.array(0.5, np.float32)]


KWARGS = {"learning_rate": 0.05, "momentum": 0.9, "beta": 0.8, "gain_learning_rate": 0.2,
          "scale_learning_rate": 0.1, "max_gain": 1.5, "use_signs": False}


def test_state_dict_round_trip_then_continue_is_bit_identical(tmp_path: Path) -> None:
    stream = _stream(3, [(4,), (2, 3), ()], 16)
    straight = _make_params()
    opt = so.EGDD(straight, **KWARGS)
    for grads in stream:
        opt.step(grads)

    first = _make_params()
    opt1 = so.EGDD(first, **KWARGS)
    for grads in stream[:7]:
        opt1.step(grads)
    np.savez(tmp_path / "egdd.npz", **opt1.state_dict())
    with np.load(tmp_path / "egdd.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    resumed = [p.copy() for p in first]
    opt2 = so.EGDD(resumed, **KWARGS)
    opt2.load_state_dict(loaded)
    for grads in stream[7:]:
        opt2.step(grads)
    assert snapshot(opt2) == snapshot(opt)


def test_state_dict_layout_and_copy() -> None:
    params = _make_params()
    opt = so.EGDD(params, **KWARGS)
    opt.step([np.ones(4), np.ones((2, 3)), 1.0])
    d = opt.state_dict()
    expected = {*(OPTIONS), "num_params", "step_count", *(f"param.{i}.{k}" for i in range(3) for k in SLOTS)}
    assert set(d) == expected
    assert d["num_params"] == 3 and d["param.0.counter"] == 1
    assert d["param.2.lr_scale"].shape == () and d["param.1.gain"].dtype == np.float64
    d["param.0.momentum"][:] = 99.0
    assert (opt.state[0]["momentum"] != 99.0).all()


def _mutations() -> list[tuple[str, object]]:
    def set_(key: str, value: object):
        return lambda d: d.__setitem__(key, value)

    def drop(key: str):
        return lambda d: d.pop(key)

    return [
        ("num_params", set_("num_params", np.int64(2))),
        ("missing key", drop("param.1.gbar")),
        ("extra key", set_("param.3.gbar", np.zeros(1))),
        ("shape", set_("param.0.gain", np.ones(5, np.float32))),
        ("dtype", set_("param.1.momentum", np.zeros((2, 3), np.float32))),
        ("lr_scale shape", set_("param.0.lr_scale", np.ones(1, np.float32))),
        ("lr_scale dtype", set_("param.2.lr_scale", np.float64(1.0))),
        ("beta", set_("beta", 0.5)),
        ("use_signs", set_("use_signs", True)),
        ("bool as number", set_("use_directions", 1)),
        ("negative counter", set_("param.0.counter", np.int64(-1))),
        ("float counter", set_("param.0.counter", np.float32(3.0))),
    ]


@pytest.mark.parametrize("mutate", [m for _, m in _mutations()], ids=[n for n, _ in _mutations()])
def test_mismatched_load_raises_and_changes_nothing(mutate) -> None:
    params = _make_params()
    opt = so.EGDD(params, **KWARGS)
    opt.step([np.ones(4), np.ones((2, 3)), 1.0])
    d = opt.state_dict()
    mutate(d)
    other = so.EGDD(_make_params(), **KWARGS)
    before = snapshot(other)
    with pytest.raises(ValueError):
        other.load_state_dict(d)
    assert snapshot(other) == before


# ---------------------------------------------------------------------- properties

dtypes = st.sampled_from([np.float32, np.float64])
hyper = st.fixed_dictionaries(
    {
        "learning_rate": st.floats(0.0, 1.0),
        "momentum": st.floats(0.0, 0.99),
        "beta": st.floats(0.0, 0.99),
        "gain_learning_rate": st.floats(0.0, 2.0),
        "scale_learning_rate": st.floats(0.0, 2.0),
        "min_gain": st.floats(0.01, 1.0),
        "max_gain": st.floats(1.0, 100.0),
        "min_scale": st.floats(0.01, 1.0),
        "max_scale": st.floats(1.0, 10.0),
        "use_directions": st.booleans(),
        "use_signs": st.booleans(),
    }
)


@st.composite
def runs(draw: st.DrawFn) -> tuple[np.dtype, tuple[int, ...], dict, list[np.ndarray | None]]:
    dtype = draw(dtypes)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    kwargs = draw(hyper)
    grad = hnp.arrays(dtype, shape, elements=st.floats(-1e3, 1e3, width=32))
    grads = draw(st.lists(st.none() | grad, min_size=1, max_size=6))
    return np.dtype(dtype), shape, kwargs, grads


@given(runs())
def test_property_state_stays_in_its_box(run: tuple) -> None:
    dtype, shape, kwargs, grads = run
    p = np.zeros(shape, dtype)
    opt = so.EGDD(p, **kwargs)
    for g in grads:
        opt.step([g])
    s = opt.state[0]
    assert s["counter"] == sum(g is not None for g in grads)
    lo, hi = dtype.type(kwargs["min_gain"]), dtype.type(kwargs["max_gain"])
    assert ((lo <= s["gain"]) & (s["gain"] <= hi)).all()
    assert dtype.type(kwargs["min_scale"]) <= s["lr_scale"] <= dtype.type(kwargs["max_scale"])
    assert all(np.isfinite(x).all() for x in (p, s["momentum"], s["gbar"]))


@given(runs())
def test_property_parameters_are_independent_and_0d_is_a_1_vector(run: tuple) -> None:
    """One optimizer over [x, x.reshape(-1)[:1]] equals separate optimizers, bit for
    bit, and a 0-d parameter moves exactly like a 1-element vector."""
    dtype, shape, kwargs, grads = run
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(shape).astype(dtype)
    joint = [x0.copy(), x0.reshape(-1)[:1].copy(), np.array(x0.reshape(-1)[0])]
    alone = [x0.copy(), x0.reshape(-1)[:1].copy()]
    opt = so.EGDD(joint, **kwargs)
    opt_a = so.EGDD(alone[0], **kwargs)
    opt_b = so.EGDD(alone[1], **kwargs)
    for g in grads:
        first = None if g is None else g.reshape(-1)[0]
        opt.step([g, None if g is None else np.array([first]), first])
        opt_a.step([g])
        opt_b.step([None if g is None else np.array([first])])
    assert snapshot(opt)[:2] == snapshot(opt_a) + snapshot(opt_b)
    zero_d, one = snapshot(opt)[2], snapshot(opt)[1]
    assert zero_d == one
