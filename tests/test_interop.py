"""sparse_opt.interop: CsrGradient to and from torch sparse COO tensors and scipy sparse arrays."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt.interop import require


def test_require_names_the_pip_install():
    with pytest.raises(ImportError, match=r"Purpose needs no_such_module_xyz, which is not installed: pip install xyz"):
        require("no_such_module_xyz", "xyz", "Purpose")


@pytest.mark.parametrize(
    ("call", "module", "hint"),
    [
        (lambda g: so.CsrGradient.from_torch(g), "torch", "pip install torch"),
        (lambda g: g.to_torch(), "torch", "pip install torch"),
        (lambda g: so.CsrGradient.from_scipy(g), "scipy.sparse", "pip install scipy"),
        (lambda g: g.to_scipy(), "scipy.sparse", "pip install scipy"),
    ],
)
def test_missing_library_gives_an_install_hint(monkeypatch, call, module, hint):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    grad = so.CsrGradient.from_rows([0], np.ones((1, 2)), 3)
    with pytest.raises(ImportError, match=hint):
        call(grad)


# --------------------------------------------------------------------------- torch


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _embedding_grad(torch, ids, grads, rows):
    emb = torch.nn.Embedding(rows, grads.shape[1], sparse=True, dtype=torch.float64)
    (emb(torch.tensor(ids)) * torch.from_numpy(grads).reshape(*np.shape(ids), -1)).sum().backward()
    return emb.weight.grad


def test_from_torch_takes_the_uncoalesced_embedding_gradient(torch):
    ids = [[1, 0, 1], [3, 1, 1]]
    grads = np.arange(18, dtype=np.float64).reshape(2, 3, 3) / 8
    g = _embedding_grad(torch, ids, grads.reshape(6, 3), 5)
    assert not g.is_coalesced() and g._indices().shape == (1, 6)
    csr = so.CsrGradient.from_torch(g)
    want = so.CsrGradient.from_rows(np.ravel(ids), grads.reshape(6, 3), 5)
    assert csr.shape == (5, 3) and csr.full_rows and csr.values.dtype == np.float64
    np.testing.assert_array_equal(csr.row_offsets, want.row_offsets)
    np.testing.assert_array_equal(csr.values, want.values)
    np.testing.assert_array_equal(csr.to_dense(), g.to_dense().numpy())


def test_from_torch_takes_fully_sparse_coo_with_duplicates(torch):
    indices = torch.tensor([[2, 0, 2, 2], [1, 0, 1, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float32)
    t = torch.sparse_coo_tensor(indices, values, (3, 2), check_invariants=True)
    csr = so.CsrGradient.from_torch(t)
    assert csr.values.dtype == np.float32 and not csr.full_rows
    np.testing.assert_array_equal(csr.row_offsets, [0, 1, 1, 3])
    np.testing.assert_array_equal(csr.col_indices, [0, 0, 1])
    np.testing.assert_array_equal(csr.values, [2.0, 4.0, 4.0])


def test_to_torch_is_coalesced_and_round_trips(torch):
    csr = so.CsrGradient(np.array([0, 2, 2, 3]), np.array([0, 2, 1]), np.array([1.0, 2.0, 3.0]), (3, 3))
    t = csr.to_torch()
    assert t.is_coalesced() and t.layout == torch.sparse_coo and t.sparse_dim() == 2 and t.dtype == torch.float64
    np.testing.assert_array_equal(t.to_dense().numpy(), csr.to_dense())
    back = so.CsrGradient.from_torch(t)
    np.testing.assert_array_equal(back.to_dense(), csr.to_dense())
    np.testing.assert_array_equal(back.col_indices, csr.col_indices)
    with pytest.raises(ValueError, match="complete rows"):
        csr.to_torch(hybrid=True)


def test_to_torch_hybrid_is_the_embedding_layout(torch):
    csr = so.CsrGradient.from_rows([4, 1, 4], np.ones((3, 2), np.float32), 6)
    t = csr.to_torch(hybrid=True)
    assert t.is_coalesced() and t.sparse_dim() == 1 and t.dense_dim() == 1 and t.dtype == torch.float32
    assert t._indices().tolist() == [[1, 4]] and t._values().tolist() == [[1, 1], [2, 2]]
    w = torch.nn.Parameter(torch.zeros(6, 2))
    w.grad = t
    torch.optim.SparseAdam([w], lr=0.1).step()  # a torch optimizer takes it as it takes an embedding's
    np.testing.assert_allclose(w.detach().numpy()[[1, 4]], -0.1, rtol=1e-6)
    assert (w.detach()[[0, 2, 3, 5]] == 0).all()


def test_empty_gradients_round_trip(torch):
    empty = torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.long), torch.zeros((0, 3)), (4, 3))
    csr = so.CsrGradient.from_torch(empty)
    assert csr.nnz == 0 and csr.shape == (4, 3)
    assert csr.to_torch()._nnz() == 0 and csr.to_torch(hybrid=True)._nnz() == 0


def test_from_torch_refuses_what_it_cannot_take(torch):
    with pytest.raises(TypeError, match="from_dense"):
        so.CsrGradient.from_torch(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="torch.Tensor"):
        so.CsrGradient.from_torch(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="2-D"):
        so.CsrGradient.from_torch(torch.zeros(2, 2, 2).to_sparse())
    with pytest.raises(TypeError, match="bfloat16"):
        so.CsrGradient.from_torch(torch.zeros(2, 2, dtype=torch.bfloat16).to_sparse())
    no_sparse_dim = torch.sparse_coo_tensor(torch.zeros((0, 1), dtype=torch.long), torch.ones(1, 4, 3), (4, 3))
    with pytest.raises(ValueError, match=r"no sparse dimension \(sparse_dim\(\) == 0"):  # was IndexError
        so.CsrGradient.from_torch(no_sparse_dim)
    with pytest.raises(TypeError, match="CsrGradient"):
        so.interop.csr_to_torch(torch.zeros(2))


def test_kit_optimizer_matches_torch_on_the_converted_gradient(torch):
    """The embedding gradient, converted, drives SparseAdamTable exactly as torch's SparseAdam up to eps placement."""
    ids = [3, 1, 3, 0]
    grads = np.linspace(-1, 1, 12).reshape(4, 3)
    table = np.ones((5, 3))
    opt = so.SparseAdamTable(table, so.SparseAdamConfig(lr=0.1, eps=0.0))
    opt.step(so.CsrGradient.from_torch(_embedding_grad(torch, ids, grads, 5)))
    summed = so.CsrGradient.from_rows(ids, grads, 5).to_dense()
    np.testing.assert_allclose(table[[0, 1, 3]], 1 - 0.1 * np.sign(summed[[0, 1, 3]]))


