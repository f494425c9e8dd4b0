"""torch's optimizers as contenders: ``torch.optim.SparseAdam`` and dense ``torch.optim.Adam``.

They plug into :func:`sparse_opt.demos.timing.time_steps` like the
``sparse_opt`` contenders (:mod:`sparse_opt.demos.contenders`): same
workload, same unit of work (build the gradient torch's way from one lookup,
then step). torch is imported only by :func:`load_torch`, and only here.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import numpy as np

from sparse_opt.demos.contenders import Contender, Stepper

SPARSE_ADAM = "torch SparseAdam"
DENSE_ADAM = "torch Adam (dense)"


def load_torch() -> ModuleType | None:
    """``torch`` if it can be imported here, else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    return importlib.import_module("torch")


def torch_contenders(torch: ModuleType | None, dense: bool = True) -> list[Contender]:
    """``torch.optim.SparseAdam`` and, if ``dense``, ``torch.optim.Adam``; empty when ``torch`` is None.

    SparseAdam gets what ``nn.Embedding(sparse=True)`` produces: an uncoalesced
    ``sparse_coo_tensor`` with the looked-up ids (repeats included) as indices
    and one gradient row per lookup; its ``step`` coalesces it. Adam gets the
    dense gradient of ``nn.Embedding(sparse=False)``: the rows scatter-added
    (``index_add_``) into a zero table. Both run with torch's defaults (lr
    1e-3, betas 0.9 / 0.999, eps 1e-8; on CPU, Adam's single-tensor
    implementation) and its current number of threads.
    """
    if torch is None:
        return []

    def sparse_adam(table: np.ndarray) -> Stepper:
        weight = torch.nn.Parameter(torch.from_numpy(table))
        opt = torch.optim.SparseAdam([weight])
        shape = tuple(table.shape)

        def gradient(ids: np.ndarray, g: np.ndarray) -> Any:
            indices = torch.from_numpy(ids).unsqueeze(0)
            return torch.sparse_coo_tensor(indices, torch.from_numpy(g), shape, check_invariants=False)

        return Stepper(gradient, lambda grad: _step(weight, opt, grad), lambda: _state(opt), opt)

    def adam(table: np.ndarray) -> Stepper:
        weight = torch.nn.Parameter(torch.from_numpy(table))
        opt = torch.optim.Adam([weight])

        def gradient(ids: np.ndarray, g: np.ndarray) -> Any:
            return torch.zeros_like(weight).index_add_(0, torch.from_numpy(ids), torch.from_numpy(g))

        return Stepper(gradient, lambda grad: _step(weight, opt, grad), lambda: _state(opt), opt)

    out = [Contender(SPARSE_ADAM, "torch", False, sparse_adam)]
    if dense:
        out.append(Contender(DENSE_ADAM, "torch", True, adam))
    return out


def _step(weight: Any, opt: Any, grad: Any) -> None:
    weight.grad = grad
    opt.step()


def _state(opt: Any) -> list[Any]:
    return [t for state in opt.state.values() for t in state.values() if hasattr(t, "numel") and t.dim() > 0]
