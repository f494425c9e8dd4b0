"""The Adam family against golden vectors recorded from the real PyTorch.

``tests/golden/make_torch_adam.py`` (run with a Python that has torch; see its
docstring) ran ``torch.optim.Adam`` and ``torch.optim.SparseAdam`` on small
seeded problems and stored every step in ``tests/golden/<case>_<dtype>.npz``.
These tests replay the same gradients through ``so.DenseAdam``,
``so.SparseAdam`` (both modes) and ``so.SparseAdamTable`` and compare after
every step. torch is not needed here.

Tolerance. Both sides evaluate the same formulas in the same dtype, but not
with the same operations: torch.optim.Adam updates ``m`` with
``m.lerp_(g, 1 - beta1)``, which on CPU is ``fma(w, g - m, m)`` with
``w = 1 - beta1`` rounded to the dtype (a float32 numpy emulation of that
reproduces torch's float32 ``exp_avg`` bit for bit); torch.optim.SparseAdam
uses ``m + (g - m) * (1 - beta1)`` and bias-corrects through
``lr * sqrt(bc2) / bc1``; torch sums repeated indices in its own order when it
coalesces; and torch decays a dormant coordinate with one lerp per step where
DORMANCY_DECAY multiplies once by ``beta**gap``. Each step therefore differs
by a few roundings relative to the magnitudes that were combined, not to the
result: ``m`` can cancel to almost zero while its error stays the size of an
ulp of the gradients that made it. So an entry may differ from torch's by
``RTOL * (|torch's value| + the largest |torch's value| of that entry so far)``.

The largest float32 contribution is systematic. ``so`` evaluates
``beta * m + (1 - beta) * g`` with both coefficients rounded to float32, while
torch's forms ``m + w * (g - m)`` decay by exactly ``1 - w``: float32(0.9) is
2.5e-8 (relative) below ``1 - float32(0.1)``, float32(0.999) 1.3e-8 above
``1 - float32(0.001)``. Every touch adds that much relative bias to ``m``
(bounded by about ``2.5e-8 / (1 - beta1) = 2.5e-7``) and, against
torch.optim.SparseAdam only, to ``v`` (torch.optim.Adam also computes
``v * beta2 + (1 - beta2) * g**2``); the parameters integrate it. Over these
files (at most 30 steps) the worst difference is about 4 units of machine
epsilon times the scale above (dense float32 parameters), 2.4 in float64.
``RTOL`` is 1e-12 for float64 and 1e-6 for float32 (about 8 units); much
longer float32 trajectories would need the same operations as torch, not a
looser tolerance.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import sparse_opt as so

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
DTYPES = ("float64", "float32")
RTOL = {"float64": 1e-12, "float32": 1e-6}

#: sha256 of every golden file's arrays (see :func:`content_digest`): a file
#: regenerated with other content (new torch, new seed, new cases) is noticed.
DIGESTS = {
    "dense_adam_float64": "ba8bcf4bdbe5827b3e358e42b6d4a385407767a71a9bf0805c2d9372f2c891a5",
    "dense_adam_float32": "fa3b9dff36919ce74035920d2d7e2c9676ea10a7db993f6d98913ed80bc1fac0",
    "dormancy_decay_float64": "f847bf689bfd6a492eb2b72fc5215168eedade1c43dadf82081cbcae2bdc7302",
    "dormancy_decay_float32": "d444d688b503b07bbef89171476e74d74237e746498fc52eccc686c6005275d5",
    "lazy_sparse_adam_float64": "923fd84b2eb886a1abc5ac58c507e6fc1fe077b6b01e55d113e33ead577a22ac",
    "lazy_sparse_adam_float32": "262d3d63e2c8d05cd478664058ab2d2eb9f25e61b2e806a7d391e496e5fbc26c",
    "lazy_sparse_adam_table_float64": "04d6678d951f27aa1d6157df612067875276ab80001c8f27833895e70a51563b",
    "lazy_sparse_adam_table_float32": "b96855f9e42a351bedff64b846a7990b89bfdfacf9d450840dff082a603b4e99",
}

#: Hyper-parameters, sizes and array shapes of each case, as the generator wrote them.
CASES = {
    "dense_adam": {
        "hyper": {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "seed_case": 1,
        "num_steps": 30,
        "call": "torch.optim.Adam(",
        "shapes": {"p0": (16,), "grads": (30, 16), "params": (30, 16), "exp_avg": (30, 16), "exp_avg_sq": (30, 16)},
    },
    "dormancy_decay": {
        "hyper": {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "seed_case": 2,
        "num_steps": 30,
        "call": "torch.optim.Adam(",
        "shapes": {
            "p0": (12,),
            "mask": (30, 12),
            "grads": (30, 12),
            "params": (30, 12),
            "exp_avg": (30, 12),
            "exp_avg_sq": (30, 12),
        },
    },
    "lazy_sparse_adam": {
        "hyper": {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-20},
        "seed_case": 3,
        "num_steps": 30,
        "call": "torch.optim.SparseAdam(",
        "shapes": {
            "p0": (20,),
            "grad_offsets": (31,),
            "grad_indices": (130,),
            "grad_values": (130,),
            "params": (30, 20),
            "exp_avg": (30, 20),
            "exp_avg_sq": (30, 20),
        },
    },
    "lazy_sparse_adam_table": {
        "hyper": {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-20},
        "seed_case": 4,
        "num_steps": 20,
        "call": "torch.optim.SparseAdam(",
        "shapes": {
            "p0": (10, 4),
            "lookup_offsets": (21,),
            "row_ids": (75,),
            "row_grads": (75, 4),
            "params": (20, 10, 4),
            "exp_avg": (20, 10, 4),
            "exp_avg_sq": (20, 10, 4),
        },
    },
}
METADATA_KEYS = {"torch_version", "torch_call", "dtype", "lr", "beta1", "beta2", "eps", "seed", "num_steps", "step"}


def load_golden(case: str, dtype: str) -> dict[str, np.ndarray]:
    """Return every array of ``tests/golden/<case>_<dtype>.npz`` (no pickle allowed).

    Parameters
    ----------
    case : str
        A key of :data:`CASES`.
    dtype : str
        "float64" or "float32".

    Returns
    -------
    dict of str to numpy.ndarray
    """
    with np.load(GOLDEN_DIR / f"{case}_{dtype}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def content_digest(golden: dict[str, np.ndarray]) -> str:
    """sha256 over the name, dtype, shape and bytes of every array, by sorted name.

    Unlike a hash of the ``.npz`` file itself, this does not change with the zip
    timestamps, so regenerating identical content gives the same digest.
    """
    h = hashlib.sha256()
    for key in sorted(golden):
        a = golden[key]
        h.update(f"{key}|{a.dtype.str}|{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def assert_step_close(actual: np.ndarray, history: np.ndarray, t: int, what: str, where: object = ...) -> None:
    """Assert ``actual[where]`` matches torch's ``history[t][where]`` (module docstring).

    Parameters
    ----------
    actual : numpy.ndarray
        Our array after step ``t + 1``.
    history : numpy.ndarray
        torch's values after every step, ``(num_steps, *actual.shape)``.
    t : int
        0-based index of the step just taken.
    what : str
        Name for the failure message.
    where : index, optional
        Entries to compare (default: all).
    """
    rtol = RTOL[history.dtype.name]
    running_max = np.max(np.abs(history[: t + 1]), axis=0)[where].astype(np.float64)
    scale = np.where(running_max > 0.0, running_max, 1.0)
    np.testing.assert_allclose(
        actual[where] / scale,
        history[t][where] / scale,
        rtol=rtol,
        atol=rtol,
        err_msg=f"{what} after step {t + 1} (values divided by the running max of torch's |value|)",
    )


def adam_config(golden: dict[str, np.ndarray], mode: so.LazyAdamMode) -> so.SparseAdamConfig:
    """The :class:`so.SparseAdamConfig` with the golden file's hyper-parameters and ``mode``."""
    return so.SparseAdamConfig(
        lr=float(golden["lr"]),
        beta1=float(golden["beta1"]),
        beta2=float(golden["beta2"]),
        eps=float(golden["eps"]),
        mode=mode,
    )


