"""FBGEMM's table-batched embedding (TBE) CPU optimizers behind the candidate protocol, run live.

Each adapter builds ``SplitTableBatchedEmbeddingBagsCodegen`` with one table on
the host (``EmbeddingLocation.HOST``, ``ComputeDevice.CPU``), copies the
scenario's table into its weights, and runs every step as what training does
with it: the step's ids as a TBE lookup of that single table (``indices`` the
ids in lookup order, ``offsets`` one id per bag; pooling ``NONE``, or ``SUM``
over one id per bag, the same gradient), ``loss = (out * row_grads).sum()``
and ``loss.backward()``, whose fused backward applies the optimizer update to
the looked-up rows (the CPU ops end in ``_function_cpu`` / ``_pt2``). An empty
step is a lookup of no id (an empty batch with pooling ``NONE``, one empty bag
with ``SUM``). torch and fbgemm_gpu are imported when an adapter is built;
``fbgemm-gpu-cpu==1.8.0`` loads beside ``torch==2.13.0`` (1.9.0 needs 2.14).

The TBE takes float32 or fp16 weights whose width is a multiple of 4, so the
adapters are kernel-form candidates (``form = "kernel"``: judged on
:func:`~sparse_opt.conformance.catalogue.kernel_scenarios`; the fp16 ones
``form = "half"``, on its float16 twin); a table of another dtype or width is
refused with ``NotImplementedError``. What the TBE
has no parameter for is refused the same way (the scenario is skipped):
``lr_decay``; momentum for ``EXACT_SGD``. ``maximize`` has no TBE flag either:
the adapter back-propagates the negated loss, what a user who maximizes does.
``initial_accumulator_value`` is written into the optimizer state before the
first step. Incomplete rows (``step_entries``) go in as whole rows with a zero
where an entry is absent: a TBE gradient is a row per lookup. Stochastic
rounding is off (the CPU path ignores it anyway).

Measured with the live kernels (``tests/test_conformance_fbgemm.py``):
``EXACT_SGD`` and ``EXACT_ADAGRAD`` accept ``weight_decay`` in modes ``L2`` and
``DECOUPLE`` and do not apply it (their templates have no decay argument);
``EXACT_ROWWISE_ADAGRAD`` applies ``L2`` and ``DECOUPLE`` as its source says and
ignores ``COUNTER``; ``DECOUPLE_GLOBAL`` fails on CPU (no ``gwd`` CPU operator);
``EMAINPLACE_ROWWISE_ADAGRAD`` is row-wise Adagrad plus, every ``step_ema``
(10) iterations, ``slow half of each row += 0.6 * (fast half - slow half)``
over the whole table, which no reference models. With fp16 weights (fp32
state) the kernels are the same update with the weights rounded to fp16 after
it (a numpy replay matches the recordings bit for bit; ``EXACT_SGD`` and
``EXACT_ADAGRAD`` write ``weights[d] -= update`` on a ``c10::Half``, which rounds
the update to fp16 before subtracting it). Those adapters are judged on the
half form (``form = "half"``, float16 tables: see
:mod:`~sparse_opt.conformance.catalogue`), whose references round the weights
once where written, as the kit's float16 optimizers do: ``EXACT_ROWWISE_ADAGRAD``
matches ``rowwise_adagrad`` bit for bit, ``EXACT_SGD`` (dyadic updates, exact in
fp16) ``sgd_lazy`` bit for bit, and ``EXACT_ADAGRAD`` ``adagrad`` within one fp16
ulp (its double rounding flips one write the other way in 3 of 6 scenarios,
half the tolerance): the same verdicts as with fp32 weights. ``ADAM``,
``PARTIAL_ROWWISE_ADAM`` and ``LAMB`` raise "not supported in CPU mode": their
references stay modelled from source.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sparse_opt.conformance.hyper import Hyper
from sparse_opt.interop import require

#: The recorded versions (``fbgemm-gpu-cpu`` 1.8.0 is the build that loads beside torch 2.13.0).
VERSIONS = {"torch": "2.13.0", "fbgemm_gpu": "1.8.0"}


def _modules() -> tuple[Any, Any]:
    torch = require("torch", "torch", "The FBGEMM adapters")
    require("fbgemm_gpu", "fbgemm-gpu-cpu", "The FBGEMM adapters")
    import fbgemm_gpu.split_table_batched_embeddings_ops_training as tbe

    return torch, tbe


class _FbgemmTbe:
    """One FBGEMM TBE table trained by its fused backward; subclasses set the optimizer and options."""

    family: ClassVar[str]
    name: ClassVar[str]
    form: ClassVar[str] = "kernel"
    #: ``EmbOptimType`` member name.
    optimizer: ClassVar[str]
    #: ``WeightDecayMode`` member name.
    decay_mode: ClassVar[str] = "NONE"
    #: ``SparseType`` of the weights: ``"FP32"`` or ``"FP16"``.
    precision: ClassVar[str] = "FP32"
    #: ``PoolingMode`` member name: ``"NONE"`` or ``"SUM"`` (one id per bag).
    pooling: ClassVar[str] = "NONE"

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        rows, cols = table.shape
        dtype, form = (np.float16, "half") if self.precision == "FP16" else (np.float32, "kernel")
        if table.dtype != dtype or cols % 4:
            raise NotImplementedError(
                f"{self.name} takes {np.dtype(dtype).name} weights of a width that is a multiple of 4, got "
                f"{table.dtype} {table.shape}: use the {form} form"
            )
        if hyper.lr_decay:
            raise NotImplementedError(f"{self.name} has no lr_decay")
        if self.optimizer == "EXACT_SGD" and hyper.momentum:
            raise NotImplementedError(f"{self.name} has no momentum")
        if hyper.weight_decay and self.decay_mode == "NONE":
            raise NotImplementedError(f"{self.name} is built without a weight-decay mode")
        torch, tbe = self._t, self._tbe = _modules()
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

        options: dict[str, Any] = {}
        if self.decay_mode == "COUNTER":
            options["counter_based_regularization"] = tbe.CounterBasedRegularizationDefinition(
                counter_weight_decay_mode=tbe.CounterWeightDecayMode.DECOUPLE
            )
        if self.decay_mode == "DECOUPLE_GLOBAL":
            options["global_weight_decay"] = tbe.GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0)
        self._emb = tbe.SplitTableBatchedEmbeddingBagsCodegen(
            [(rows, cols, tbe.EmbeddingLocation.HOST, tbe.ComputeDevice.CPU)],
            optimizer=EmbOptimType[self.optimizer],
            learning_rate=hyper.lr,
            eps=hyper.eps,
            weight_decay=hyper.weight_decay,
            weight_decay_mode=tbe.WeightDecayMode[self.decay_mode],
            weights_precision=SparseType[self.precision],
            pooling_mode=PoolingMode[self.pooling],
            stochastic_rounding=False,
            **options,
        )
        self._sign = -1.0 if hyper.maximize else 1.0
        with torch.no_grad():
            self._emb.split_embedding_weights()[0].copy_(torch.from_numpy(np.array(table)))
            if hyper.initial_accumulator_value:
                for state in self._emb.split_optimizer_states()[0]:
                    state.fill_(hyper.initial_accumulator_value)

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        torch = self._t
        n = row_ids.size
        ids = torch.from_numpy(np.array(row_ids, dtype=np.int64))
        if self.pooling == "SUM":
            offsets = torch.arange(n + 1, dtype=torch.int64) if n else torch.zeros(2, dtype=torch.int64)
        else:
            offsets = torch.arange(n + 1, dtype=torch.int64)
        out = self._emb(ids, offsets)
        grads = torch.from_numpy(np.array(row_grads, dtype=np.float32))
        if n == 0:
            grads = torch.zeros(tuple(out.shape), dtype=torch.float32)
        (self._sign * (out * grads).sum()).backward()

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        """Incomplete rows: each looked-up row once, a zero where an entry is absent (a TBE gradient is whole rows)."""
        ids, where = np.unique(rows, return_inverse=True)
        grads = np.zeros((ids.size, self._emb.split_embedding_weights()[0].shape[1]), dtype=np.float32)
        np.add.at(grads, (where, cols), values)
        self.step(ids, grads)

    def table(self) -> np.ndarray:
        return self._emb.split_embedding_weights()[0].detach().float().numpy().copy()


class FbgemmExactSgd(_FbgemmTbe):
    """``EXACT_SGD``: ``p = p - lr * g`` on the looked-up rows, repeated ids summed; no momentum."""

    family, claims, name, optimizer = "sgd", "sgd_lazy", "FBGEMM TBE EXACT_SGD", "EXACT_SGD"


class FbgemmExactSgdL2(FbgemmExactSgd):
    """``EXACT_SGD`` with ``weight_decay_mode = L2`` (a coupled decay on the looked-up rows is what it asks for)."""

    claims, name, decay_mode = "sgd_lazy", "FBGEMM TBE EXACT_SGD, L2", "L2"


class FbgemmExactSgdDecouple(FbgemmExactSgd):
    """``EXACT_SGD`` with ``weight_decay_mode = DECOUPLE`` (no reference models decoupled SGD: no claim)."""

    claims, name, decay_mode = None, "FBGEMM TBE EXACT_SGD, DECOUPLE", "DECOUPLE"


class FbgemmExactAdagrad(_FbgemmTbe):
    """``EXACT_ADAGRAD``: element-wise Adagrad on the looked-up rows."""

    family, claims, name, optimizer = "adagrad", "adagrad", "FBGEMM TBE EXACT_ADAGRAD", "EXACT_ADAGRAD"


class FbgemmExactAdagradL2(FbgemmExactAdagrad):
    """``EXACT_ADAGRAD`` with ``weight_decay_mode = L2``."""

    claims, name, decay_mode = "adagrad_l2", "FBGEMM TBE EXACT_ADAGRAD, L2", "L2"


class FbgemmExactAdagradDecouple(FbgemmExactAdagrad):
    """``EXACT_ADAGRAD`` with ``weight_decay_mode = DECOUPLE`` (no element-wise decoupled reference: no claim)."""

    claims, name, decay_mode = None, "FBGEMM TBE EXACT_ADAGRAD, DECOUPLE", "DECOUPLE"


class FbgemmRowwiseAdagrad(_FbgemmTbe):
    """``EXACT_ROWWISE_ADAGRAD``: one accumulator per row, the mean of the row's squared gradient."""

    family, claims, name = "adagrad", "rowwise_adagrad", "FBGEMM TBE EXACT_ROWWISE_ADAGRAD"
    optimizer = "EXACT_ROWWISE_ADAGRAD"


