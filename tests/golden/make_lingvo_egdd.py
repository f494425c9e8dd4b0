"""Write the EGDD golden files: trajectories of the real ``lingvo.core.egdd.EGDD``.

Run with the TensorFlow venv, not the project's (TensorFlow is no dependency of
``sparse_opt``)::

    /tmp/venv-tf/bin/python tests/golden/make_lingvo_egdd.py

Set-up of that venv::

    python3 -m venv /tmp/venv-tf
    /tmp/venv-tf/bin/pip install tensorflow-cpu==2.21.0
    /tmp/venv-tf/bin/pip install --no-deps lingvo==0.14.2

``lingvo.core.egdd`` imports nothing but TensorFlow, so ``--no-deps`` is enough
and no import shim is needed.

How lingvo is run: TF1 graph mode through ``tf.compat.v1`` with
``disable_v2_behavior()`` (so ``tf.Variable`` is a ``RefVariable``), one
``Session``, one ``apply_gradients`` op fed through placeholders -- exactly the
set-up of lingvo's own ``egdd_test.py``. lingvo's EGDD is float32 only (its
``lr_scale`` and ``counter`` slots are created as float32 whatever the variable's
dtype, so a float64 variable fails with a dtype error in ``Mul``) and refuses
0-d variables (the ``counter`` slot has shape ``(1,)``, which makes the two
branches of the ``use_signs`` select differ in rank), so every golden is float32
with 1-d to 3-d variables.

A step in which a variable gets no gradient is run with a second
``apply_gradients`` op over the other variables only (slots are shared), which is
what ``apply_gradients`` does with a ``None`` gradient.

Each case goes to ``lingvo_egdd_<case>.npz`` (load with ``allow_pickle=False``):

- metadata: ``case``, ``tf_version``, ``lingvo_version``, ``numpy_version``,
  ``mode``, ``steps``, ``num_vars`` (the seeds are in this script);
- the 13 constructor options of EGDD under their own names;
- ``mask``: ``(steps, num_vars)`` bool, whether variable ``j`` got a gradient;
- per variable ``j``: ``grad.{j}`` ``(steps, *shape)`` (zeros where masked out)
  and, with row 0 the initial value and row ``t`` the value after step ``t``,
  ``var.{j}``, ``momentum.{j}``, ``gbar.{j}``, ``gain.{j}`` ``(steps + 1, *shape)``
  and ``lr_scale.{j}``, ``counter.{j}`` ``(steps + 1,)`` (lingvo's ``(1,)`` slots).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

from lingvo.core import egdd  # noqa: E402  (must follow disable_v2_behavior)

OUT_DIR = Path(__file__).resolve().parent
SLOTS = ("momentum", "gbar", "gain", "lr_scale", "counter")
DEFAULTS: dict[str, float | bool] = {
    "beta": 0.9,
    "gain_learning_rate": 0.01,
    "scale_learning_rate": 0.001,
    "initial_gain": 1.0,
    "min_gain": 0.01,
    "max_gain": 100.0,
    "initial_scale": 1.0,
    "min_scale": 0.1,
    "max_scale": 10.0,
    "use_directions": True,
    "use_signs": True,
}

GradFn = Callable[[np.random.Generator, int, tuple[int, ...]], np.ndarray]


@dataclasses.dataclass
class Case:
    """One golden trajectory: variables, options, gradient stream, skip schedule."""

    name: str
    init: list[np.ndarray]
    options: dict[str, float | bool]
    grads: list[list[np.ndarray]]  # grads[t][j]
    mask: np.ndarray  # (steps, num_vars) bool


def noisy(mean: float, spread: float) -> GradFn:
    """Gradients ``mean + spread * N(0, 1)``, about 10% of entries exactly zero."""

    def make(rng: np.random.Generator, t: int, shape: tuple[int, ...]) -> np.ndarray:
        g = mean + spread * rng.standard_normal(shape)
        g[rng.random(shape) < 0.1] = 0.0
        return g

    return make


def alternating(per_entry: bool, scale: float) -> GradFn:
    """Gradients whose sign flips every step.

    With ``per_entry`` only every other entry flips (the rest keep a steady +1
    sign), so one tensor pushes some gains up and the others down.
    """

    def make(rng: np.random.Generator, t: int, shape: tuple[int, ...]) -> np.ndarray:
        mag = scale * (1.0 + 0.2 * rng.random(shape))
        flip = np.full(shape, -1.0 if t % 2 else 1.0)
        if per_entry:
            flip.reshape(-1)[1::2] = 1.0
        return mag * flip

    return make


def make_case(
    name: str,
    seed: int,
    shapes: list[tuple[int, ...]],
    options: dict[str, float | bool],
    grad_fn: GradFn,
    steps: int = 20,
    skips: dict[int, list[int]] | None = None,
    zero_steps: dict[int, list[int]] | None = None,
) -> Case:
    """Draw a seeded case; ``skips``/``zero_steps`` map a step to variables that get
    no gradient / an all-zero gradient at that step."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mask = np.ones((steps, len(shapes)), dtype=bool)
    for t, js in (skips or {}).items():
        mask[t, js] = False
    grads = []
    for t in range(steps):
        row = []
        for j, s in enumerate(shapes):
            g = grad_fn(rng, t, s).astype(np.float32)
            if not mask[t, j] or j in (zero_steps or {}).get(t, []):
                g = np.zeros(s, np.float32)
            row.append(g)
        grads.append(row)
    return Case(name, init, {**DEFAULTS, **options}, grads, mask)


