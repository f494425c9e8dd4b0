"""Tests of ``so.Adafactor`` against ``torch.optim.Adafactor`` goldens and by hand.

The goldens (``tests/golden/adafactor_*.npz``) come from
``tests/golden/make_torch_adafactor.py`` run with the real torch; torch itself
is not needed here.
"""

from __future__ import annotations

import copy
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparse_opt as so
from sparse_opt.adafactor import factored_second_moment

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
GOLDEN_CASES = ("shapes", "options", "skips", "clamps")
# Normwise relative agreement with torch: |ours - torch| <= RTOL * max|torch| per array.
# Observed on the goldens: at most 2.5 units in the last place (ulps) of each array's largest entry, in both
# dtypes (float64 5.6e-16, float32 2.9e-7). Allowed: 3 ulps of that scale. Replacing torch's two-branch lerp by
# the symmetric form state * (1 - w) + w * end raises the error to 3.7 (float64) / 3.8 (float32) ulps and fails.
ULPS = 3


def _snapshot(opt: so.Adafactor) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    """Copies of the parameters and of the whole state."""
    return [p.copy() for p in opt.params], copy.deepcopy(opt.state)


def _assert_bit_identical(opt: so.Adafactor, snapshot: tuple[list[np.ndarray], list[dict[str, Any]]]) -> None:
    """Assert parameters and state equal ``snapshot`` exactly (values, dtypes, shapes)."""
    params, state = snapshot
    for p, q in zip(opt.params, params, strict=True):
        assert p.dtype == q.dtype and np.array_equal(p, q)
    assert len(opt.state) == len(state)
    for now, before in zip(opt.state, state, strict=True):
        assert now.keys() == before.keys()
        assert now["step"] == before["step"]
        for key in now.keys() - {"step"}:
            assert now[key].dtype == before[key].dtype and np.array_equal(now[key], before[key])


def _load_golden(name: str) -> dict[str, np.ndarray]:
    with np.load(GOLDEN_DIR / f"adafactor_{name}.npz", allow_pickle=False) as z:
        return dict(z)