class FbgemmRowwiseAdagradSum(FbgemmRowwiseAdagrad):
    """:class:`FbgemmRowwiseAdagrad` with ``pooling_mode = SUM`` over bags of one id."""

    name, pooling = "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, SUM pooling", "SUM"


class FbgemmRowwiseAdagradL2(FbgemmRowwiseAdagrad):
    """``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = L2``."""

    claims, name, decay_mode = "rowwise_l2", "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, L2", "L2"


class FbgemmRowwiseAdagradDecouple(FbgemmRowwiseAdagrad):
    """``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = DECOUPLE``."""

    claims, name, decay_mode = "rowwise_decoupled", "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, DECOUPLE", "DECOUPLE"


class FbgemmRowwiseAdagradCounter(FbgemmRowwiseAdagrad):
    """``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = COUNTER`` (counter mode ``DECOUPLE``, defaults otherwise)."""

    claims, name, decay_mode = "rowwise_counter", "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, COUNTER", "COUNTER"


class FbgemmRowwiseAdagradDecoupleGlobal(FbgemmRowwiseAdagrad):
    """``EXACT_ROWWISE_ADAGRAD`` with ``weight_decay_mode = DECOUPLE_GLOBAL`` (``global_weight_decay`` from step 0)."""

    claims, name, decay_mode = "rowwise_decoupled", "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, DECOUPLE_GLOBAL", "DECOUPLE_GLOBAL"


