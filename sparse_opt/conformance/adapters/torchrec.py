"""TorchRec: an ``EmbeddingBagCollection`` trained through ``DistributedModelParallel``, behind the candidate protocol.

Each adapter builds one table (``rows x 4``, float32, one feature) in an
``EmbeddingBagCollection`` on the ``meta`` device, attaches the optimizer with
``apply_optimizer_in_backward`` (TorchRec fuses it into FBGEMM's TBE backward:
``torch.optim.SGD`` -> ``EXACT_SGD``, ``torch.optim.Adagrad`` ->
``EXACT_ADAGRAD``, ``torchrec.optim.RowWiseAdagrad`` ->
``EXACT_ROWWISE_ADAGRAD``), shards it with ``DistributedModelParallel`` over
gloo (``fused`` compute kernel, the planner constrained to one sharding type)
and copies the scenario's table into its shards. A step is a
``KeyedJaggedTensor`` batch with one id per bag (sum pooling), ``loss =
(out * row_grads).sum()`` and ``loss.backward()``; an empty step is one empty
bag. ``table()`` gathers the shards (a collective: in a multi-process run every
rank calls it at the same point, which the deterministic scenarios guarantee).

The optimizer gets the hyper-parameters torch.optim would take (``lr``,
``eps``; ``momentum`` and ``weight_decay`` for SGD) and TorchRec passes them to
the fused kernel; what the kernel has no parameter for (``lr_decay``,
``initial_accumulator_value``) is refused with ``NotImplementedError``;
``maximize`` back-propagates the negated loss and incomplete rows go in as whole
rows with zeros, as in :mod:`.fbgemm`. Measured (recorded in
``tests/conformance/torchrec``): TorchRec hands ``momentum`` and
``weight_decay`` to kernels that drop them, silently: a fused
``torch.optim.SGD(momentum=0.9)`` is momentum-free SGD, and a fused
``Adagrad`` / ``RowWiseAdagrad`` with ``weight_decay`` is judged ``*_no_decay``
(TorchRec leaves the TBE's ``weight_decay_mode`` at ``NONE``). Under
``torchrec.optim.warmup.WarmupOptimizer`` (:class:`TorchrecSgdWarmup`, which
takes a schedule) every step runs at the rate of the step before it. torch, torchrec and fbgemm_gpu are imported when an
adapter is built; a process group is started (gloo, world size 1, localhost)
unless one exists. ``torchrec==1.8.0`` installs with ``--no-deps`` beside
``fbgemm-gpu-cpu==1.8.0`` (plus ``tensordict``, ``torchmetrics==1.0.3``,
``tqdm``, ``pyre-extensions``).
"""

from __future__ import annotations

import os
import socket
from typing import Any, ClassVar

import numpy as np

from sparse_opt.conformance.hyper import Hyper
from sparse_opt.interop import require

#: The recorded versions.
VERSIONS = {"torch": "2.13.0", "fbgemm_gpu": "1.8.0", "torchrec": "1.8.0"}