def _optimizer_for(golden: dict[str, np.ndarray], params: list[np.ndarray]) -> so.Adafactor:
    eps1 = float(golden["eps1"])
    return so.Adafactor(
        params,
        lr=float(golden["lr"]),
        beta2_decay=float(golden["beta2_decay"]),
        eps=(None if math.isnan(eps1) else eps1, float(golden["eps2"])),
        d=float(golden["d"]),
        weight_decay=float(golden["weight_decay"]),
        maximize=bool(golden["maximize"]),
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_replays_torch_golden_every_step(case: str, dtype: str) -> None:
    golden = _load_golden(f"{case}_{dtype}")
    major, minor = (int(x) for x in str(golden["torch_version"]).split(".")[:2])
    assert (major, minor) >= (2, 5)
    assert str(golden["dtype"]) == dtype
    n, num_steps = int(golden["num_params"]), int(golden["num_steps"])
    params = [golden[f"p0.{i}"].copy() for i in range(n)]
    opt = _optimizer_for(golden, params)
    unit = ULPS * float(np.finfo(dtype).eps)
    for t in range(num_steps):
        opt.step([golden[f"grads.{i}"][t] if golden[f"has_grad.{i}"][t] else None for i in range(n)])
        for i in range(n):
            state = opt.state[i]
            assert state["step"] == golden[f"step.{i}"][t], (t, i)
            arrays = {"params": params[i], **{k: v for k, v in state.items() if k != "step"}}
            assert set(arrays) == ({"params", "row_var", "col_var"} if params[i].ndim > 1 else {"params", "variance"})
            for key, ours in arrays.items():
                want = golden[f"{key}.{i}"][t]
                assert ours.dtype == np.dtype(dtype) and ours.shape == want.shape
                scale = float(np.max(np.abs(want)))
                np.testing.assert_allclose(ours, want, rtol=0, atol=unit * scale, err_msg=f"step {t + 1}, {key}.{i}")


def test_goldens_are_all_present_and_small() -> None:
    files = sorted(GOLDEN_DIR.glob("adafactor_*.npz"))
    assert len(files) == 2 * len(GOLDEN_CASES)
    assert sum(f.stat().st_size for f in files) < 1_000_000


def test_step_one_by_hand_vector() -> None:
    # p = [3, 4], g = [1, -2], defaults (lr = 1e-2, eps = (None, 1e-3), d = 1):
    #   t = 1: 1 - beta2_1 = 1**-0.8 = 1, so V = g**2 = [1, 4]
    #   rho = min(0.01, 1/sqrt(1)) = 0.01
    #   RMS(p) = sqrt((9 + 16) / 2) = sqrt(12.5); alpha = max(1e-3, sqrt(12.5)) * 0.01
    #   U = g / sqrt(V) = [1, -1]; RMS(U) = 1, so max(1, RMS(U) / d) = 1 (no clipping)
    #   p = [3 - 0.01 * sqrt(12.5), 4 + 0.01 * sqrt(12.5)] = [2.96464466..., 4.03535533...]
    p = np.array([3.0, 4.0])
    opt = so.Adafactor([p])
    opt.step([np.array([1.0, -2.0])])
    alpha = 0.01 * math.sqrt(12.5)
    np.testing.assert_allclose(p, [3.0 - alpha, 4.0 + alpha], rtol=1e-15)
    np.testing.assert_array_equal(opt.state[0]["variance"], [1.0, 4.0])
    assert opt.state[0]["step"] == 1


@pytest.mark.parametrize(("d", "expected_diag"), [(1.0, (0.4, 0.2)), (math.inf, (0.5, 0.25))])
def test_step_one_by_hand_factored(d: float, expected_diag: tuple[float, float]) -> None:
    # p = [[1, -1], [-1, 1]], g = [[2, 0], [0, 4]], lr = 0.1, t = 1 (so 1 - beta2_1 = 1):
    #   row_var = mean(g**2, axis=-1) = [[4/2], [16/2]] = [[2], [8]]
    #   col_var = mean(g**2, axis=-2) = [[4/2, 16/2]] = [[2, 8]]
    #   V = row_var @ col_var / max(mean(row_var) = 5, eps1) = [[4, 16], [16, 64]] / 5
    #   U = g / sqrt(V) = [[2 / sqrt(0.8), 0], [0, 4 / sqrt(12.8)]] = [[sqrt(5), 0], [0, sqrt(5)/2]]
    #   RMS(U) = sqrt((5 + 5/4) / 4) = 5/4
    #   rho = min(0.1, 1) = 0.1; RMS(p) = 1, so alpha = 0.1
    #   d = 1:   U / max(1, 5/4) = [[4/sqrt(5), 0], [0, 2/sqrt(5)]]; p -= 0.1 * that
    #            diagonal: 1 - 0.4/sqrt(5), 1 - 0.2/sqrt(5)
    #   d = inf: no clipping; diagonal: 1 - 0.1*sqrt(5) = 1 - 0.5/sqrt(5), 1 - 0.05*sqrt(5) = 1 - 0.25/sqrt(5)
    #   The off-diagonal gradient is 0, so those entries do not move.
    p = np.array([[1.0, -1.0], [-1.0, 1.0]])
    opt = so.Adafactor(p, lr=0.1, d=d)
    opt.step(np.array([[2.0, 0.0], [0.0, 4.0]]))
    a, b = expected_diag
    expected = np.array([[1.0 - a / math.sqrt(5.0), -1.0], [-1.0, 1.0 - b / math.sqrt(5.0)]])
    np.testing.assert_allclose(p, expected, rtol=1e-15)
    np.testing.assert_array_equal(opt.state[0]["row_var"], [[2.0], [8.0]])
    np.testing.assert_array_equal(opt.state[0]["col_var"], [[2.0, 8.0]])


def test_updates_the_callers_arrays_in_place() -> None:
    p = np.ones((3, 4), dtype=np.float32)
    opt = so.Adafactor([p])
    assert opt.params[0] is p
    opt.step([np.ones((3, 4))])
    assert p.dtype == np.float32 and not np.array_equal(p, np.ones((3, 4)))


def test_factored_state_keeps_r_plus_c_numbers() -> None:
    rows, cols = 300, 200
    opt = so.Adafactor([np.zeros((rows, cols)), np.zeros((4, rows, cols)), np.zeros(cols), np.zeros(())])
    opt.step([np.ones((rows, cols)), np.ones((4, rows, cols)), np.ones(cols), np.ones(())])
    matrix, batch, vector, scalar = opt.state
    assert set(matrix) == {"step", "row_var", "col_var"}
    assert matrix["row_var"].shape == (rows, 1) and matrix["col_var"].shape == (1, cols)
    assert matrix["row_var"].size + matrix["col_var"].size == rows + cols
    assert batch["row_var"].size + batch["col_var"].size == 4 * (rows + cols)
    assert set(vector) == {"step", "variance"} and vector["variance"].shape == (cols,)
    assert scalar["variance"].shape == ()


@given(
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_state_size_property(shape: tuple[int, ...], dtype: type) -> None:
    p = np.zeros(shape, dtype=dtype)
    opt = so.Adafactor(p)
    opt.step(np.ones(shape))
    arrays = [v for k, v in opt.state[0].items() if k != "step"]
    assert all(a.dtype == dtype for a in arrays)
    if len(shape) >= 2:
        batch = math.prod(shape[:-2])
        assert sum(a.size for a in arrays) == batch * (shape[-2] + shape[-1])
    else:
        assert [a.shape for a in arrays] == [shape]


@given(
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
    dtype=st.sampled_from([np.float32, np.float64]),
    exponent=st.integers(-6, 6),
    seed=st.integers(0, 2**32 - 1),
    weight_decay=st.sampled_from([0.0, 0.1]),
    maximize=st.booleans(),
    lr=st.sampled_from([1e-2, 0.5]),
)
def test_power_of_two_gradient_scale_changes_nothing(
    shape: tuple[int, ...], dtype: type, exponent: int, seed: int, weight_decay: float, maximize: bool, lr: float
) -> None:
    # U = g / sqrt(V) is invariant to g -> c * g; with c a power of two every
    # rounding step scales exactly (gradients are kept away from 0, so the eps1
    # floors never act), so the parameters are bit-identical and the second
    # moments scale by exactly c**2.
    rng = np.random.default_rng(seed)
    c = dtype(2.0**exponent)
    p0 = rng.standard_normal(shape).astype(dtype)
    a, b = p0.copy(), p0.copy()
    kwargs = {"lr": lr, "weight_decay": weight_decay, "maximize": maximize}
    opt_a, opt_b = so.Adafactor(a, **kwargs), so.Adafactor(b, **kwargs)
    for _ in range(4):
        g = np.asarray(rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 2.0, size=shape), dtype=dtype)
        opt_a.step([g])
        opt_b.step([g * c])
    np.testing.assert_array_equal(a, b)
    for key in opt_a.state[0].keys() - {"step"}:
        np.testing.assert_array_equal(opt_b.state[0][key], opt_a.state[0][key] * (c * c))


def test_none_gradient_skips_and_does_not_advance_the_count() -> None:
    rng = np.random.default_rng(0)
    p, q = rng.standard_normal((3, 4)), rng.standard_normal(5)
    opt = so.Adafactor([p, q], weight_decay=0.1)
    opt.step([rng.standard_normal((3, 4)), rng.standard_normal(5)])
    q_before, q_state = q.copy(), copy.deepcopy(opt.state[1])
    for _ in range(3):
        opt.step([rng.standard_normal((3, 4)), None])
    assert opt.state[0]["step"] == 4
    assert opt.state[1]["step"] == 1
    np.testing.assert_array_equal(q, q_before)
    np.testing.assert_array_equal(opt.state[1]["variance"], q_state["variance"])
    # The lagging count drives its schedule: q's next update is its step 2.
    fresh_q = q.copy()
    twin = so.Adafactor([fresh_q], weight_decay=0.1)
    twin.load_state_dict({**twin.state_dict(), "param.0.step": np.int64(1), "param.0.variance": q_state["variance"]})
    g = rng.standard_normal(5)
    opt.step([None, g])
    twin.step([g])
    assert opt.state[1]["step"] == twin.state[0]["step"] == 2
    np.testing.assert_array_equal(q, fresh_q)


def test_eps1_none_uses_each_parameters_own_dtype() -> None:
    # torch resolves eps1=None once per step from the first parameter with a
    # gradient (float32 here) and reuses it for the float64 one; the contract
    # says each parameter's own dtype, so the float64 parameter must behave as
    # if it were alone.
    p32, p64 = np.ones(3, np.float32), np.ones(3, np.float64)
    alone = np.ones(3, np.float64)
    mixed, single = so.Adafactor([p32, p64], lr=0.1), so.Adafactor([alone], lr=0.1)
    g64 = np.full(3, 1e-9)
    mixed.step([np.zeros(3, np.float32), g64])
    single.step([g64])
    np.testing.assert_array_equal(p64, alone)
    np.testing.assert_allclose(p64, 0.9, rtol=1e-15)


def test_gradient_that_is_the_parameter_itself() -> None:
    # The gradient of 0.5 * ||p||**2 is p; passing p itself must act like a copy
    # even though the weight decay scales p before the gradient is read.
    p, q = np.array([1.0, -2.0, 3.0]), np.array([1.0, -2.0, 3.0])
    opt_p, opt_q = so.Adafactor(p, lr=0.5, weight_decay=0.5), so.Adafactor(q, lr=0.5, weight_decay=0.5)
    for _ in range(3):
        opt_p.step([p])
        opt_q.step([q.copy()])
    np.testing.assert_array_equal(p, q)


def test_gradient_cast_to_parameter_dtype() -> None:
    p32, p32_twin = np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)
    g = np.arange(6.0).reshape(2, 3) / 7
    so.Adafactor(p32).step([g])
    so.Adafactor(p32_twin).step([g.astype(np.float32)])
    assert p32.dtype == np.float32
    np.testing.assert_array_equal(p32, p32_twin)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"lr": -0.5}, "lr: -0.5"),
        ({"beta2_decay": 0.25}, "beta2_decay: 0.25"),
        ({"eps": (-1e-3, 1e-3)}, "eps1: -0.001"),
        ({"eps": (None, -2.0)}, "eps2: -2.0"),
        ({"d": 0.5}, "d: 0.5"),
        ({"weight_decay": -0.125}, "weight_decay: -0.125"),
        ({"lr": math.nan}, "lr: nan"),
        ({"d": math.nan}, "d: nan"),
    ],
)
def test_constructor_checks_as_pytorch(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        so.Adafactor([np.zeros(3)], **kwargs)


def test_constructor_accepts_pytorch_boundaries() -> None:
    so.Adafactor([np.zeros(3)], lr=0.0, beta2_decay=0.0, eps=(0.0, 0.0), d=1.0, weight_decay=0.0)
    opt = so.Adafactor([np.zeros(3)], d=math.inf, eps=(1e-30, 1e-3))
    assert opt.d == math.inf and opt.eps == (1e-30, 1e-3)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"eps": 1e-3}, TypeError),
        ({"eps": (None, 1e-3, 1.0)}, TypeError),
        ({"maximize": 1}, TypeError),
        ({"lr": "0.1"}, TypeError),
    ],
)
def test_constructor_refuses_wrong_types(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        so.Adafactor([np.zeros(3)], **kwargs)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 2, 2)])
def test_empty_parameter_is_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"params\[1\]"):
        so.Adafactor([np.zeros(2), np.zeros(shape)])