def cases() -> list[Case]:
    """Every golden case (see the module docstring)."""
    out = []
    # lingvo's own unit test (egdd_test.py), both gain rules.
    for signs in (False, True):
        unit = {"learning_rate": 0.1, "momentum": 0.9, "beta": 0.1, "gain_learning_rate": 1e-2,
                "scale_learning_rate": 1e-3, "use_signs": signs}
        grads = [[np.array([0.1, -0.5], np.float32)], [np.array([-1.0, -1.5], np.float32)]]
        out.append(Case(f"unit_signs{int(signs)}", [np.array([0.5, 1.0], np.float32)],
                        {**DEFAULTS, **unit}, grads, np.ones((2, 1), bool)))
    # lingvo's defaults for everything but the two required arguments.
    out.append(make_case("defaults", 1, [(5,), (4, 3)], {"learning_rate": 0.01, "momentum": 0.9},
                         noisy(0.3, 1.0)))
    # All four combinations of use_signs x use_directions on 1-d, 2-d and 3-d
    # variables, with skipped steps and all-zero gradients.
    shapes = [(7,), (3, 4), (2, 3, 4)]
    for k, (signs, dirs) in enumerate([(s, d) for s in (True, False) for d in (True, False)]):
        opts = {"learning_rate": 0.05, "momentum": 0.9, "beta": 0.8, "gain_learning_rate": 0.05,
                "scale_learning_rate": 0.02, "use_signs": signs, "use_directions": dirs}
        out.append(make_case(f"signs{int(signs)}_dirs{int(dirs)}", 10 + k, shapes, opts,
                             noisy(0.4, 1.0), skips={5: [1], 11: [1, 2], 12: [0]},
                             zero_steps={7: [0], 8: [2]}))
    # Clipping: steady gradients drive lr_scale to max_scale and the steady
    # entries' gains to max_gain, while the flipping entries' gains fall to min_gain.
    clip = {"learning_rate": 0.05, "momentum": 0.5, "gain_learning_rate": 0.4, "min_gain": 0.3,
            "max_gain": 2.0, "scale_learning_rate": 0.5, "min_scale": 0.4, "max_scale": 2.5}
    out.append(make_case("clip_high", 20, shapes, {**clip, "use_signs": True, "use_directions": True},
                         alternating(per_entry=True, scale=1.0)))
    # Whole tensors that flip every step drive lr_scale down to min_scale.
    out.append(make_case("clip_low", 21, shapes, {**clip, "use_signs": False, "use_directions": True},
                         alternating(per_entry=False, scale=1.0)))
    # Raw (unnormalised) updates with large gradients: exp overflows to inf and
    # underflows to 0 in float32, and clip_by_value turns those into the bounds.
    big = {"learning_rate": 0.001, "momentum": 0.9, "gain_learning_rate": 1.0, "min_gain": 0.05,
           "max_gain": 20.0, "scale_learning_rate": 1.0, "min_scale": 0.2, "max_scale": 5.0,
           "use_signs": False, "use_directions": False}
    out.append(make_case("overflow", 22, shapes, big, noisy(0.0, 300.0)))
    return out


def run(case: Case) -> dict[str, np.ndarray]:
    """Run lingvo's EGDD over ``case``; return the golden arrays."""
    steps, num_vars = case.mask.shape
    rec: dict[str, list[np.ndarray]] = {f"{k}.{j}": [] for k in ("var", *SLOTS) for j in range(num_vars)}
    with tf.Graph().as_default(), tf.Session() as sess:
        variables = [tf.Variable(v, name=f"var{j}") for j, v in enumerate(case.init)]
        feeds = [tf.placeholder(tf.float32, shape=v.shape) for v in case.init]
        opt = egdd.EGDD(**case.options)
        train_ops: dict[tuple[bool, ...], tf.Operation] = {}
        for row in {tuple(bool(b) for b in r) for r in case.mask}:
            pairs = [(feeds[j], variables[j]) for j in range(num_vars) if row[j]]
            train_ops[row] = opt.apply_gradients(pairs)
        sess.run(tf.global_variables_initializer())
        fetch = {f"var.{j}": v for j, v in enumerate(variables)}
        fetch.update({f"{s}.{j}": opt.get_slot(v, s) for s in SLOTS for j, v in enumerate(variables)})

        def record() -> None:
            for k, val in sess.run(fetch).items():
                rec[k].append(val.reshape(-1) if k.startswith(("lr_scale", "counter")) else val)

        record()
        for t in range(steps):
            row = tuple(bool(b) for b in case.mask[t])
            sess.run(train_ops[row], {feeds[j]: case.grads[t][j] for j in range(num_vars) if row[j]})
            record()
    out = {k: np.stack(v) for k, v in rec.items()}
    for k in ("lr_scale", "counter"):
        for j in range(num_vars):
            out[f"{k}.{j}"] = out[f"{k}.{j}"][:, 0]
    for j in range(num_vars):
        out[f"grad.{j}"] = np.stack([case.grads[t][j] for t in range(steps)])
    return out


def main() -> None:
    meta = {
        "tf_version": tf.__version__,
        "lingvo_version": importlib.metadata.version("lingvo"),
        "numpy_version": np.__version__,
        "mode": "TF1 graph mode: tf.compat.v1, disable_v2_behavior(), RefVariable, Session",
    }
    for case in cases():
        arrays = run(case)
        steps, num_vars = case.mask.shape
        payload = {
            **{k: np.array(v) for k, v in meta.items()},
            "case": np.array(case.name),
            "steps": np.array(steps),
            "num_vars": np.array(num_vars),
            "mask": case.mask,
            **{k: np.array(v) for k, v in case.options.items()},
            **arrays,
        }
        path = OUT_DIR / f"lingvo_egdd_{case.name}.npz"
        np.savez_compressed(path, **payload)
        print(f"{path.name}: {steps} steps, shapes {[v.shape for v in case.init]}, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
