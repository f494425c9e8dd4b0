"""Bad input is refused with a clear error, and a refused call changes nothing."""

import numpy as np
import pytest

import sparse_opt as so

LAZY, DORMANCY = so.LazyAdamMode.LAZY, so.LazyAdamMode.DORMANCY_DECAY


def snapshot(opt):
    return {k: np.array(v, copy=True) for k, v in opt.state_dict().items()}, opt.params.copy()


def assert_unchanged(opt, snap):
    state, params = snap
    assert np.array_equal(opt.params, params)
    now = opt.state_dict()
    assert now.keys() == state.keys()
    for k, v in state.items():
        assert np.array_equal(np.asarray(now[k]), v), k


def used_optimizers():
    """Optimizers with non-trivial state (a few steps taken) over 1-D and 2-D params."""
    out = []
    for mode in (LAZY, DORMANCY):
        p = np.linspace(0, 1, 6)
        opt = so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, mode=mode))
        opt.step(so.CooGradient([1, 4], [0.5, -0.5], 6))
        out.append(opt)
        t = np.linspace(0, 1, 6).reshape(3, 2).astype(np.float32)
        opt = so.SparseAdamTable(t, so.SparseAdamConfig(lr=0.1, mode=mode))
        opt.step(so.CsrGradient.from_rows([2, 0], np.ones((2, 2)), 3))
        out.append(opt)
    p = np.linspace(0, 1, 6)
    opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, momentum=0.9))
    opt.step(so.CooGradient([0], [1.0], 6))
    out.append(opt)
    t = np.ones((3, 2))
    opt = so.SparseSgdTable(t, so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.1))
    opt.step(so.CsrGradient.from_rows([1], np.ones((1, 2)), 3))
    out.append(opt)
    return out


def bad_gradients(opt):
    """(gradient, exception, message) triples that opt.step must refuse."""
    if opt.params.ndim == 1:
        return [
            (so.CooGradient([0], [1.0], 7), ValueError, "grad.dim = 7 does not match the parameter's size 6"),
            (so.CooGradient([1, 3], [1.0, np.nan], 6), ValueError, r"grad.values\[1\] = nan is not finite \(coordinate 3\)"),
            (so.CooGradient([2], [np.inf], 6), ValueError, r"grad.values\[0\] = inf is not finite \(coordinate 2\)"),
            (so.CsrGradient.from_rows([0], np.ones((1, 6)), 1), TypeError, "grad must be a CooGradient"),
            (np.ones(6), TypeError, "grad must be a CooGradient for a 1-D parameter, got ndarray"),
            (None, TypeError, "got NoneType"),
        ]
    return [
        (so.CsrGradient.from_rows([0], np.ones((1, 2)), 4), ValueError, r"grad.shape = \(4, 2\) does not match"),
        (so.CsrGradient.from_rows([0], np.ones((1, 3)), 3), ValueError, r"grad.shape = \(3, 3\)"),
        (so.CsrGradient.from_rows([0, 2], [[1.0, 1.0], [1.0, -np.inf]], 3), ValueError, r"grad rows\[\(1, 1\)\] = -inf is not finite \(table row 2\)"),
        (so.CsrGradient([0, 0, 1, 1], [1], [np.nan], (3, 2)), ValueError, r"grad.values\[0\] = nan is not finite \(coordinate 3\)"),
        (so.CooGradient([0], [1.0], 6), TypeError, "grad must be a CsrGradient for a 2-D table, got CooGradient"),
        (np.ones((3, 2)), TypeError, "got ndarray"),
    ]


@pytest.mark.parametrize("opt", used_optimizers(), ids=lambda o: f"{type(o).__name__}-{getattr(o.config, 'mode', 'sgd')}")
def test_refused_step_leaves_everything_bit_identical(opt):
    for grad, exc, match in bad_gradients(opt):
        snap = snapshot(opt)
        count = opt.step_count
        with pytest.raises(exc, match=match):
            opt.step(grad)
        assert_unchanged(opt, snap)
        assert opt.step_count == count


@pytest.mark.parametrize(
    ("params", "exc", "match"),
    [
        (np.arange(4), TypeError, "params must have dtype float32 or float64, got int64"),
        (np.ones(4, dtype=np.float16), TypeError, "got float16"),
        ([1.0, 2.0], TypeError, "params must be a numpy.ndarray, got list"),
        (np.ones((2, 2)), ValueError, r"params must be 1-D, got shape \(2, 2\)"),
        (np.ones(8)[::2], ValueError, "params must be C-contiguous"),
    ],
)
def test_bad_params_are_refused(params, exc, match):
    with pytest.raises(exc, match=match):
        so.SparseAdam(params)