def _stepped_optimizer() -> so.Adafactor:
    """Three parameters (2-d, 1-d, 0-d) after a few steps, so the state is non-trivial."""
    rng = np.random.default_rng(7)
    params = [rng.standard_normal((3, 4)), rng.standard_normal(5).astype(np.float32), np.array(0.5)]
    opt = so.Adafactor(params, lr=0.3, weight_decay=0.1)
    for _ in range(3):
        opt.step([rng.standard_normal((3, 4)), rng.standard_normal(5), rng.standard_normal(())])
    return opt


@pytest.mark.parametrize(
    ("bad_last", "error"),
    [
        (np.zeros(()).reshape(1), ValueError),  # wrong shape
        (np.array(np.nan), ValueError),
        (np.array(-np.inf), ValueError),
        (so.CooGradient.from_dense(np.array([0.0, 1.0])), TypeError),
        ("0.5", TypeError),
    ],
)
def test_bad_gradient_raises_and_changes_nothing(bad_last: object, error: type[Exception]) -> None:
    opt = _stepped_optimizer()
    before = _snapshot(opt)
    # The first two gradients are fine: only checking all before updating any keeps them unapplied.
    with pytest.raises(error):
        opt.step([np.ones((3, 4)), np.ones(5), bad_last])
    _assert_bit_identical(opt, before)


