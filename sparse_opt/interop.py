"""Conversions between :class:`~sparse_opt.CsrGradient` and torch / scipy sparse tensors.

- :func:`csr_from_torch` / :func:`csr_to_torch`: torch sparse COO tensors. The
  gradient of ``nn.Embedding(sparse=True)`` is *uncoalesced*: indices of shape
  ``(1, n)`` -- one looked-up row per lookup, in lookup order, with repeats --
  and values ``(n, cols)``. A fully sparse 2-D COO tensor (indices ``(2, n)``,
  values ``(n,)``) works too, coalesced or not. Repeats are summed in the order
  given, as ``Tensor.coalesce`` and :meth:`CsrGradient.from_rows` do.
- :func:`csr_from_scipy` / :func:`csr_to_scipy`: ``scipy.sparse`` arrays and
  matrices (``csr_array``, ``coo_array``, ...; duplicates summed, explicit zeros
  kept as entries).

torch and scipy are optional: each function imports its library when called
and raises ``ImportError`` with the ``pip install`` line when it is missing.
``CsrGradient.from_torch``, ``to_torch``, ``from_scipy`` and ``to_scipy``
delegate here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from sparse_opt.coo import CooGradient
from sparse_opt.csr import CsrGradient


def require(module: str, pip_name: str, purpose: str) -> ModuleType:
    """``import module``, or raise ``ImportError`` naming ``pip install pip_name``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{purpose} needs {module}, which is not installed: pip install {pip_name}") from exc


def _from_entries(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> CsrGradient:
    """Coalesce a coordinate list of a ``shape`` table (duplicates summed in order)."""
    num_rows, num_cols = (int(s) for s in shape)
    linear = np.asarray(rows, dtype=np.int64) * num_cols + np.asarray(cols, dtype=np.int64)
    if rows.size and ((rows < 0) | (rows >= num_rows) | (cols < 0) | (cols >= num_cols)).any():
        raise ValueError(f"an entry lies outside the {num_rows} x {num_cols} table")
    coo = CooGradient.from_unsorted(linear, values, num_rows * num_cols)
    return CsrGradient.from_coo(coo, (num_rows, num_cols))


def csr_from_torch(tensor: Any) -> CsrGradient:
    """A coalesced :class:`CsrGradient` from a 2-D torch sparse COO tensor.

    Parameters
    ----------
    tensor : torch.Tensor
        ``layout=torch.sparse_coo``, 2-D, float values, coalesced or not: either
        one sparse dimension with dense rows (``nn.Embedding(sparse=True)``'s
        gradient) or two sparse dimensions. Detached and moved to the CPU.

    Returns
    -------
    CsrGradient
        Repeated rows (entries) summed in the order given; the values keep
        torch's dtype (float16, float32 or float64).

    Raises
    ------
    TypeError
        Not a torch tensor, not sparse COO (a dense tensor: use
        ``CsrGradient.from_dense(t.numpy())``), or a dtype numpy lacks (bfloat16).
    ValueError
        Not 2-D, or no sparse dimension (``sparse_dim() == 0``: the whole
        table stored as one dense value block).
    """
    torch = require("torch", "torch", "CsrGradient.from_torch")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.sparse_coo:
        hint = " (a dense tensor: use CsrGradient.from_dense(t.numpy()))" if tensor.layout == torch.strided else ""
        raise TypeError(f"tensor must have layout torch.sparse_coo, got {tensor.layout}{hint}")
    if tensor.dim() != 2:
        raise ValueError(f"tensor must be 2-D (a table's gradient), got shape {tuple(tensor.shape)}")
    if tensor.dtype not in (torch.float16, torch.float32, torch.float64):
        raise TypeError(f"tensor values must be float16, float32 or float64, got {tensor.dtype}")
    if tensor.sparse_dim() == 0:
        raise ValueError(
            "tensor has no sparse dimension (sparse_dim() == 0, dense_dim() == 2): it is a dense table stored as "
            "sparse COO; use CsrGradient.from_dense(t.to_dense().numpy()) or t.to_dense().to_sparse(1)"
        )
    t = tensor.detach().cpu()
    indices, values = t._indices().numpy(), t._values().numpy()  # as stored: uncoalesced allowed
    rows, cols = (int(s) for s in t.shape)
    if t.sparse_dim() == 1:
        return CsrGradient.from_rows(indices[0], values.reshape(-1, cols), rows)
    return _from_entries(indices[0], indices[1], values, (rows, cols))


def csr_to_torch(grad: CsrGradient, *, hybrid: bool = False) -> Any:
    """A coalesced torch sparse COO tensor holding ``grad`` (copies; values keep their dtype).

    Parameters
    ----------
    grad : CsrGradient
    hybrid : bool
        False (default): two sparse dimensions, one entry per stored value (any
        gradient). True: ``nn.Embedding``'s layout, one sparse dimension with
        dense rows -- only for a gradient whose touched rows are complete
        (``ValueError`` otherwise: filling the missing entries with zeros would
        turn absent entries into explicit zero gradients).
    """
    torch = require("torch", "torch", "CsrGradient.to_torch")
    if not isinstance(grad, CsrGradient):
        raise TypeError(f"grad must be a CsrGradient, got {type(grad).__name__}")
    rows, cols = grad.shape
    values = torch.from_numpy(np.array(grad.values))
    if hybrid:
        if not grad.full_rows:
            raise ValueError("hybrid=True needs complete rows: this gradient has rows with missing entries")
        indices = torch.from_numpy(np.array(grad.touched_rows)).reshape(1, -1)
        values = values.reshape(-1, cols)
    else:
        indices = torch.from_numpy(np.stack([grad.row_of_entries(), np.array(grad.col_indices)]))
    return torch.sparse_coo_tensor(indices, values, (rows, cols), is_coalesced=True, check_invariants=True)


def csr_from_scipy(matrix: Any) -> CsrGradient:
    """A :class:`CsrGradient` from a 2-D scipy sparse array or matrix (any format).

    Duplicate entries (allowed in COO, and in non-canonical CSR) are summed in
    the order stored; explicit zeros stay entries (a lazy optimizer treats them
    as touched). Values must be float.
    """
    sparse = require("scipy.sparse", "scipy", "CsrGradient.from_scipy")
    if not sparse.issparse(matrix):
        raise TypeError(f"matrix must be a scipy.sparse array or matrix, got {type(matrix).__name__}")
    if len(matrix.shape) != 2:
        raise ValueError(f"matrix must be 2-D, got shape {matrix.shape}")
    coo = matrix.tocoo()
    return _from_entries(np.asarray(coo.row), np.asarray(coo.col), np.asarray(coo.data), coo.shape)


def csr_to_scipy(grad: CsrGradient, format: str = "csr") -> Any:
    """``grad`` as a canonical ``scipy.sparse.csr_array`` (``format="csr"``) or ``coo_array`` (``"coo"``), copied."""
    sparse = require("scipy.sparse", "scipy", "CsrGradient.to_scipy")
    if not isinstance(grad, CsrGradient):
        raise TypeError(f"grad must be a CsrGradient, got {type(grad).__name__}")
    values = np.array(grad.values)
    if format == "csr":
        return sparse.csr_array((values, np.array(grad.col_indices), np.array(grad.row_offsets)), shape=grad.shape)
    if format == "coo":
        return sparse.coo_array((values, (grad.row_of_entries(), np.array(grad.col_indices))), shape=grad.shape)
    raise ValueError(f"format must be 'csr' or 'coo', got {format!r}")
