"""sparse_opt.demos.contenders: each contender steps the optimizer it names, on the rows the lookup touched."""

import numpy as np
import pytest

import sparse_opt as so
from sparse_opt.demos import contenders as ct
from sparse_opt.demos.workload import Workload

SMALL = Workload(rows=500, cols=4, batch=64, seed=3)
NAMES = [ct.LAZY_ADAM, ct.DORMANCY_ADAM, ct.DENSE_EQUIVALENT_ADAM, ct.MOMENTUM_SGD, ct.DENSE_ADAM]


def test_the_contenders_and_their_kinds():
    contenders = ct.sparse_opt_contenders()
    assert [c.name for c in contenders] == NAMES
    assert [c.dense for c in contenders] == [False, False, False, False, True]
    assert {c.library for c in contenders} == {"sparse_opt"}
    assert [c.name for c in ct.sparse_opt_contenders(dense=False)] == NAMES[:-1]


def test_every_contender_moves_exactly_the_touched_rows():
    ids, grads = SMALL.batches(1)[0]
    for c in ct.sparse_opt_contenders():
        table = SMALL.table()
        before = table.copy()
        c.make(table).step(ids, grads)
        moved = np.flatnonzero((table != before).any(axis=1))
        np.testing.assert_array_equal(moved, np.unique(ids), err_msg=c.name)


@pytest.mark.parametrize(
    ("name", "mode"),
    [(ct.LAZY_ADAM, "lazy"), (ct.DORMANCY_ADAM, "dormancy_decay"), (ct.DENSE_EQUIVALENT_ADAM, "dense_equivalent")],
)
def test_adam_contenders_match_the_optimizer_used_directly(name, mode):
    batches = SMALL.batches(4)
    table = SMALL.table()
    (contender,) = ct.select(ct.sparse_opt_contenders(), name)
    stepper = contender.make(table)
    reference = SMALL.table()
    opt = so.SparseAdamTable(reference, so.SparseAdamConfig(mode=mode))
    for ids, grads in batches:
        stepper.step(ids, grads)
        opt.step(so.CsrGradient.from_rows(ids, grads, SMALL.rows))
    assert table.tobytes() == reference.tobytes()
    assert stepper.optimizer.config == opt.config


def test_dense_equivalent_contender_caught_up_is_the_dense_adam_contender():
    """The benchmark compares like with like: same hyper-parameters, same trajectory once caught up."""
    de, dense = ct.select(ct.sparse_opt_contenders(), ct.DENSE_EQUIVALENT_ADAM, ct.DENSE_ADAM)
    table_de, table_dense = SMALL.table(), SMALL.table()
    lazy, full = de.make(table_de), dense.make(table_dense)
    for ids, grads in SMALL.batches(5):
        lazy.step(ids, grads)
        full.step(ids, grads)
    lazy.optimizer.catch_up()
    # float32, two operation orders (the catch-up's closed form against step-by-step Adam): parameters
    # agree to a few roundings of the table's scale (observed 0.4 eps), v to a few of its own (observed 2 ulps)
    eps32 = float(np.finfo(np.float32).eps)
    assert np.abs(table_de - table_dense).max() <= 4 * eps32 * np.abs(table_dense).max()
    np.testing.assert_allclose(lazy.optimizer.v, full.optimizer.v, rtol=8 * eps32, atol=0)


def test_contenders_write_their_zero_state_before_the_first_step():
    """map_pages: zeros written over zeros (no value changes; read-only views are left alone)."""
    ro = np.zeros(3)
    ro.flags.writeable = False
    rw = np.ones(3)
    ct.map_pages([ro, rw])
    assert rw.tolist() == [0.0, 0.0, 0.0] and ro.tolist() == [0.0, 0.0, 0.0]
    stepper = ct.select(ct.sparse_opt_contenders(), ct.LAZY_ADAM)[0].make(SMALL.table())
    m, v, last = stepper.state_arrays()
    assert not m.any() and not v.any() and not last.flags.writeable


def test_select_keeps_the_order_asked_and_names_the_choices():
    contenders = ct.sparse_opt_contenders()
    assert [c.name for c in ct.select(contenders, ct.DENSE_ADAM, ct.LAZY_ADAM)] == [ct.DENSE_ADAM, ct.LAZY_ADAM]
    with pytest.raises(KeyError, match="SparseAdamTable LAZY"):
        ct.select(contenders, "torch SparseAdam")