# --------------------------------------------------------------------------- scipy


@pytest.fixture
def sparse():
    return pytest.importorskip("scipy.sparse")


def test_from_scipy_sums_duplicates_and_keeps_explicit_zeros(sparse):
    rows, cols = np.array([2, 0, 1, 2]), np.array([1, 0, 1, 1])
    coo = sparse.coo_array((np.array([1.0, 2.0, 0.0, 4.0]), (rows, cols)), shape=(3, 2))
    csr = so.CsrGradient.from_scipy(coo)
    np.testing.assert_array_equal(csr.row_offsets, [0, 1, 2, 3])
    np.testing.assert_array_equal(csr.col_indices, [0, 1, 1])
    np.testing.assert_array_equal(csr.values, [2.0, 0.0, 5.0])  # the explicit zero stays an entry
    noncanonical = sparse.csr_array((np.array([3.0, 1.0, 1.0]), np.array([1, 0, 1]), np.array([0, 3, 3])), shape=(2, 2))
    assert not noncanonical.has_canonical_format
    back = so.CsrGradient.from_scipy(noncanonical)
    np.testing.assert_array_equal(back.col_indices, [0, 1])
    np.testing.assert_array_equal(back.values, [1.0, 4.0])
    assert so.CsrGradient.from_scipy(sparse.csr_matrix(np.eye(2))).nnz == 2


def test_to_scipy_round_trips(sparse):
    csr = so.CsrGradient(np.array([0, 2, 2, 3]), np.array([0, 2, 1]), np.array([1.0, 2.0, 3.0], np.float32), (3, 3))
    for fmt, kind in (("csr", sparse.csr_array), ("coo", sparse.coo_array)):
        m = csr.to_scipy(fmt)
        assert isinstance(m, kind) and m.dtype == np.float32 and m.shape == (3, 3)
        np.testing.assert_array_equal(m.toarray(), csr.to_dense())
        back = so.CsrGradient.from_scipy(m)
        np.testing.assert_array_equal(back.row_offsets, csr.row_offsets)
        np.testing.assert_array_equal(back.values, csr.values)
    m = csr.to_scipy()
    m.data[0] = 99.0  # a copy: the gradient's read-only arrays are untouched
    assert csr.values[0] == 1.0 and m.has_canonical_format


def test_scipy_conversions_refuse_bad_input(sparse):
    with pytest.raises(TypeError, match="scipy.sparse"):
        so.CsrGradient.from_scipy(np.eye(2))
    with pytest.raises(ValueError, match="format"):
        so.CsrGradient.from_rows([0], np.ones((1, 2)), 2).to_scipy("dok")
    with pytest.raises(TypeError, match="values"):
        so.CsrGradient.from_scipy(sparse.csr_array(np.eye(2, dtype=np.int64)))
