"""``torch.optim`` behind the candidate protocol (torch is imported when an adapter is built).

Sparse-gradient optimizers (``SparseAdam``, ``Adagrad``, ``SGD`` with a sparse
gradient) get the real thing: the gradient of ``nn.Embedding(sparse=True)``
(uncoalesced, one row per lookup, in lookup order) from ``loss = (emb(ids) *
row_grads).sum()``, or, for incomplete rows, a 2-D sparse COO tensor with one
entry per present value. Dense optimizers (``Adam``, ``AdamW``, ``SGD``) get
the dense gradient: repeated lookups summed, zero on the rows not looked up
(what a dense embedding's backward pass produces). The CPU single-tensor path
is pinned (``foreach=False``; it is torch's CPU default). Hyper-parameters an
optimizer lacks (``weight_decay`` for SparseAdam and sparse Adagrad, where
torch raises) make the adapter raise ``NotImplementedError``: the scenario is
skipped.

Every adapter takes learning-rate schedules (``schedules = True``) the way the
SPEC states torch equivalence: on a scenario with a schedule the optimizer is
built with base lr ``1.0`` and driven by
``torch.optim.lr_scheduler.LambdaLR(opt, lambda e: rate(e + 1))``, stepped as
``opt.step(); sched.step()`` (the ``t``-th ``opt.step()`` runs at epoch
``t - 1``, rate ``lr_t``; the scheduler's step after the last ``opt.step()``
asks for epoch ``T``, whose rate no step uses: it is given the last step's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from sparse_opt.conformance.hyper import Hyper
from sparse_opt.interop import require


def _torch() -> Any:
    return require("torch", "torch", "The torch adapters")


class _TorchCandidate:
    """A torch optimizer over one ``(rows, cols)`` parameter; subclasses build it in :meth:`_build`."""

    family: ClassVar[str]
    name: ClassVar[str]
    #: Feed the gradient of ``nn.Embedding(sparse=True)`` (else the dense gradient).
    sparse: ClassVar[bool] = False
    schedules: ClassVar[bool] = True

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        torch = self._t = _torch()
        self._emb = torch.nn.Embedding.from_pretrained(torch.from_numpy(np.array(table)), freeze=False, sparse=True)
        self._weight = self._emb.weight
        rates = hyper.schedule
        self._opt = self._build(torch, self._weight, replace(hyper, lr=1.0, schedule=()) if rates else hyper)
        self._sched = None
        if rates:
            self._sched = torch.optim.lr_scheduler.LambdaLR(self._opt, lambda e: rates[min(e, len(rates) - 1)])

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        raise NotImplementedError

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        torch = self._t
        self._opt.zero_grad(set_to_none=True)
        if self.sparse:
            rows = self._emb(torch.from_numpy(np.array(row_ids)))
            (rows * torch.from_numpy(np.array(row_grads))).sum().backward()
        else:
            grad = np.zeros(tuple(self._weight.shape), dtype=row_grads.dtype)
            np.add.at(grad, row_ids, row_grads)
            self._weight.grad = torch.from_numpy(grad)
        self._step()

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        torch = self._t
        shape = tuple(self._weight.shape)
        if self.sparse:
            indices = torch.from_numpy(np.stack([rows, cols]))
            self._weight.grad = torch.sparse_coo_tensor(
                indices, torch.from_numpy(np.array(values)), shape, check_invariants=True
            )
        else:
            grad = np.zeros(shape, dtype=values.dtype)
            np.add.at(grad, (rows, cols), values)
            self._weight.grad = torch.from_numpy(grad)
        self._step()

    def _step(self) -> None:
        # torch's own default (no invariant checks on the sparse tensors it builds), stated so it does not warn
        with self._t.sparse.check_sparse_tensor_invariants(enable=False):
            self._opt.step()
        if self._sched is not None:
            self._sched.step()

    def table(self) -> np.ndarray:
        return self._weight.detach().numpy().copy()


class TorchSparseAdam(_TorchCandidate):
    """``torch.optim.SparseAdam`` fed ``nn.Embedding(sparse=True)`` gradients."""

    family, claims, name, sparse = "adam", "sparse_adam", "torch.optim.SparseAdam", True

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        if hyper.weight_decay:
            raise NotImplementedError("torch.optim.SparseAdam has no weight_decay")
        return torch.optim.SparseAdam([weight], lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps,
                                      maximize=hyper.maximize)


class TorchAdam(_TorchCandidate):
    """``torch.optim.Adam`` (``weight_decay`` is coupled L2) fed dense gradients."""

    family, claims, name = "adam", "dense_l2", "torch.optim.Adam"

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        return torch.optim.Adam([weight], lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps,
                                weight_decay=hyper.weight_decay, maximize=hyper.maximize, foreach=False)


class TorchAdamW(_TorchCandidate):
    """``torch.optim.AdamW`` (decoupled decay) fed dense gradients."""

    family, claims, name = "adam", "dense_adamw", "torch.optim.AdamW"

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        return torch.optim.AdamW([weight], lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps,
                                 weight_decay=hyper.weight_decay, maximize=hyper.maximize, foreach=False)


class TorchAdagrad(_TorchCandidate):
    """``torch.optim.Adagrad`` fed ``nn.Embedding(sparse=True)`` gradients."""

    family, claims, name, sparse = "adagrad", "adagrad", "torch.optim.Adagrad (sparse)", True

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        if hyper.weight_decay:
            raise NotImplementedError("torch.optim.Adagrad refuses weight_decay with sparse gradients")
        return torch.optim.Adagrad([weight], lr=hyper.lr, lr_decay=hyper.lr_decay, eps=hyper.eps,
                                   initial_accumulator_value=hyper.initial_accumulator_value,
                                   maximize=hyper.maximize, foreach=False)


def _sgd(torch: Any, weight: Any, hyper: Hyper) -> Any:
    return torch.optim.SGD([weight], lr=hyper.lr, momentum=hyper.momentum, dampening=0.0,
                           weight_decay=hyper.weight_decay, nesterov=False, maximize=hyper.maximize, foreach=False)


class TorchSgd(_TorchCandidate):
    """``torch.optim.SGD`` (momentum, coupled decay, no dampening) fed dense gradients."""

    family, claims, name = "sgd", "sgd_dense", "torch.optim.SGD"

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        return _sgd(torch, weight, hyper)


class TorchSgdSparse(_TorchCandidate):
    """``torch.optim.SGD`` fed ``nn.Embedding(sparse=True)`` gradients (no claim: torch documents none).

    With momentum the buffer becomes a sparse tensor over every row ever touched
    and decays on every step, so the touched rows follow dense SGD. The buffer
    keeps the first gradient's layout: a later gradient of the other layout
    (incomplete rows after complete ones) makes ``step`` raise.
    """

    family, claims, name, sparse = "sgd", None, "torch.optim.SGD (sparse gradients)", True

    def _build(self, torch: Any, weight: Any, hyper: Hyper) -> Any:
        if hyper.weight_decay:
            raise NotImplementedError("torch.optim.SGD refuses weight_decay with sparse gradients")
        return _sgd(torch, weight, hyper)


#: Every torch adapter.
CANDIDATES: tuple[type, ...] = (TorchSparseAdam, TorchAdam, TorchAdamW, TorchAdagrad, TorchSgd, TorchSgdSparse)
