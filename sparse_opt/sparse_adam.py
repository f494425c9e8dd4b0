"""Lazy sparse Adam: moments and parameters change only where the gradient has entries.

Each coordinate ``i`` keeps ``m_i``, ``v_i`` and ``last_step_i``, the global step
at which it was last touched (0 = never). At global step ``t`` (the number of
``step`` calls so far, empty gradients included) a touched coordinate with
gradient ``g`` (negated first when ``maximize``) is updated as follows.

``LazyAdamMode.LAZY`` (TensorFlow's LazyAdam; ``torch.optim.SparseAdam`` up to
its eps placement) decays the moments once, however long ``i`` was dormant::

    m_i = beta1 * m_i + (1 - beta1) * g
    v_i = beta2 * v_i + (1 - beta2) * g**2

``LazyAdamMode.DORMANCY_DECAY`` first applies the decay that dense Adam fed zero
gradients would have applied while ``i`` was dormant::

    gap = t - last_step_i                      (>= 1)
    m_i = beta1**gap * m_i + (1 - beta1) * g
    v_i = beta2**gap * v_i + (1 - beta2) * g**2

so at every touch ``m_i``, ``v_i`` equal dense Adam's (to rounding); a
coordinate touched on every step has ``gap == 1`` and follows plain Adam
exactly. Both modes then use the *global* step for bias correction::

    m_hat = m_i / (1 - beta1**t)
    v_hat = v_i / (1 - beta2**t)
    p_i = p_i - lr * m_hat / (sqrt(v_hat) + eps)

with ``eps`` added to ``sqrt(v_hat)`` as in ``torch.optim.Adam`` (evaluated, as
torch does, as ``lr / (1 - beta1**t) * m_i / (sqrt(v_i) / sqrt(1 - beta2**t) + eps)``)
and ``last_step_i = t``. Parameters never receive an update on dormant steps, so
the parameter trajectory differs from dense Adam by design in both modes.

``last_step`` is the optimizer's record (read-only; restore it with
``load_state_dict``). :class:`SparseAdamTable` keeps it per row while its
steps update whole rows, the embedding case, since the entries of such a row
always share it (see the class).

Source: the sparse optimizer module's specification (lazy Adam with dormancy
catch-up); Kingma & Ba, "Adam" (2015) for the dense recursion.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from sparse_opt._sparse_base import SparseOptimizer, Target
from sparse_opt._validation import check_bool, check_scalar


class LazyAdamMode(enum.Enum):
    """How a dormant coordinate's moments catch up when it is touched again."""

    LAZY = "lazy"
    DORMANCY_DECAY = "dormancy_decay"