def ensure_process_group() -> None:
    """Start a gloo process group of one on localhost unless one is running."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=0, world_size=1)


class _TorchrecEbc:
    """One table in a sharded ``EmbeddingBagCollection`` with a fused optimizer; subclasses pick the optimizer."""

    family: ClassVar[str]
    name: ClassVar[str]
    form: ClassVar[str] = "kernel"
    #: ``ShardingType`` value the planner is held to (TorchRec 1.8.0 on CPU allows ``data_parallel``,
    #: ``table_wise``, ``column_wise`` and ``table_column_wise``: no ``row_wise``).
    sharding: ClassVar[str] = "table_wise"
    #: The scenario's rows split into this many tables of consecutive rows (features ``f0``, ``f1``, ...).
    tables: ClassVar[int] = 1

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        rows, cols = table.shape
        if table.dtype != np.float32 or cols % 4:
            raise NotImplementedError(
                f"TorchRec's fused kernel takes float32 tables of a width that is a multiple of 4, got {table.dtype} "
                f"{table.shape}: use the kernel form"
            )
        for field in ("lr_decay", "initial_accumulator_value"):
            if getattr(hyper, field):
                raise NotImplementedError(f"{self.name}: the fused kernel has no {field}")
        torch = self._t = require("torch", "torch", "The TorchRec adapters")
        require("torchrec", "torchrec", "The TorchRec adapters")
        import torch.distributed as dist
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.model_parallel import DistributedModelParallel
        from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
        from torchrec.distributed.planner.types import ParameterConstraints
        from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

        ensure_process_group()
        self._shape, self._sign = (rows, cols), -1.0 if hyper.maximize else 1.0
        #: First row of each table: the scenario's rows split into ``tables`` consecutive blocks.
        self._starts = [rows * k // self.tables for k in range(self.tables)] + [rows]
        configs = [
            EmbeddingBagConfig(name=f"t{k}", embedding_dim=cols, num_embeddings=self._starts[k + 1] - self._starts[k],
                               feature_names=[f"f{k}"])
            for k in range(self.tables)
        ]
        ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
        optimizer, kwargs = self._optimizer(hyper)
        apply_optimizer_in_backward(optimizer, ebc.parameters(), kwargs)
        world = dist.get_world_size()
        planner = EmbeddingShardingPlanner(
            topology=Topology(world_size=world, compute_device="cpu"),
            constraints={c.name: ParameterConstraints(sharding_types=[self.sharding]) for c in configs},
        )
        sharders = [EmbeddingBagCollectionSharder()]
        plan = planner.collective_plan(ebc, sharders, dist.GroupMember.WORLD)
        self._model = DistributedModelParallel(ebc, device=torch.device("cpu"), plan=plan, sharders=sharders)
        state = self._model.state_dict()
        with torch.no_grad():
            for k in range(self.tables):
                for shard in state[f"embedding_bags.t{k}.weight"].local_shards():
                    r0, c0 = shard.metadata.shard_offsets
                    n, m = shard.metadata.shard_sizes
                    r0 += self._starts[k]
                    shard.tensor.copy_(torch.from_numpy(np.array(table[r0:r0 + n, c0:c0 + m])))

    def _optimizer(self, hyper: Hyper) -> tuple[type, dict[str, float]]:
        raise NotImplementedError

    def local_rows(self) -> list[tuple[int, int]]:
        """``(first row, number of rows)`` of the scenario's table held by this process, one per shard."""
        state = self._model.state_dict()
        return [
            (self._starts[k] + sh.metadata.shard_offsets[0], sh.metadata.shard_sizes[0])
            for k in range(self.tables) for sh in state[f"embedding_bags.t{k}.weight"].local_shards()
        ]

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        torch = self._t
        from torchrec import KeyedJaggedTensor

        n = max(row_ids.size, 1)  # an empty step is one empty bag per feature
        table_of = np.searchsorted(self._starts, row_ids, side="right") - 1
        values, lengths, grads = [], [], []
        for k in range(self.tables):
            mine = table_of == k
            values.append(row_ids[mine] - self._starts[k])
            lengths.append(np.pad(mine.astype(np.int32), (0, n - row_ids.size)))
            grads.append(np.pad(np.where(mine[:, None], row_grads, 0.0), ((0, n - row_ids.size), (0, 0))))
        kjt = KeyedJaggedTensor(
            keys=[f"f{k}" for k in range(self.tables)],
            values=torch.from_numpy(np.concatenate(values).astype(np.int64)),
            lengths=torch.from_numpy(np.concatenate(lengths)),
        )
        out = self._model(kjt)
        loss = sum((out[f"f{k}"] * torch.from_numpy(grads[k].astype(np.float32))).sum() for k in range(self.tables))
        (self._sign * loss).backward()

    def step_entries(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        """Incomplete rows: each looked-up row once, a zero where an entry is absent (the kernel takes whole rows)."""
        ids, where = np.unique(rows, return_inverse=True)
        grads = np.zeros((ids.size, self._shape[1]), dtype=np.float32)
        np.add.at(grads, (where, cols), values)
        self.step(ids, grads)

    def table(self) -> np.ndarray:
        torch = self._t
        import torch.distributed as dist

        state = self._model.state_dict()
        rank0 = dist.get_rank() == 0
        full = np.zeros(self._shape, dtype=np.float32)
        for k in range(self.tables):
            rows = self._starts[k + 1] - self._starts[k]
            part = torch.zeros((rows, self._shape[1]), dtype=torch.float32) if rank0 else None
            state[f"embedding_bags.t{k}.weight"].gather(dst=0, out=part)
            if rank0:
                full[self._starts[k]:self._starts[k + 1]] = part.numpy()
        return full  # zeros on the other ranks: the gathered table lives on rank 0


class TorchrecSgd(_TorchrecEbc):
    """``torch.optim.SGD`` fused (``EXACT_SGD``), table-wise."""

    family, claims, name = "sgd", "sgd_lazy", "TorchRec DMP, fused torch.optim.SGD, table-wise"

    def _optimizer(self, hyper: Hyper) -> tuple[type, dict[str, float]]:
        import torch

        return torch.optim.SGD, {"lr": hyper.lr, "momentum": hyper.momentum, "weight_decay": hyper.weight_decay}


class TorchrecAdagrad(_TorchrecEbc):
    """``torch.optim.Adagrad`` fused (``EXACT_ADAGRAD``), table-wise."""

    family, claims, name = "adagrad", "adagrad", "TorchRec DMP, fused torch.optim.Adagrad, table-wise"

    def _optimizer(self, hyper: Hyper) -> tuple[type, dict[str, float]]:
        import torch

        return torch.optim.Adagrad, {"lr": hyper.lr, "eps": hyper.eps, "weight_decay": hyper.weight_decay}


class TorchrecRowwiseAdagrad(_TorchrecEbc):
    """``torchrec.optim.RowWiseAdagrad`` fused (``EXACT_ROWWISE_ADAGRAD``), table-wise."""

    family, claims, name = "adagrad", "rowwise_adagrad", "TorchRec DMP, fused RowWiseAdagrad, table-wise"

    def _optimizer(self, hyper: Hyper) -> tuple[type, dict[str, float]]:
        from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

        return RowWiseAdagrad, {"lr": hyper.lr, "eps": hyper.eps, "weight_decay": hyper.weight_decay}


class TorchrecSgdWarmup(TorchrecSgd):
    """:class:`TorchrecSgd` under ``torchrec.optim.warmup.WarmupOptimizer``: it takes a schedule (``schedules = True``).

    The warm-up optimizer wraps the model's ``fused_optimizer`` (a
    ``KeyedOptimizer``) with ``lr = hyper.lr`` (the schedule's peak, also the
    fused optimizer's own ``lr``) and stages that give, after ``j`` steps, the
    rate of step ``j + 1``: an ``INTERPOLATE`` stage for iterations 0 and 1, then
    one ``CONSTANT`` stage per iteration (no stages: a constant rate). A step is
    TorchRec's training loop: forward, ``loss.backward()`` (the fused kernel
    updates the looked-up rows), ``optimizer.step()``.

    Measured (``tests/test_conformance_torchrec.py``): the warm-up optimizer
    holds the right rate, but the fused update runs in the backward, before
    ``step()`` hands that rate to the kernel (``EmbeddingFusedOptimizer.step``
    only calls ``set_learning_rate``): step ``t`` runs at the rate of step
    ``t - 1``, step 1 at the optimizer's constructor ``lr``. Dormant rows do not
    move (no catch-up at any rate, momentum and weight decay dropped as in
    :class:`TorchrecSgd`), so on the schedule scenarios it matches no reference,
    first at step 1; with each rate moved one step later it is lazy SGD
    without momentum and decay bit for bit.
    """

    name, schedules = "TorchRec DMP, fused torch.optim.SGD, WarmupOptimizer, table-wise", True

    def __init__(self, table: np.ndarray, hyper: Hyper) -> None:
        super().__init__(table, hyper)
        from torchrec.optim.warmup import WarmupOptimizer, WarmupPolicy, WarmupStage

        scale = [rate / hyper.lr for rate in hyper.schedule]
        stages = []
        if scale:  # the rate held after j steps (iteration j) is scale[j] * lr, the rate of step j + 1
            stages.append(WarmupStage(WarmupPolicy.INTERPOLATE, max_iters=1, value=scale[0],
                                      start_interpolating_iters=0, end_value=scale[min(1, len(scale) - 1)]))
            stages += [WarmupStage(WarmupPolicy.CONSTANT, max_iters=j, value=scale[j]) for j in range(2, len(scale))]
        self._warmup = WarmupOptimizer(self._model.fused_optimizer, stages, lr=hyper.lr)

    def held_rate(self) -> float:
        """The rate the warm-up optimizer holds now (its param groups' ``lr``): the next step's, by its schedule."""
        return float(self._model.fused_optimizer.param_groups[0]["lr"])

    def step(self, row_ids: np.ndarray, row_grads: np.ndarray) -> None:
        super().step(row_ids, row_grads)
        self._warmup.step()


#: Every TorchRec adapter (table-wise, one process).
CANDIDATES: tuple[type, ...] = (TorchrecSgd, TorchrecAdagrad, TorchrecRowwiseAdagrad, TorchrecSgdWarmup)


def _sharded(candidate: type) -> type:
    """``candidate`` with its rows split into two tables, placed table-wise (a subclass named after it)."""
    return type(candidate.__name__, (candidate,), {
        "tables": 2, "name": candidate.name.replace("table-wise", "rows split into 2 tables, table-wise")})


def _worker(rank: int, world: int, port: int, names: tuple[str, ...], out: Any) -> None:
    """One rank of :func:`record_sharded`: every candidate through its scenarios, in lockstep with the others."""
    import torch.distributed as dist

    from sparse_opt.conformance.recording import record

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {}
        for name in names:
            candidate = _sharded(globals()[name])
            results[name] = (record(candidate, versions=_versions()), _shard_rows(candidate))
        out.put((rank, results))
    finally:
        dist.destroy_process_group()


def _shard_rows(candidate: type) -> list[tuple[int, int]]:
    """The rows this rank holds for a 4-row table of ``candidate``."""
    return candidate(np.zeros((4, 4), dtype=np.float32), Hyper()).local_rows()


def _versions() -> dict[str, str]:
    import fbgemm_gpu
    import torch
    import torchrec

    return {"numpy": np.__version__, "torch": torch.__version__, "fbgemm_gpu": fbgemm_gpu.__version__,
            "torchrec": torchrec.__version__}


def record_sharded(
    names: tuple[str, ...] = tuple(c.__name__ for c in CANDIDATES), world: int = 2
) -> tuple[dict[str, Any], dict[int, dict[str, list[tuple[int, int]]]]]:
    """Record the adapters ``names`` sharded over ``world`` processes on this machine.

    TorchRec 1.8.0 does not shard row-wise on CPU (its planner allows
    data-parallel, table-wise, column-wise and table-column-wise), and a table
    4 wide cannot be split by columns (FBGEMM needs widths that are multiples
    of 4). So each scenario's rows are split into two tables (rows ``[0,
    rows/2)`` and ``[rows/2, rows)``, two features) placed table-wise: the
    planner puts one on each rank, a row-wise sharding by hand. A step that
    looks up only one block's rows leaves the other rank's table without an id.
    ``torch.multiprocessing`` spawns the ranks; they join a gloo group on
    localhost and run every scenario in lockstep (``table()`` gathers to rank
    0). Returns rank 0's recordings by adapter name, and each rank's rows
    (``(first row, rows)`` per shard) by adapter name.
    """
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, world, port, names, out)) for r in range(world)]
    for p in procs:
        p.start()
    gathered = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"rank process exited with {p.exitcode}")
    recordings = {name: rec for name, (rec, _) in gathered[0].items()}
    shards = {rank: {name: rows for name, (_, rows) in res.items()} for rank, res in gathered.items()}
    return recordings, shards