@pytest.mark.parametrize(
    "grads",
    [
        [np.ones((3, 4)), np.ones(5)],
        [np.ones((3, 4)), np.ones(5), np.ones(()), np.ones(())],
        [np.ones((4, 3)), np.ones(5), np.ones(())],
        [np.ones((3, 4)), np.array([1.0, 2.0, np.nan, 4.0, 5.0]), np.ones(())],
    ],
)
def test_wrong_count_shape_or_value_changes_nothing(grads: list[np.ndarray]) -> None:
    opt = _stepped_optimizer()
    before = _snapshot(opt)
    with pytest.raises(ValueError):
        opt.step(grads)
    _assert_bit_identical(opt, before)


@pytest.mark.parametrize(
    "sparse",
    [
        so.CooGradient(np.array([0, 2]), np.array([1.0, 2.0]), 4),
        so.CsrGradient.from_dense(np.array([[0.0, 1.0], [2.0, 0.0]])),
    ],
)
def test_sparse_gradient_is_refused(sparse: object) -> None:
    p = np.ones(4) if isinstance(sparse, so.CooGradient) else np.ones((2, 2))
    opt = so.Adafactor(p)
    before = _snapshot(opt)
    with pytest.raises(TypeError, match="dense"):
        opt.step([sparse])
    _assert_bit_identical(opt, before)