@dataclass(frozen=True)
class SparseAdamConfig:
    """Hyper-parameters of :class:`SparseAdam` and :class:`SparseAdamTable`.

    Parameters
    ----------
    lr : float
        Learning rate, ``>= 0``.
    beta1, beta2 : float
        Moment decay rates, in ``[0, 1)``.
    eps : float
        Added to ``sqrt(v_hat)``, ``>= 0``. With ``eps = 0`` an explicit zero
        gradient on a coordinate whose moments are still zero computes ``0 / 0``
        (NaN), as in torch.
    mode : LazyAdamMode or {"lazy", "dormancy_decay"}
        Strings are matched case-insensitively (``"LAZY"`` works too).
    maximize : bool
        Ascend instead of descend.
    """

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    mode: LazyAdamMode = LazyAdamMode.LAZY
    maximize: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "beta1", check_scalar("beta1", self.beta1, low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "beta2", check_scalar("beta2", self.beta2, low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "eps", check_scalar("eps", self.eps, low=0.0))
        object.__setattr__(self, "maximize", check_bool("maximize", self.maximize))
        mode = self.mode
        if not isinstance(mode, LazyAdamMode):
            try:
                mode = LazyAdamMode(mode.lower() if isinstance(mode, str) else mode)
            except ValueError:
                choices = ", ".join(repr(m.value) for m in LazyAdamMode)
                raise ValueError(f"Invalid mode: {self.mode!r} (expected a LazyAdamMode or one of {choices})") from None
        object.__setattr__(self, "mode", mode)

    def as_dict(self) -> dict[str, float | bool | str]:
        """The fields as plain Python scalars (``mode`` as its string value)."""
        return {
            "lr": self.lr,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "eps": self.eps,
            "mode": self.mode.value,
            "maximize": self.maximize,
        }


class BetaPowers:
    """``beta**k`` for integer arrays ``k``, tabulated for small ``k``.

    Dormancy gaps take few distinct small values, so a table lookup replaces a
    per-coordinate ``pow``. Entries are ``beta**k`` evaluated in float64 and
    rounded once to ``dtype``; gaps beyond the table are evaluated the same way,
    so the result never depends on the table size. ``beta**1 == beta`` exactly.
    """

    def __init__(self, beta: float, dtype: np.dtype, size: int = 4096) -> None:
        self.beta = beta
        self.dtype = np.dtype(dtype)
        self.table = np.power(beta, np.arange(size, dtype=np.float64)).astype(self.dtype)

    def __call__(self, k: np.ndarray) -> np.ndarray:
        size = self.table.size
        if k.size == 0 or int(k.max()) < size:
            return self.table[k]
        out = self.table[np.minimum(k, size - 1)]
        big = k >= size
        out[big] = np.power(self.beta, k[big].astype(np.float64)).astype(self.dtype)
        return out


def rows_share_values(block: np.ndarray) -> bool:
    """Whether every row of the 2-D ``block`` holds a single repeated value.

    Compares each entry with its left neighbour in the flattened block (one
    contiguous pass, several times faster than broadcasting each row's first
    entry), then lets the first entry of every row differ from the row before.
    """
    flat = block.reshape(-1)
    same = np.empty(flat.size, dtype=bool)
    np.equal(flat[1:], flat[:-1], out=same[1:])
    same.reshape(block.shape)[:, 0] = True
    return bool(same.all())


def dormancy_decays(
    last: np.ndarray, step: int, powers: tuple[BetaPowers, BetaPowers], by_rows: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``beta1**gap`` and ``beta2**gap`` for ``gap = step - last``, ready to multiply the moments.

    When whole rows are addressed and ``last`` holds one step per row (1-D), or
    one per entry but every entry of a row shares it, the gap and its powers are
    computed once per row and returned as ``(rows, 1)`` columns that broadcast
    over the row; otherwise one per entry. The factors are the same numbers
    either way.
    """
    if by_rows and last.ndim == 2 and rows_share_values(last):
        last = last[:, 0]
    if by_rows and last.ndim == 1:
        gap = step - last
        return powers[0](gap)[:, None], powers[1](gap)[:, None]
    gap = step - last
    return powers[0](gap), powers[1](gap)


def record_steps(
    last_step: np.ndarray, target: Target, step: int, powers: tuple[BetaPowers, BetaPowers] | None
) -> Iterator[tuple[np.ndarray, np.ndarray] | None]:
    """Record ``step`` as the last step of every entry ``target`` addresses, piece by piece.

    Yields one item per piece of ``target.chunks()``, in order: the piece's
    ``(beta1**gap, beta2**gap)`` from the last steps it replaced
    (:func:`dormancy_decays`), or None when ``powers`` is None (``LAZY`` needs
    no gaps). ``last_step`` has the parameters' shape, or holds one step per
    row (1-D) when the target addresses whole rows; then all touched rows are
    read and stamped at once (one number per row), before the first piece.
    """
    if last_step.ndim == 1 and target.by_rows:
        whole = None if powers is None else dormancy_decays(last_step.take(target.index), step, powers, True)
        last_step[target.index] = step
        done = 0
        for index, _ in target.chunks():
            yield None if whole is None else (whole[0][done : done + index.size], whole[1][done : done + index.size])
            done += index.size
        return
    last_at = target.address(last_step)
    stamp = last_at.filler(step)
    (last_buf,) = target.buffers(1, last_step.dtype)
    for index, _ in target.chunks():
        # Read the entries before overwriting them, even in LAZY mode: the loads
        # overlap their cache misses better than stores do, so reading the rows
        # and then writing them (in cache) is faster than writing them cold.
        last = last_at.gather(index, out=last_buf[: index.size])
        decays = None if powers is None else dormancy_decays(last, step, powers, target.by_rows)
        last_at.fill(index, stamp)
        yield decays


def sparse_adam_update(
    param: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    last_step: np.ndarray,
    target: Target,
    step: int,
    config: SparseAdamConfig,
    powers: tuple[BetaPowers, BetaPowers] | None = None,
) -> None:
    """Apply one lazy Adam step at global step ``step`` to the entries ``target`` addresses, in place.

    ``last_step`` has the parameters' shape, or, for a 2-D table stepped by
    whole rows, one entry per row (:func:`record_steps`). ``powers`` (``beta1``,
    ``beta2`` tables) is required in ``DORMANCY_DECAY`` mode. See the module
    docstring for the equations. Costs O(nnz): the target is updated in pieces
    of :data:`~sparse_opt._sparse_base.CHUNK_ENTRIES` entries; each piece
    gathers its entries of every array once, updates them in reusable buffers
    and scatters them back while they are still in cache. The floating point
    operations are those of the equations, in their order (``maximize``
    subtracts ``(1 - beta1) * grad`` where the equations add
    ``(1 - beta1) * -grad``, which rounds identically), so the pieces' sizes
    never change a result.
    """
    if target.empty:
        return
    dormancy = config.mode is LazyAdamMode.DORMANCY_DECAY
    if dormancy and powers is None:
        raise ValueError("DORMANCY_DECAY needs the beta power tables")
    if last_step.shape != param.shape and not (target.by_rows and last_step.shape == param.shape[:1]):
        raise ValueError(
            f"last_step of shape {last_step.shape} cannot record this step on parameters of shape {param.shape}"
        )
    beta1, beta2 = config.beta1, config.beta2
    c1, c2 = 1.0 - beta1, 1.0 - beta2
    bias_correction2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = config.lr / (1.0 - beta1**step)
    accumulate = np.subtract if config.maximize else np.add
    p_at, m_at, v_at = (target.address(a) for a in (param, m, v))
    m_buf, v_buf, work = target.buffers(3)
    decays = record_steps(last_step, target, step, powers if dormancy else None)
    for (index, grad), piece_decays in zip(target.chunks(), decays):
        k = index.size
        decay1, decay2 = (beta1, beta2) if piece_decays is None else piece_decays
        # m = decay1 * m + (1 - beta1) * g
        m_new = m_at.gather(index, out=m_buf[:k])
        np.multiply(m_new, decay1, out=m_new)
        scaled = np.multiply(grad, c1, out=work[:k])
        accumulate(m_new, scaled, out=m_new)
        m_at.scatter(index, m_new)
        # v = decay2 * v + (1 - beta2) * g**2
        v_new = v_at.gather(index, out=v_buf[:k])
        np.multiply(v_new, decay2, out=v_new)
        np.multiply(grad, grad, out=scaled)
        np.multiply(scaled, c2, out=scaled)
        np.add(v_new, scaled, out=v_new)
        v_at.scatter(index, v_new)
        # p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
        update = np.sqrt(v_new, out=v_new)
        np.divide(update, bias_correction2_sqrt, out=update)
        np.add(update, config.eps, out=update)
        np.divide(m_new, update, out=update)
        np.multiply(update, step_size, out=update)
        p_new = p_at.gather(index, out=scaled)
        np.subtract(p_new, update, out=p_new)
        p_at.scatter(index, p_new)


class SparseAdam(SparseOptimizer):
    """Lazy Adam over a 1-D parameter vector, stepped with :class:`~sparse_opt.CooGradient`.

    Parameters
    ----------
    params : ndarray, 1-D, float32 or float64
        Updated in place (the caller's array is the model).
    config : SparseAdamConfig
        ``mode`` picks ``LAZY`` or ``DORMANCY_DECAY`` (module docstring).

    Attributes
    ----------
    m, v : ndarray
        First and second moments (the parameters' dtype and shape).
    last_step : ndarray of int64, read-only
        Global step of each coordinate's last update, 0 if never touched. It is
        the optimizer's own record: restore it with :meth:`load_state_dict`.
    step_count : int
        The global step ``t``: ``step`` calls so far.
    """

    _ndim = 1
    _config_type = SparseAdamConfig

    def __init__(self, params: np.ndarray, config: SparseAdamConfig | None = None) -> None:
        super().__init__(params, SparseAdamConfig() if config is None else config)
        self.m = np.zeros_like(self.params)
        self.v = np.zeros_like(self.params)
        self._last = self._fresh_last_step()
        self._powers = None
        if self.config.mode is LazyAdamMode.DORMANCY_DECAY:
            self._powers = (
                BetaPowers(self.config.beta1, self.params.dtype),
                BetaPowers(self.config.beta2, self.params.dtype),
            )

    def _fresh_last_step(self) -> np.ndarray:
        """The record of a new optimizer: 0 (never touched) for every coordinate."""
        return np.zeros(self.params.shape, dtype=np.int64)

    @property
    def last_step(self) -> np.ndarray:
        """Global step of each coordinate's last update (int64, read-only view)."""
        view = self._last.view()
        view.flags.writeable = False
        return view

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {"m": self.m, "v": self.v, "last_step": self.last_step}

    def _check_loaded(self, arrays: dict[str, np.ndarray], step_count: int) -> None:
        super()._check_loaded(arrays, step_count)
        last = arrays["last_step"]
        bad = (last < 0) | (last > step_count)
        if bad.any():
            k = int(np.flatnonzero(bad.reshape(-1))[0])
            raise ValueError(
                f"state_dict['last_step'] has {int(last.reshape(-1)[k])} at flat position {k}, "
                f"outside [0, step_count = {step_count}]"
            )
        if (arrays["v"] < 0).any():
            raise ValueError("state_dict['v'] has a negative entry")

    def _adopt_state(self, arrays: dict[str, np.ndarray]) -> None:
        self.m, self.v, self._last = arrays["m"], arrays["v"], arrays["last_step"]

    def _apply(self, target: Target, step: int) -> None:
        sparse_adam_update(self.params, self.m, self.v, self._last, target, step, self.config, self._powers)


class SparseAdamTable(SparseAdam):
    """Lazy Adam over a 2-D embedding table, stepped with :class:`~sparse_opt.CsrGradient`.

    Identical results to :class:`SparseAdam` run on ``params.reshape(-1)`` with
    ``csr.to_coo()``; ``m``, ``v``, ``last_step`` have the table's shape. Complete
    rows (an embedding lookup's gradient) are gathered and scattered row-wise.

    While every step updates whole rows, all entries of a row share their
    ``last_step``, so the optimizer stores one int64 per row and ``last_step``
    is a read-only broadcast view of it: 8 bytes of state per row instead of
    per entry, and a step reads and writes one number per touched row instead
    of ``cols``. The first step with incomplete rows expands the record to one
    int64 per entry (O(table), once); :meth:`load_state_dict` stores one per
    row again whenever the loaded rows allow it.
    """

    _ndim = 2

    def _fresh_last_step(self) -> np.ndarray:
        return np.zeros(self.params.shape[:1], dtype=np.int64)

    @property
    def last_step(self) -> np.ndarray:
        """Global step of each entry's last update (int64, the table's shape, read-only view)."""
        if self._last.ndim == 1:
            return np.broadcast_to(self._last[:, None], self.params.shape)
        return super().last_step

    def _adopt_state(self, arrays: dict[str, np.ndarray]) -> None:
        last = arrays["last_step"]
        if last.shape[1] == 0:
            arrays = {**arrays, "last_step": np.zeros(last.shape[0], dtype=np.int64)}
        elif rows_share_values(last):
            arrays = {**arrays, "last_step": last[:, 0].copy()}
        super()._adopt_state(arrays)

    def _apply(self, target: Target, step: int) -> None:
        if self._last.ndim == 1 and not target.by_rows and not target.empty:
            self._last = np.repeat(self._last[:, None], self.params.shape[1], axis=1)
        super()._apply(target, step)