class FbgemmEmaInplaceRowwiseAdagrad(FbgemmRowwiseAdagrad):
    """``EMAINPLACE_ROWWISE_ADAGRAD`` with the default ``EmainplaceModeDefinition`` (module docstring)."""

    claims, name = None, "FBGEMM TBE EMAINPLACE_ROWWISE_ADAGRAD"
    optimizer = "EMAINPLACE_ROWWISE_ADAGRAD"


class FbgemmExactSgdFp16(FbgemmExactSgd):
    """:class:`FbgemmExactSgd` with fp16 weights, judged on the half form."""

    name, precision, form = "FBGEMM TBE EXACT_SGD, fp16 weights", "FP16", "half"


class FbgemmExactAdagradFp16(FbgemmExactAdagrad):
    """:class:`FbgemmExactAdagrad` with fp16 weights (fp32 state), judged on the half form."""

    name, precision, form = "FBGEMM TBE EXACT_ADAGRAD, fp16 weights", "FP16", "half"


class FbgemmRowwiseAdagradFp16(FbgemmRowwiseAdagrad):
    """:class:`FbgemmRowwiseAdagrad` with fp16 weights (fp32 state), judged on the half form."""

    name, precision, form = "FBGEMM TBE EXACT_ROWWISE_ADAGRAD, fp16 weights", "FP16", "half"


#: Every FBGEMM adapter.
CANDIDATES: tuple[type, ...] = (
    FbgemmExactSgd, FbgemmExactSgdL2, FbgemmExactSgdDecouple,
    FbgemmExactAdagrad, FbgemmExactAdagradL2, FbgemmExactAdagradDecouple,
    FbgemmRowwiseAdagrad, FbgemmRowwiseAdagradSum, FbgemmRowwiseAdagradL2, FbgemmRowwiseAdagradDecouple,
    FbgemmRowwiseAdagradCounter, FbgemmRowwiseAdagradDecoupleGlobal, FbgemmEmaInplaceRowwiseAdagrad,
    FbgemmExactSgdFp16, FbgemmExactAdagradFp16, FbgemmRowwiseAdagradFp16,
)
