"""Record the real libraries' runs of the conformance scenarios, so tests and notebooks need no torch or TF.

Run it with every interpreter that has one of the libraries; each records the
adapters whose library it can import and leaves the other files alone::

    /work/venvs/torch/bin/python tests/conformance/make_recordings.py   # torch 2.13.0, fbgemm-gpu-cpu 1.8.0
    /work/venvs/tf/bin/python tests/conformance/make_recordings.py      # tensorflow-cpu 2.21.0

Each adapter of :mod:`sparse_opt.conformance.adapters.torch_optim`,
:mod:`...fbgemm` and :mod:`...tf_kernels` goes through every scenario of its
family (in its ``form``: the FBGEMM adapters take the kernel form, and are
written to ``fbgemm/``, the TorchRec ones to ``torchrec/``, apart from the
catalogue's recordings); its runs
(trajectories, skipped scenarios with the reason, errors, the scenarios'
fingerprints, the library versions) are written to ``<AdapterClass>.npz`` here
by :meth:`sparse_opt.conformance.Recording.save`. The scenarios are
deterministic, so a rerun on the same machine rewrites nothing and prints
``unchanged``; a changed scenario changes its fingerprint and the file.
``tests/test_conformance_libraries.py`` checks the recorded verdicts with numpy
only, and re-runs the libraries live where they import. The torch adapters take
learning-rate schedules (``LambdaLR``), and so does TorchRec's ``WarmupOptimizer``
(``TorchrecSgdWarmup``), so their recordings include the schedule scenarios;
the other FBGEMM, TorchRec and TensorFlow adapters take a constant rate, and
theirs are made (and judged) without them.

FBGEMM's CPU TBE (``fbgemm-gpu-cpu==1.8.0``, the build that loads beside
torch 2.13.0) is recorded when ``fbgemm_gpu`` imports; its GPU-only optimizers
(Adam variants) and HugeCTR (CUDA only) are not: their references are modelled
from published source.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from sparse_opt.conformance import Recording, record

OUT_DIR = Path(__file__).resolve().parent


def _same(path: Path, new: Recording) -> bool:
    if not path.exists():
        return False
    old = Recording.load(path)
    if (old.candidate, old.family, old.claims, old.versions, old.form) != (
        new.candidate, new.family, new.claims, new.versions, new.form
    ):
        return False
    if old.runs.keys() != new.runs.keys():
        return False
    for name, run in new.runs.items():
        was = old.runs[name]
        if (was.fingerprint, was.skipped, was.error) != (run.fingerprint, run.skipped, run.error):
            return False
        if (was.trajectory is None) != (run.trajectory is None):
            return False
        if run.trajectory is not None and not np.array_equal(was.trajectory, run.trajectory):
            return False
    return True


def _versions(*modules: str) -> dict[str, str]:
    return {m: importlib.import_module(m).__version__ for m in ("numpy",) + modules}


def main() -> None:
    groups = []
    if importlib.util.find_spec("torch"):
        from sparse_opt.conformance.adapters import torch_optim

        groups.append((torch_optim.CANDIDATES, _versions("torch"), ""))
    if importlib.util.find_spec("torch") and importlib.util.find_spec("fbgemm_gpu"):
        from sparse_opt.conformance.adapters import fbgemm

        groups.append((fbgemm.CANDIDATES, _versions("torch", "fbgemm_gpu"), "fbgemm"))
    if importlib.util.find_spec("torch") and importlib.util.find_spec("torchrec"):
        from sparse_opt.conformance.adapters import torchrec

        groups.append((torchrec.CANDIDATES, _versions("torch", "fbgemm_gpu", "torchrec"), "torchrec"))
    if importlib.util.find_spec("tensorflow"):
        from sparse_opt.conformance.adapters import tf_kernels

        groups.append((tf_kernels.CANDIDATES, _versions("tensorflow", "keras"), ""))
    if not groups:
        raise SystemExit("neither torch nor tensorflow is importable: nothing to record")
    for candidates, versions, folder in groups:
        for candidate in candidates:
            recording = record(candidate, versions=versions)
            path = OUT_DIR / folder / f"{candidate.__name__}.npz"
            path.parent.mkdir(exist_ok=True)
            if _same(path, recording):
                print(f"unchanged  {path.name}")
                continue
            recording.save(path)
            skipped = {n: r.skipped for n, r in recording.runs.items() if r.skipped}
            print(f"wrote      {path.name}  ({len(recording.runs) - len(skipped)} runs; skipped {json.dumps(skipped)})")


if __name__ == "__main__":
    main()
