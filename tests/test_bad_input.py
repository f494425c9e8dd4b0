"""Bad input to the optimizers is refused with a clear error, and a refused call changes nothing.

Covers every optimizer class (SparseSgd(+Table), SparseAdam(+Table) in all three
modes, SparseAdagrad(+Table, rowwise), DenseAdam, Adafactor, EGDD): refused
steps, the one cast path ("overflows float32", never a RuntimeWarning),
parameters (np.matrix refused, np.memmap updated in place), configs,
``catch_up``, gradients that alias the optimizer's own arrays, the read-only
``last_step`` record, and Adafactor's RMS of a one-element parameter.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sparse_opt as so

LAZY, DORMANCY, DENSE = so.LazyMode.LAZY, so.LazyMode.DORMANCY_DECAY, so.LazyMode.DENSE_EQUIVALENT
MODES = [LAZY, DORMANCY, DENSE]
DIM, ROWS, COLS = 6, 3, 2


# ---------------------------------------------------------------- every optimizer, with some state


def _adam(cls, mode):
    extra = {"weight_decay": 0.1} if mode is DENSE else {}
    return lambda p: cls(p, so.SparseAdamConfig(lr=0.1, mode=mode, **extra))


#: name -> (kind, factory). kind: "coo" (1-D sparse), "csr" (table), "dense" (one array), "list" (Adafactor, EGDD).
OPTIMIZERS = {
    "sgd": ("coo", lambda p: so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, momentum=0.9))),
    "sgd-dense-equivalent": (
        "coo",
        lambda p: so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.1, mode=DENSE)),
    ),
    "sgd-table": ("csr", lambda p: so.SparseSgdTable(p, so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.1))),
    "sgd-table-dense-equivalent": (
        "csr",
        lambda p: so.SparseSgdTable(p, so.SparseSgdConfig(lr=0.1, weight_decay=0.1, mode=DENSE)),
    ),
    **{f"adam-{m.value}": ("coo", _adam(so.SparseAdam, m)) for m in MODES},
    **{f"adam-table-{m.value}": ("csr", _adam(so.SparseAdamTable, m)) for m in MODES},
    "adagrad": ("coo", lambda p: so.SparseAdagrad(p, so.SparseAdagradConfig(lr=0.1))),
    "adagrad-table": ("csr", lambda p: so.SparseAdagradTable(p, so.SparseAdagradConfig(lr=0.1))),
    "adagrad-table-rowwise": ("csr", lambda p: so.SparseAdagradTable(p, so.SparseAdagradConfig(lr=0.1, rowwise=True))),
    "dense-adam": ("dense", lambda p: so.DenseAdam(p, lr=0.1)),
    "adafactor": ("list", lambda p: so.Adafactor(p)),
    "egdd": ("list", lambda p: so.EGDD(p, learning_rate=0.1, momentum=0.9)),
}
NAMES = list(OPTIMIZERS)
WITH_LAST_STEP = [n for n in NAMES if n.startswith("adam") or "dense-equivalent" in n]


def fresh_params(kind, dtype=np.float64):
    if kind == "coo":
        return np.linspace(0.0, 1.0, DIM).astype(dtype)
    if kind in ("csr", "dense"):
        return np.linspace(0.0, 1.0, ROWS * COLS).reshape(ROWS, COLS).astype(dtype)
    return [
        np.linspace(0.0, 1.0, ROWS * COLS).reshape(ROWS, COLS).astype(dtype),
        np.linspace(-1.0, 1.0, 4).astype(dtype),
    ]


def good_gradient(kind, dtype=np.float64):
    if kind == "coo":
        return so.CooGradient([1, 4], np.array([0.5, -0.5], dtype), DIM)
    if kind == "csr":
        return so.CsrGradient.from_rows([2, 0], np.ones((2, COLS), dtype), ROWS)
    if kind == "dense":
        return np.full((ROWS, COLS), 0.25, dtype)
    return [np.full((ROWS, COLS), 0.25, dtype), np.full(4, -0.5, dtype)]


def used(name, dtype=np.float64):
    """The optimizer ``name`` over fresh parameters, after two accepted steps."""
    kind, make = OPTIMIZERS[name]
    opt = make(fresh_params(kind, dtype))
    opt.step(good_gradient(kind, dtype))
    opt.step(good_gradient(kind, dtype))
    return opt


def params_of(opt):
    return list(opt.params) if isinstance(opt.params, list) else [opt.params]


def frozen(opt):
    """Parameters and the whole state dict, as bytes."""
    state = tuple(
        (k, np.asarray(v).dtype.str, np.shape(v), np.asarray(v).tobytes()) for k, v in sorted(opt.state_dict().items())
    )
    return state, tuple(p.tobytes() for p in params_of(opt))


def bad_gradients(kind):
    """``(gradient, exception, message)`` that a step over float64 parameters of ``kind`` must refuse."""
    if kind == "coo":
        return [
            (so.CooGradient([0], [1.0], 7), ValueError, "grad.dim = 7 does not match the parameter's size 6"),
            (
                so.CooGradient([1, 3], [1.0, np.nan], 6),
                ValueError,
                r"grad.values\[1\] = nan is not finite \(coordinate 3\)",
            ),
            (so.CooGradient([2], [np.inf], 6), ValueError, r"grad.values\[0\] = inf is not finite \(coordinate 2\)"),
            (
                so.CooGradient([2], np.array([-np.inf], np.float32), 6),
                ValueError,
                r"grad.values\[0\] = -inf is not finite \(coordinate 2\)",
            ),
            (
                so.CsrGradient.from_rows([0], np.ones((1, 6)), 1),
                TypeError,
                "grad must be a CooGradient for a 1-D parameter, got CsrGradient",
            ),
            (np.ones(6), TypeError, "grad must be a CooGradient for a 1-D parameter, got ndarray"),
            (None, TypeError, "got NoneType"),
            ({1: 1.0}, TypeError, "got dict"),
        ]
    if kind == "csr":
        return [
            (
                so.CsrGradient.from_rows([0], np.ones((1, 2)), 4),
                ValueError,
                r"grad.shape = \(4, 2\) does not match the table's shape \(3, 2\)",
            ),
            (so.CsrGradient.from_rows([0], np.ones((1, 3)), 3), ValueError, r"grad.shape = \(3, 3\)"),
            (
                so.CsrGradient.from_rows([0, 2], [[1.0, 1.0], [1.0, -np.inf]], 3),
                ValueError,
                r"grad rows\[\(1, 1\)\] = -inf is not finite \(table row 2\)",
            ),
            (
                so.CsrGradient([0, 0, 1, 1], [1], [np.nan], (3, 2)),
                ValueError,
                r"grad.values\[0\] = nan is not finite \(coordinate 3\)",
            ),
            (so.CooGradient([0], [1.0], 6), TypeError, "grad must be a CsrGradient for a 2-D table, got CooGradient"),
            (np.ones((3, 2)), TypeError, "got ndarray"),
            (None, TypeError, "got NoneType"),
        ]
    if kind == "dense":
        return [
            (np.ones(4), ValueError, r"grads\[0\] has shape \(4,\) but params\[0\] has shape \(3, 2\)"),
            (
                np.array([[0.0, 0.0], [np.nan, 0.0], [0.0, 0.0]]),
                ValueError,
                r"grads\[0\]\[\(1, 0\)\] = nan is not finite",
            ),
            (np.ones((3, 2), dtype=complex), TypeError, "must hold real numbers"),
            (so.CsrGradient.from_rows([0], np.ones((1, 2)), 3), TypeError, "takes dense ndarray gradients only"),
            (None, TypeError, "grad must be an ndarray, got None"),
            ({"a": 1}, TypeError, "dict"),
        ]
    good = good_gradient("list")
    return [
        (good[:1], ValueError, "grads has 1 entries but there are 2 parameters"),
        ([good[0], np.ones(5)], ValueError, r"grads\[1\] has shape \(5,\) but params\[1\] has shape \(4,\)"),
        ([good[0], np.array([0.0, 0.0, np.inf, 0.0])], ValueError, r"grads\[1\]\[2\] = inf is not finite"),
        (
            [so.CooGradient([0], [1.0], 6), good[1]],
            TypeError,
            r"grads\[0\] is a CooGradient; this optimizer takes dense ndarray gradients only",
        ),
        ([good[0], {"a": 1}], TypeError, r"grads\[1\] must be an array of numbers, got dict"),
        ([good[0], (x for x in range(4))], TypeError, r"grads\[1\] must be an array of numbers, got generator"),
        ("grads", TypeError, "grads must be a list with one entry per parameter, got str"),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_refused_step_leaves_everything_bit_identical(name):
    """Each bad gradient raises the named error; parameters, state and the step count are bit-identical after."""
    opt = used(name)
    for grad, exc, match in bad_gradients(OPTIMIZERS[name][0]):
        before = frozen(opt)
        with pytest.raises(exc, match=match):
            opt.step(grad)
        assert frozen(opt) == before, (grad, match)


# ---------------------------------------------------------------- the one cast path


def overflowing_gradients(kind):
    """``(float64 gradient with 1e39 at one place, message)`` for float32 parameters of ``kind``."""
    if kind == "coo":
        return [
            (so.CooGradient([1, 4], [0.5, 1e39], DIM), r"grad.values\[1\] = 1e\+39 overflows float32 \(coordinate 4\)")
        ]
    if kind == "csr":
        return [
            (
                so.CsrGradient.from_rows([0, 2], [[1.0, 1.0], [-1e39, 1.0]], ROWS),
                r"grad rows\[\(1, 0\)\] = -1e\+39 overflows float32 \(table row 2\)",
            ),
            (
                so.CsrGradient([0, 1, 1, 2], [0, 1], [0.5, 1e39], (ROWS, COLS)),
                r"grad.values\[1\] = 1e\+39 overflows float32 \(coordinate 5\)",
            ),
        ]
    if kind == "dense":
        return [(np.array([[0.0, 0.0], [0.0, 1e39], [0.0, 0.0]]), r"grads\[0\]\[\(1, 1\)\] = 1e\+39 overflows float32")]
    return [
        ([np.zeros((ROWS, COLS)), np.array([0.0, 0.0, -1e39, 0.0])], r"grads\[1\]\[2\] = -1e\+39 overflows float32")
    ]


@pytest.mark.parametrize("name", NAMES)
def test_float64_value_too_large_for_float32_overflows_not_inf(name):
    """1e39 (finite in float64) into float32 parameters: "overflows float32" with position and coordinate/row.

    No ``RuntimeWarning`` (numpy's cast warns "overflow encountered in cast"), and
    nothing changes. A huge but representable value (3e38) is cast exactly.
    """
    kind = OPTIMIZERS[name][0]
    opt = used(name, np.float32)
    for grad, match in overflowing_gradients(kind):
        before = frozen(opt)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=match):
                opt.step(grad)
        assert frozen(opt) == before


def test_cast_names_not_finite_before_overflow():
    """A NaN is "not finite" even beside a value that would overflow; an inf is "not finite", never "overflows"."""
    opt = so.SparseAdam(np.ones(4, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"grad.values\[1\] = nan is not finite \(coordinate 2\)"):
            opt.step(so.CooGradient([0, 2], [1e39, np.nan], 4))
        with pytest.raises(ValueError, match=r"grad.values\[0\] = inf is not finite \(coordinate 3\)"):
            opt.step(so.CooGradient([3], [np.inf], 4))
    assert opt.step_count == 0


def test_narrow_and_wide_float_gradients_are_cast():
    """float16 values into float64 parameters, and a longdouble 1e39 into float32 (overflows, named)."""
    p = np.zeros(3)
    so.SparseSgd(p, so.SparseSgdConfig(lr=1.0)).step(so.CooGradient([1], np.array([0.5], np.float16), 3))
    assert p.tolist() == [0.0, -0.5, 0.0]
    q = np.zeros(3, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"grad.values\[0\] = .* overflows float32 \(coordinate 2\)"):
            so.SparseSgd(q, so.SparseSgdConfig(lr=1.0)).step(so.CooGradient([2], np.array([1e39], np.longdouble), 3))


# ---------------------------------------------------------------- parameters


def make_with(name, params):
    return OPTIMIZERS[name][1]([params] if OPTIMIZERS[name][0] == "list" else params)


@pytest.mark.parametrize(
    ("params", "exc", "match"),
    [
        (np.arange(4), TypeError, "params must have dtype float32, float64, float16 or bfloat16, got int64"),
        (np.ones(4, dtype=np.longdouble), TypeError, "got float128|got longdouble"),
        ([1.0, 2.0], TypeError, "params must be a numpy.ndarray, got list"),
        (np.ones((2, 2)), ValueError, r"params must be 1-D, got shape \(2, 2\)"),
        (np.ones(8)[::2], ValueError, "params must be C-contiguous"),
        (np.ma.array(np.ones(4)), TypeError, "params must be a plain numpy.ndarray .* got MaskedArray"),
    ],
)
def test_bad_params_are_refused(params, exc, match):
    """Wrong dtype, kind, dimension or layout of parameters: refused at construction."""
    with pytest.raises(exc, match=match):
        so.SparseAdam(params)


@pytest.mark.parametrize("name", NAMES)
def test_np_matrix_params_are_a_type_error(name):
    """``np.matrix`` (whose ``*`` is a matrix product) is refused by every optimizer with ``TypeError``."""
    kind = OPTIMIZERS[name][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # numpy discourages np.matrix, users still have them
        m = np.matrix(np.ones((1, DIM)) if kind == "coo" else np.ones((ROWS, COLS)))
    with pytest.raises(TypeError, match=r"must be a plain numpy.ndarray \(or numpy.memmap\), got matrix"):
        make_with(name, m)


@pytest.mark.parametrize("name", NAMES)
def test_memmap_params_are_updated_in_place(name, tmp_path):
    """An ``np.memmap`` works like a plain array: the same trajectory, and the step lands in the file."""
    kind = OPTIMIZERS[name][0]
    plain = fresh_params("csr" if kind in ("list", "dense") else kind)
    mm = np.memmap(tmp_path / "table.bin", dtype=plain.dtype, mode="w+", shape=plain.shape)
    mm[...] = plain
    grad = good_gradient(kind)
    if kind == "list":
        grad = grad[:1]
    a, b = make_with(name, mm), make_with(name, plain)
    for _ in range(3):
        a.step(grad)
        b.step(grad)
    assert np.array_equal(np.asarray(mm), plain) and not np.array_equal(
        plain, fresh_params("csr" if kind in ("list", "dense") else kind)
    )
    mm.flush()
    on_disk = np.fromfile(tmp_path / "table.bin", dtype=plain.dtype).reshape(plain.shape)
    assert np.array_equal(on_disk, plain)


def test_readonly_params_are_refused():
    """Read-only arrays (a read-only memmap too) cannot be updated in place: ``ValueError``."""
    p = np.ones(3)
    p.setflags(write=False)
    for make in (
        lambda: so.SparseAdam(p),
        lambda: so.SparseSgd(p, so.SparseSgdConfig(lr=0.1)),
        lambda: so.DenseAdam(p),
        lambda: so.SparseAdagrad(p),
    ):
        with pytest.raises(ValueError, match="params is read-only"):
            make()
    for make in (lambda: so.Adafactor([p]), lambda: so.EGDD([p], 0.1, 0.9)):
        with pytest.raises(ValueError, match=r"params\[0\] is read-only"):
            make()
    with pytest.raises(ValueError, match=r"params must be 2-D, got shape \(3,\)"):
        so.SparseAdamTable(np.ones(3))
    with pytest.raises(TypeError, match="config must be a SparseAdamConfig, got SparseSgdConfig"):
        so.SparseAdam(np.ones(3), so.SparseSgdConfig(lr=0.1))


def test_readonly_memmap_is_refused(tmp_path):
    np.ones(4).tofile(tmp_path / "p.bin")
    mm = np.memmap(tmp_path / "p.bin", dtype=np.float64, mode="r", shape=(4,))
    with pytest.raises(ValueError, match="params is read-only"):
        so.SparseSgd(mm, so.SparseSgdConfig(lr=0.1))


# ---------------------------------------------------------------- configs


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": -1e-3}, ValueError, r"Invalid lr: -0.001 \(must be >= 0.0\)"),
        ({"beta1": 1.0}, ValueError, r"Invalid beta1: 1.0 \(must be < 1.0\)"),
        ({"beta2": -0.1}, ValueError, "Invalid beta2: -0.1"),
        ({"eps": float("nan")}, ValueError, r"Invalid eps: nan \(must be finite\)"),
        ({"eps": -1e-8}, ValueError, "Invalid eps"),
        ({"mode": "sparse"}, ValueError, "Invalid mode: 'sparse'"),
        ({"mode": 3}, ValueError, "Invalid mode: 3"),
        ({"maximize": 1}, TypeError, "maximize must be a bool"),
        ({"lr": "0.1"}, TypeError, "lr must be a float >= 0 or a schedule"),
        ({"weight_decay": -0.1}, ValueError, r"Invalid weight_decay: -0.1 \(must be >= 0.0\)"),
        ({"weight_decay": float("inf")}, ValueError, "Invalid weight_decay: inf"),
        ({"lr": 0.5, "weight_decay": 2.5}, ValueError, r"Invalid weight_decay: 2.5 \(lr \* weight_decay = 1.25 > 1"),
    ],
)
def test_bad_adam_config(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        so.SparseAdamConfig(**kwargs)


def test_adam_config_boundaries_and_mode_strings():
    """``lr * weight_decay == 1`` is allowed (the decay factor is 0); modes parse from members or strings, any case."""
    assert so.SparseAdamConfig(lr=0.5, weight_decay=2.0).weight_decay == 2.0
    assert so.SparseAdamConfig(mode="dormancy_decay").mode is DORMANCY
    assert so.SparseAdamConfig(mode="lazy").mode is LAZY
    assert so.SparseAdamConfig(mode="DENSE_EQUIVALENT").mode is DENSE
    assert so.SparseAdamConfig(mode=so.LazyAdamMode.DORMANCY_DECAY).mode is DORMANCY
    assert so.LazyAdamMode is so.LazyMode
    with pytest.raises(ValueError, match=r"Invalid weight_decay: 2.5 \(lr \* weight_decay = 1.25 > 1"):
        so.DenseAdam(np.ones(2), lr=0.5, weight_decay=2.5)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": -1.0}, ValueError, "Invalid lr"),
        ({"lr": 0.1, "momentum": -0.5}, ValueError, "Invalid momentum"),
        ({"lr": 0.1, "weight_decay": -1}, ValueError, "Invalid weight_decay"),
        ({"lr": 0.1, "maximize": "yes"}, TypeError, "maximize must be a bool"),
        ({"lr": 0.1, "mode": "nonsense"}, ValueError, "Invalid mode: 'nonsense'"),
        (
            {"lr": 0.1, "mode": DORMANCY},
            ValueError,
            "Invalid mode: DORMANCY_DECAY is not supported here: DORMANCY_DECAY is Adam's rule .* no SGD analogue",
        ),
        ({"lr": 0.1, "mode": "dormancy_decay"}, ValueError, "DORMANCY_DECAY is not supported here"),
    ],
)
def test_bad_sgd_config(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        so.SparseSgdConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": -0.1}, ValueError, r"Invalid lr: -0.1 \(must be >= 0.0\)"),
        ({"lr_decay": -1e-3}, ValueError, "Invalid lr_decay: -0.001"),
        ({"eps": -1e-10}, ValueError, "Invalid eps: -1e-10"),
        ({"eps": float("inf")}, ValueError, r"Invalid eps: inf \(must be finite\)"),
        ({"initial_accumulator_value": -1.0}, ValueError, "Invalid initial_accumulator_value: -1.0"),
        ({"maximize": 0}, TypeError, "maximize must be a bool"),
        ({"rowwise": 1}, TypeError, "rowwise must be a bool"),
    ],
)
def test_bad_adagrad_config(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        so.SparseAdagradConfig(**kwargs)


def test_rowwise_adagrad_needs_a_table():
    """``rowwise=True`` on a 1-D parameter is refused with the reason; the table accepts it (one accumulator per row)."""
    with pytest.raises(ValueError, match="rowwise=True needs a table .* a 1-D parameter has no rows"):
        so.SparseAdagrad(np.ones(4), so.SparseAdagradConfig(rowwise=True))
    assert so.SparseAdagradTable(np.ones((4, 3)), so.SparseAdagradConfig(rowwise=True)).sum.shape == (4,)


def test_dense_adam_bad_hyper_parameters():
    with pytest.raises(ValueError, match="Invalid beta1"):
        so.DenseAdam(np.ones(2), beta1=1.5)
    with pytest.raises(ValueError, match="Invalid weight_decay"):
        so.DenseAdam(np.ones(2), weight_decay=-1.0)


# ---------------------------------------------------------------- catch_up


CATCH_UP = [
    ("adam", lambda p: so.SparseAdam(p, so.SparseAdamConfig(lr=0.1, mode=DENSE, weight_decay=0.1))),
    ("sgd", lambda p: so.SparseSgd(p, so.SparseSgdConfig(lr=0.1, momentum=0.9, weight_decay=0.1, mode=DENSE))),
]


@pytest.mark.parametrize("table", [False, True], ids=["1-D", "table"])
@pytest.mark.parametrize(("label", "make"), CATCH_UP, ids=[c[0] for c in CATCH_UP])
def test_catch_up_validates_index_and_changes_nothing(label, make, table):
    """Float or bool indices are a ``TypeError``, out-of-range or negative ones a ``ValueError`` naming them.

    Nothing changes on a refusal (a valid index before the bad one included),
    and ``step_count`` never advances.
    """
    params = np.linspace(0, 1, 12).reshape(4, 3) if table else np.linspace(0, 1, 4)
    if table:
        opt = (so.SparseAdamTable if label == "adam" else so.SparseSgdTable)(params, make(np.ones(1)).config)
        grad = so.CsrGradient.from_rows([1], np.ones((1, 3)), 4)
    else:
        opt = make(params)
        grad = so.CooGradient([1], [1.0], 4)
    for _ in range(3):
        opt.step(grad)
    bound = "rows = 4" if table else "params.size = 4"
    for index, exc, match in [
        ([0.0, 1.0], TypeError, "index must be an integer array, got dtype float64"),
        (np.array([True]), TypeError, "index must be an integer array, got dtype bool"),
        ([0, 4], ValueError, rf"index\[1\] = 4 is out of range \[0, {bound}\)"),
        ([2, -1], ValueError, rf"index\[1\] = -1 is out of range \[0, {bound}\)"),
        (np.array([2**63], dtype=np.uint64), ValueError, r"index\[0\] = 9223372036854775808 does not fit in int64"),
        ("0", TypeError, "index must be an array of numbers, got str"),
        ({0: 1}, TypeError, "got dict"),
    ]:
        before = frozen(opt)
        with pytest.raises(exc, match=match):
            opt.catch_up(index)
        assert frozen(opt) == before and opt.step_count == 3
    opt.catch_up(np.array([0, 0, 3], np.uint8))  # any integer dtype, repeats allowed
    assert opt.step_count == 3


@pytest.mark.parametrize(
    "make",
    [
        *[lambda m=m: so.SparseAdam(np.ones(3), so.SparseAdamConfig(mode=m)) for m in (LAZY, DORMANCY)],
        *[lambda m=m: so.SparseAdamTable(np.ones((3, 2)), so.SparseAdamConfig(mode=m)) for m in (LAZY, DORMANCY)],
        lambda: so.SparseSgd(np.ones(3), so.SparseSgdConfig(lr=0.1, momentum=0.9)),
        lambda: so.SparseSgdTable(np.ones((3, 2)), so.SparseSgdConfig(lr=0.1)),
    ],
    ids=["adam-lazy", "adam-dormancy", "adam-table-lazy", "adam-table-dormancy", "sgd-lazy", "sgd-table-lazy"],
)
def test_catch_up_outside_dense_equivalent_is_refused(make):
    """In LAZY and DORMANCY_DECAY there is no dense state to catch up to: ``ValueError`` naming the mode, nothing changes."""
    opt = make()
    before = frozen(opt)
    for index in (None, [0]):
        with pytest.raises(
            ValueError, match=r"catch_up is for mode DENSE_EQUIVALENT: this optimizer's mode is (LAZY|DORMANCY_DECAY)"
        ):
            opt.catch_up(index)
    assert frozen(opt) == before


@pytest.mark.parametrize("table", [False, True], ids=["1-D", "table"])
def test_adagrad_catch_up_is_a_clear_error(table):
    """Adagrad has no DENSE_EQUIVALENT mode (lazy Adagrad already is dense): ``catch_up`` is a ``ValueError`` that says so."""
    opt = so.SparseAdagradTable(np.ones((3, 2))) if table else so.SparseAdagrad(np.ones(3))
    with pytest.raises(ValueError, match="lazy Adagrad already is dense Adagrad"):
        opt.catch_up([0])


# ---------------------------------------------------------------- gradients that alias the optimizer's arrays


def _twin_runs(make, feed, copy_feed, steps=4):
    """Run ``feed`` (which may pass the optimizer's own arrays) and ``copy_feed`` (copies) side by side."""
    a, b = make(), make()
    for t in range(steps):
        a.step(feed(a, t))
        b.step(copy_feed(b, t))
    return a, b


@pytest.mark.parametrize("which", ["m", "v", "params"])
def test_dense_adam_step_with_its_own_array_equals_a_copy(which):
    """``DenseAdam.step(opt.m)`` (or ``opt.v``, or the parameters) means the array's values at the call."""

    def make():
        return so.DenseAdam(np.linspace(-1.0, 1.0, 5), lr=0.1, weight_decay=0.1)

    def feed(opt, t):
        return np.linspace(1.0, 2.0, 5) if t == 0 else getattr(opt, which)

    a, b = _twin_runs(make, feed, lambda opt, t: np.array(feed(opt, t), copy=True))
    assert frozen(a) == frozen(b)


@pytest.mark.parametrize("which", ["variance", "param"])
def test_adafactor_step_with_its_own_state_equals_a_copy(which):
    """``Adafactor.step([opt.state[0]['variance']])`` (or the parameter itself) equals passing a copy."""

    def make():
        return so.Adafactor([np.linspace(-1.0, 1.0, 5)], lr=0.1)

    def feed(opt, t):
        if t == 0:
            return [np.linspace(1.0, 2.0, 5)]
        return [opt.state[0]["variance"] if which == "variance" else opt.params[0]]

    a, b = _twin_runs(make, feed, lambda opt, t: [g.copy() for g in feed(opt, t)])
    assert frozen(a) == frozen(b)


@pytest.mark.parametrize("which", ["momentum", "gbar", "gain", "param"])
def test_egdd_step_with_its_own_state_equals_a_copy(which):
    """``EGDD.step([opt.state[0]['momentum']])`` (or gbar, gain, the parameter) equals passing a copy."""

    def make():
        return so.EGDD([np.linspace(-1.0, 1.0, 5), np.ones(5)], learning_rate=0.1, momentum=0.9)

    def feed(opt, t):
        if t == 0:
            return [np.linspace(1.0, 2.0, 5), np.linspace(-2.0, 1.0, 5)]
        own = opt.params[0] if which == "param" else opt.state[0][which]
        return [own, own]  # also fed to the second parameter, updated after the first

    a, b = _twin_runs(make, feed, lambda opt, t: [g.copy() for g in feed(opt, t)])
    assert frozen(a) == frozen(b)


# ---------------------------------------------------------------- last_step is read-only for good


@pytest.mark.parametrize("split", [False, True], ids=["whole-rows", "split-rows"])
@pytest.mark.parametrize("name", WITH_LAST_STEP)
def test_last_step_cannot_be_made_writeable(name, split):
    """``last_step`` refuses writes and ``setflags(write=True)``, and so do its views and broadcasts.

    It is int64 of the parameters' shape (a copy, such as ``reshape`` of a
    broadcast, is the caller's own).
    """
    opt = used(name)
    if split and OPTIMIZERS[name][0] == "csr":
        opt.step(so.CsrGradient([0, 1, 1, 1], [1], [1.0], (ROWS, COLS)))
    ls = opt.last_step
    assert ls.dtype == np.int64 and ls.shape == opt.params.shape
    before = frozen(opt)
    if split and OPTIMIZERS[name][0] == "csr":  # a SplitStepsView: indexing gives the caller's own copies
        with pytest.raises(ValueError, match="read-only"):
            ls[0, 0] = 99
        for copy in (ls[...], ls[::-1], np.asarray(ls), ls[0]):
            copy[...] = 99
        assert frozen(opt) == before
        return
    for view in (ls, ls.view(), ls[...], ls[::-1], np.asarray(ls), np.broadcast_to(ls, (2, *ls.shape)), ls.T):
        with pytest.raises(ValueError):
            view.setflags(write=True)
        with pytest.raises(ValueError):
            view[(0,) * view.ndim] = 99
    assert frozen(opt) == before


@pytest.mark.parametrize("name", [n for n in NAMES if n not in WITH_LAST_STEP])
def test_optimizers_without_a_record_have_no_last_step(name):
    """LAZY SGD and Adagrad keep no step record: ``last_step`` is None (Sparse*), or absent (dense)."""
    opt = used(name)
    assert getattr(opt, "last_step", None) is None


# ---------------------------------------------------------------- Adafactor's RMS of one element


@pytest.mark.parametrize("shape", [(1,), (), (1, 1), (1, 1, 1)])
def test_adafactor_rms_of_one_float32_element_of_1e20_stays_finite(shape):
    """torch's norm of one element is its absolute value: RMS(1e20) = 1e20, not sqrt(1e40) = inf.

    The step therefore moves the parameter by a finite amount (``alpha = 1e20 *
    rho`` times a clipped unit update) instead of to -inf, without a warning.
    """
    p = np.full(shape, 1e20, np.float32)
    opt = so.Adafactor([p], lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step([np.ones(shape, np.float32)])
    assert np.isfinite(p).all()
    # rho = min(lr, 1) = 0.01, alpha = 1e20 * 0.01, U = g / sqrt(max(g**2, eps1**2)) = 1, RMS(U) = 1
    np.testing.assert_allclose(p, np.full(shape, 1e20 - 1e18, np.float32), rtol=1e-6)