def test_readonly_params_are_refused():
    p = np.ones(3)
    p.setflags(write=False)
    for make in (lambda: so.SparseAdam(p), lambda: so.SparseSgd(p, so.SparseSgdConfig(lr=0.1)), lambda: so.DenseAdam(p)):
        with pytest.raises(ValueError, match="params is read-only"):
            make()
    with pytest.raises(ValueError, match=r"params must be 2-D, got shape \(3,\)"):
        so.SparseAdamTable(np.ones(3))
    with pytest.raises(TypeError, match="config must be a SparseAdamConfig, got SparseSgdConfig"):
        so.SparseAdam(np.ones(3), so.SparseSgdConfig(lr=0.1))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": -1e-3}, ValueError, r"Invalid lr: -0.001 \(must be >= 0.0\)"),
        ({"beta1": 1.0}, ValueError, r"Invalid beta1: 1.0 \(must be < 1.0\)"),
        ({"beta2": -0.1}, ValueError, "Invalid beta2: -0.1"),
        ({"eps": float("nan")}, ValueError, r"Invalid eps: nan \(must be finite\)"),
        ({"mode": "sparse"}, ValueError, "Invalid mode: 'sparse'"),
        ({"maximize": 1}, TypeError, "maximize must be a bool"),
        ({"lr": "0.1"}, TypeError, "lr must be a real number"),
    ],
)
def test_bad_adam_config(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        so.SparseAdamConfig(**kwargs)


def test_adam_config_accepts_mode_strings():
    assert so.SparseAdamConfig(mode="dormancy_decay").mode is DORMANCY
    assert so.SparseAdamConfig(mode="lazy").mode is LAZY
    assert so.SparseAdamConfig(mode="DORMANCY_DECAY").mode is DORMANCY


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"lr": -1.0}, "Invalid lr"), ({"lr": 0.1, "momentum": -0.5}, "Invalid momentum"), ({"lr": 0.1, "weight_decay": -1}, "Invalid weight_decay")],
)
def test_bad_sgd_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        so.SparseSgdConfig(**kwargs)


def test_dense_adam_refuses_bad_gradients_and_changes_nothing():
    p = np.ones(3)
    opt = so.DenseAdam(p, lr=0.1)
    opt.step(np.array([0.1, 0.2, 0.3]))
    snap = snapshot(opt)
    for grad, exc, match in [
        (np.ones(4), ValueError, r"grads\[0\] has shape \(4,\) but params\[0\] has shape \(3,\)"),
        (np.array([0.0, np.nan, 0.0]), ValueError, r"grads\[0\]\[1\] = nan is not finite"),
        (so.CooGradient([0], [1.0], 3), TypeError, "takes dense ndarray gradients only"),
        (None, TypeError, "grad must be an ndarray, got None"),
    ]:
        with pytest.raises(exc, match=match):
            opt.step(grad)
        assert_unchanged(opt, snap)
    with pytest.raises(ValueError, match="Invalid beta1"):
        so.DenseAdam(np.ones(2), beta1=1.5)


def load_cases(opt):
    good = opt.state_dict()
    cases = []
    missing = dict(good)
    del missing["m" if "m" in good else "momentum_buffer"]
    cases.append((missing, "missing"))
    cases.append(({**good, "extra": np.zeros(1)}, r"unexpected \['extra'\]"))
    cases.append(({**good, "lr": 0.5}, "does not match this optimizer's lr"))
    array_key = "m" if "m" in good else "momentum_buffer"
    cases.append(({**good, array_key: good[array_key][:-1]}, "has shape"))
    wrong_dtype = np.float32 if good[array_key].dtype == np.float64 else np.float64
    cases.append(({**good, array_key: good[array_key].astype(wrong_dtype)}, "has dtype"))
    cases.append(({**good, "step_count": np.int64(-1)}, "must be >= 0"))
    cases.append(({**good, array_key: np.full_like(good[array_key], np.nan)}, "is not finite"))
    if "last_step" in good:
        cases.append(({**good, "last_step": good["last_step"] + 5}, r"outside \[0, step_count = 1\]"))
        cases.append(({**good, "mode": "lazy" if good["mode"] == "dormancy_decay" else "dormancy_decay"}, "mode"))
    return cases


@pytest.mark.parametrize("opt", used_optimizers(), ids=lambda o: type(o).__name__)
def test_mismatched_load_state_dict_is_refused(opt):
    for bad, match in load_cases(opt):
        snap = snapshot(opt)
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict(bad)
        assert_unchanged(opt, snap)