def test_anything_with_nnz_is_refused() -> None:
    class FakeSparse(np.ndarray):
        nnz = 1

    opt = so.Adafactor(np.ones(3))
    with pytest.raises(TypeError):
        opt.step([np.ones(3).view(FakeSparse)])


def _save_and_load(state_dict: dict[str, Any]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **state_dict)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as z:
        return dict(z)


@pytest.mark.parametrize("eps1", [None, 1e-3])
def test_state_dict_round_trip_continues_bit_identically(eps1: float | None) -> None:
    rng = np.random.default_rng(3)
    shapes = [(), (6,), (4, 5), (2, 3, 4)]
    dtypes = [np.float64, np.float32, np.float32, np.float64]
    kwargs = {"lr": 0.4, "beta2_decay": -0.7, "eps": (eps1, 1e-3), "d": 1.5, "weight_decay": 0.01, "maximize": True}
    p0 = [rng.standard_normal(s).astype(t) for s, t in zip(shapes, dtypes)]
    grads = [[rng.standard_normal(s) if (k + i) % 4 else None for i, s in enumerate(shapes)] for k in range(12)]
    never_stopped = [p.copy() for p in p0]
    opt = so.Adafactor(never_stopped, **kwargs)
    for g in grads[:5]:
        opt.step(g)
    loaded = _save_and_load(opt.state_dict())
    resumed_params = [p.copy() for p in never_stopped]
    resumed = so.Adafactor(resumed_params, **kwargs)
    resumed.load_state_dict(loaded)
    for g in grads[5:]:
        opt.step(g)
        resumed.step(g)
    resumed_snapshot = ([p.copy() for p in resumed_params], copy.deepcopy(resumed.state))
    _assert_bit_identical(opt, resumed_snapshot)
    assert [s["step"] for s in opt.state] == [9, 9, 9, 9]


