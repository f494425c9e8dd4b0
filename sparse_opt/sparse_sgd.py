"""Lazy sparse SGD, with coupled weight decay and momentum applied on touched coordinates.

On each step only the coordinates ``i`` with a stored gradient entry change::

    g_i = grad_i + weight_decay * p_i          (coupled decay, as torch.optim.SGD)
    buf_i = momentum * buf_i + g_i             (momentum > 0; buffer starts at 0)
    p_i = p_i - lr * buf_i                     (or p_i - lr * g_i without momentum)

``maximize`` negates ``grad`` first. Untouched coordinates, and their momentum
buffer, keep their values bit for bit: the decay and the momentum of a dormant
coordinate are *not* applied while it is dormant -- that is what "lazy" means,
and why lazy SGD with weight decay or momentum differs from dense SGD for a
rarely touched row.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from sparse_opt._sparse_base import SparseOptimizer, Target
from sparse_opt._validation import check_bool, check_scalar


@dataclass(frozen=True)
class SparseSgdConfig:
    """Hyper-parameters of :class:`SparseSgd` and :class:`SparseSgdTable`.

    Parameters
    ----------
    lr : float
        Learning rate, ``>= 0``.
    weight_decay : float
        Coupled L2 coefficient added to the gradient, ``>= 0``.
    momentum : float
        Momentum factor, ``>= 0``; 0 disables the buffer.
    maximize : bool
        Ascend instead of descend.
    """

    lr: float
    weight_decay: float = 0.0
    momentum: float = 0.0
    maximize: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", check_scalar("lr", self.lr, low=0.0))
        object.__setattr__(self, "weight_decay", check_scalar("weight_decay", self.weight_decay, low=0.0))
        object.__setattr__(self, "momentum", check_scalar("momentum", self.momentum, low=0.0))
        object.__setattr__(self, "maximize", check_bool("maximize", self.maximize))

    def as_dict(self) -> dict[str, float | bool]:
        """The fields as plain Python scalars."""
        return asdict(self)


def sparse_sgd_update(
    param: np.ndarray,
    momentum_buffer: np.ndarray | None,
    target: Target,
    config: SparseSgdConfig,
) -> None:
    """Update the entries of ``param`` (and ``momentum_buffer``) that ``target`` addresses, in place.

    See the module docstring for the equations. Costs O(nnz): the target is
    updated in pieces of :data:`~sparse_opt._sparse_base.CHUNK_ENTRIES` entries,
    each array gathered once and scattered once per piece, with the floating
    point operations of the equations in their order (``maximize`` subtracts
    ``grad`` where the equations add ``-grad``, which rounds identically).
    """
    if target.empty:
        return
    p_at = target.address(param)
    buf_at = None if momentum_buffer is None else target.address(momentum_buffer)
    p_buf, g_buf, b_buf = target.buffers(3)
    accumulate = np.subtract if config.maximize else np.add
    for index, grad in target.chunks():
        k = index.size
        p = p_at.gather(index, out=p_buf[:k])
        if config.weight_decay != 0.0:
            g = np.multiply(p, config.weight_decay, out=g_buf[:k])
            accumulate(g, grad, out=g)
        elif config.maximize:
            g = np.negative(grad, out=g_buf[:k])
        else:
            g = grad
        if buf_at is not None:
            buf = buf_at.gather(index, out=b_buf[:k])
            np.multiply(buf, config.momentum, out=buf)
            np.add(buf, g, out=buf)
            buf_at.scatter(index, buf)
            g = buf
        step = np.multiply(g, config.lr, out=g_buf[:k])
        np.subtract(p, step, out=p)
        p_at.scatter(index, p)


class SparseSgd(SparseOptimizer):
    """Lazy SGD over a 1-D parameter vector, stepped with :class:`~sparse_opt.CooGradient`.

    Parameters
    ----------
    params : ndarray, 1-D, float32 or float64
        Updated in place (the caller's array is the model).
    config : SparseSgdConfig

    Attributes
    ----------
    momentum_buffer : ndarray or None
        Per-coordinate momentum (``None`` when ``momentum == 0``).
    step_count : int
        Number of ``step`` calls so far.

    Examples
    --------
    >>> import numpy as np, sparse_opt as so
    >>> p = np.ones(5)
    >>> opt = so.SparseSgd(p, so.SparseSgdConfig(lr=0.5))
    >>> opt.step(so.CooGradient([1, 3], [1.0, -2.0], 5))
    >>> p
    array([1. , 0.5, 1. , 2. , 1. ])
    """

    _ndim = 1
    _config_type = SparseSgdConfig

    def __init__(self, params: np.ndarray, config: SparseSgdConfig) -> None:
        super().__init__(params, config)
        self.momentum_buffer = np.zeros_like(self.params) if config.momentum != 0.0 else None

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {} if self.momentum_buffer is None else {"momentum_buffer": self.momentum_buffer}

    def _apply(self, target: Target, step: int) -> None:
        sparse_sgd_update(self.params, self.momentum_buffer, target, self.config)


class SparseSgdTable(SparseSgd):
    """Lazy SGD over a 2-D embedding table, stepped with :class:`~sparse_opt.CsrGradient`.

    Results are identical to :class:`SparseSgd` run on ``params.reshape(-1)`` with
    ``csr.to_coo()``; complete rows are updated row-wise.
    """

    _ndim = 2