def dense_adam(golden: dict[str, np.ndarray], params: np.ndarray) -> so.DenseAdam:
    """A :class:`so.DenseAdam` over ``params`` with the golden file's hyper-parameters."""
    return so.DenseAdam(
        params,
        lr=float(golden["lr"]),
        beta1=float(golden["beta1"]),
        beta2=float(golden["beta2"]),
        eps=float(golden["eps"]),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_file_is_the_recorded_one(case: str, dtype: str) -> None:
    """Metadata, hyper-parameters, shapes, dtypes and content digest are as generated."""
    golden = load_golden(case, dtype)
    spec = CASES[case]
    assert set(golden) == METADATA_KEYS | set(spec["shapes"])
    assert str(golden["torch_version"]).startswith("2.13.0")
    assert str(golden["torch_call"]).startswith(spec["call"])
    assert str(golden["dtype"]) == dtype
    for name, value in spec["hyper"].items():
        assert golden[name].shape == () and float(golden[name]) == value, name
    assert golden["seed"].tolist() == [20240611, spec["seed_case"]]
    assert int(golden["num_steps"]) == spec["num_steps"]
    np.testing.assert_array_equal(golden["step"], np.arange(1, spec["num_steps"] + 1))
    for name, shape in spec["shapes"].items():
        assert golden[name].shape == shape, name
        if name in ("p0", "grads", "grad_values", "row_grads", "params", "exp_avg", "exp_avg_sq"):
            assert golden[name].dtype == np.dtype(dtype), name
    assert content_digest(golden) == DIGESTS[f"{case}_{dtype}"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_adam_matches_torch_adam(dtype: str) -> None:
    """``so.DenseAdam`` follows ``torch.optim.Adam`` step by step on dense random gradients."""
    golden = load_golden("dense_adam", dtype)
    params = golden["p0"].copy()
    opt = dense_adam(golden, params)
    for t, grad in enumerate(golden["grads"]):
        opt.step(grad)
        assert opt.step_count == golden["step"][t]
        assert_step_close(params, golden["params"], t, "params")
        assert_step_close(opt.m, golden["exp_avg"], t, "m")
        assert_step_close(opt.v, golden["exp_avg_sq"], t, "v")


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_adam_matches_torch_adam_fed_zero_gradients(dtype: str) -> None:
    """The yardstick: ``so.DenseAdam`` fed the dormancy case's zeros follows torch everywhere."""
    golden = load_golden("dormancy_decay", dtype)
    params = golden["p0"].copy()
    opt = dense_adam(golden, params)
    for t, grad in enumerate(golden["grads"]):
        opt.step(grad)
        assert_step_close(params, golden["params"], t, "params")
        assert_step_close(opt.m, golden["exp_avg"], t, "m")
        assert_step_close(opt.v, golden["exp_avg_sq"], t, "v")


def test_dormancy_case_covers_the_interesting_patterns() -> None:
    """The oracle has a coordinate touched every step, a late first touch, gaps > 1 and an untouched one."""
    mask = load_golden("dormancy_decay", "float64")["mask"]
    steps = [np.flatnonzero(column) + 1 for column in mask.T]
    assert mask[:, 0].all()
    assert steps[1].tolist() == [25, 26, 29]
    assert max(np.diff(s).max() for s in steps if s.size > 1) == 29
    assert not mask[:, -1].any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", list(so.LazyAdamMode))
def test_sparse_adam_on_dormancy_case(dtype: str, mode: so.LazyAdamMode) -> None:
    """``so.SparseAdam`` against ``torch.optim.Adam`` fed explicit zeros on the dormant coordinates.

    In ``DORMANCY_DECAY`` mode ``m`` and ``v`` equal torch's at every coordinate
    touched on the step. In both modes a coordinate touched on every step since
    its first touch (or not touched yet) follows torch completely, parameters
    included: before its first touch torch's moments are exactly 0, so its
    parameter does not move either. Other parameters differ by design.
    """
    golden = load_golden("dormancy_decay", dtype)
    params = golden["p0"].copy()
    opt = so.SparseAdam(params, adam_config(golden, mode))
    mask = golden["mask"]
    for t in range(int(golden["num_steps"])):
        touched = np.flatnonzero(mask[t])
        opt.step(so.CooGradient(touched, golden["grads"][t][touched], params.size))
        assert opt.step_count == golden["step"][t]
        np.testing.assert_array_equal(opt.last_step[touched], t + 1)
        first_touch = np.where(mask[: t + 1].any(axis=0), mask[: t + 1].argmax(axis=0), t + 1)
        in_lockstep = np.flatnonzero(mask[: t + 1].sum(axis=0) == t + 1 - first_touch)
        assert in_lockstep.size >= 2  # coordinate 0 (every step) and the last one (never)
        if mode is so.LazyAdamMode.DORMANCY_DECAY:
            assert_step_close(opt.m, golden["exp_avg"], t, "m", touched)
            assert_step_close(opt.v, golden["exp_avg_sq"], t, "v", touched)
        assert_step_close(params, golden["params"], t, "params", in_lockstep)
        assert_step_close(opt.m, golden["exp_avg"], t, "m", in_lockstep)
        assert_step_close(opt.v, golden["exp_avg_sq"], t, "v", in_lockstep)


def test_lazy_mode_is_not_dormancy_decay_after_a_long_gap() -> None:
    """The oracle tells the modes apart: after coordinate 3's gap of 29, LAZY's ``m`` is not torch's."""
    golden = load_golden("dormancy_decay", "float64")
    params = golden["p0"].copy()
    opt = so.SparseAdam(params, adam_config(golden, so.LazyAdamMode.LAZY))
    for grad, touches in zip(golden["grads"], golden["mask"]):
        touched = np.flatnonzero(touches)
        opt.step(so.CooGradient(touched, grad[touched], params.size))
    expected = golden["exp_avg"][-1, 3]
    assert abs(opt.m[3] - expected) > 0.01 * abs(expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lazy_sparse_adam_matches_torch_sparse_adam(dtype: str) -> None:
    """``so.SparseAdam(mode=LAZY)`` follows ``torch.optim.SparseAdam`` on uncoalesced COO gradients.

    Includes a step with nnz 0: torch counts it (``state["step"]``) and so must
    ``step_count``, and nothing else changes on it.
    """
    golden = load_golden("lazy_sparse_adam", dtype)
    params = golden["p0"].copy()
    opt = so.SparseAdam(params, adam_config(golden, so.LazyAdamMode.LAZY))
    offsets = golden["grad_offsets"]
    nnz = np.diff(offsets)
    assert (nnz == 0).sum() == 1
    for t in range(int(golden["num_steps"])):
        part = slice(offsets[t], offsets[t + 1])
        before = params.copy()
        opt.step(so.CooGradient.from_unsorted(golden["grad_indices"][part], golden["grad_values"][part], params.size))
        assert opt.step_count == golden["step"][t]
        if nnz[t] == 0:
            np.testing.assert_array_equal(params, before)
            np.testing.assert_array_equal(golden["params"][t], golden["params"][t - 1])
        assert_step_close(params, golden["params"], t, "params")
        assert_step_close(opt.m, golden["exp_avg"], t, "m")
        assert_step_close(opt.v, golden["exp_avg_sq"], t, "v")


@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_adam_table_matches_torch_sparse_adam_on_embedding(dtype: str) -> None:
    """``so.SparseAdamTable`` follows ``torch.optim.SparseAdam`` on an ``nn.Embedding(sparse=True)`` table.

    The gradient is the lookup's: repeated row ids in any order, fed through
    ``so.CsrGradient.from_rows``; one step looks up nothing.
    """
    golden = load_golden("lazy_sparse_adam_table", dtype)
    params = golden["p0"].copy()
    opt = so.SparseAdamTable(params, adam_config(golden, so.LazyAdamMode.LAZY))
    offsets = golden["lookup_offsets"]
    assert (np.diff(offsets) == 0).sum() == 1
    for t in range(int(golden["num_steps"])):
        part = slice(offsets[t], offsets[t + 1])
        opt.step(so.CsrGradient.from_rows(golden["row_ids"][part], golden["row_grads"][part], params.shape[0]))
        assert opt.step_count == golden["step"][t]
        assert_step_close(params, golden["params"], t, "params")
        assert_step_close(opt.m, golden["exp_avg"], t, "m")
        assert_step_close(opt.v, golden["exp_avg_sq"], t, "v")