def test_state_dict_keys_are_flat_and_plain() -> None:
    opt = so.Adafactor([np.zeros((2, 3)), np.zeros(4)])
    sd = opt.state_dict()
    assert set(sd) == {
        "lr", "beta2_decay", "eps1", "eps2", "d", "weight_decay", "maximize", "num_params", "step_count",
        "param.0.step", "param.0.row_var", "param.0.col_var", "param.1.step", "param.1.variance",
    }  # fmt: skip
    assert math.isnan(sd["eps1"]) and sd["num_params"] == 2
    sd["param.1.variance"][0] = 5.0  # a copy: the optimizer's state is untouched
    assert opt.state[1]["variance"][0] == 0.0


def _mismatches() -> list[tuple[str, so.Adafactor]]:
    """Optimizers whose state_dict must not load into ``so.Adafactor([zeros((3, 4)), zeros(5)])``."""
    return [
        ("shape", so.Adafactor([np.zeros((4, 3)), np.zeros(5)])),
        ("shape", so.Adafactor([np.zeros((3, 4)), np.zeros(6)])),
        ("dtype", so.Adafactor([np.zeros((3, 4), np.float32), np.zeros(5)])),
        ("lr", so.Adafactor([np.zeros((3, 4)), np.zeros(5)], lr=0.1)),
        ("eps1", so.Adafactor([np.zeros((3, 4)), np.zeros(5)], eps=(1e-3, 1e-3))),
        ("maximize", so.Adafactor([np.zeros((3, 4)), np.zeros(5)], maximize=True)),
        ("keys", so.Adafactor([np.zeros((3, 4)), np.zeros(5), np.zeros(2)])),
        ("keys", so.Adafactor([np.zeros((3, 4)), np.zeros((5, 1))])),
    ]


@pytest.mark.parametrize(("what", "other"), _mismatches())
def test_load_state_dict_mismatch_raises_and_changes_nothing(what: str, other: so.Adafactor) -> None:
    opt = so.Adafactor([np.zeros((3, 4)), np.zeros(5)])
    opt.step([np.ones((3, 4)), np.ones(5)])
    before = _snapshot(opt)
    with pytest.raises(ValueError):
        opt.load_state_dict(_save_and_load(other.state_dict()))
    _assert_bit_identical(opt, before)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("param.1.variance", np.array([1.0, -1.0, 0.0, 0.0, 0.0])),
        ("param.1.variance", np.array([1.0, np.inf, 0.0, 0.0, 0.0])),
        ("param.0.step", np.int64(-1)),
        ("param.0.step", np.float64(2.0)),
    ],
)
def test_load_state_dict_refuses_corrupt_values(key: str, value: np.ndarray) -> None:
    opt = so.Adafactor([np.zeros((3, 4)), np.zeros(5)])
    opt.step([np.ones((3, 4)), np.ones(5)])
    before = _snapshot(opt)
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        opt.load_state_dict({**opt.state_dict(), key: value})
    _assert_bit_identical(opt, before)


def test_factored_second_moment_by_hand():
    row = np.array([[1.0], [2.0]])
    col = np.array([[3.0, 4.0]])
    # mean(row) = 1.5: V = [[3, 4], [6, 8]] / 1.5
    assert np.allclose(factored_second_moment(row, col, 1e-30), [[2.0, 8 / 3], [4.0, 16 / 3]], rtol=1e-15)
    # the eps1 floor replaces a smaller mean(row)
    assert np.allclose(factored_second_moment(row * 1e-9, col, 1e-3), row * 1e-9 @ col / 1e-3, rtol=1e-15)
    # a leading batch dimension: each matrix has its own mean (a row scale cancels, a column scale does not)
    batch = factored_second_moment(np.stack([row, 2 * row, row]), np.stack([col, col, 2 * col]), 1e-30)
    assert np.allclose(batch[1], batch[0], rtol=1e-15)
    assert np.allclose(batch[2], 2 * batch[0], rtol=1e-15)
