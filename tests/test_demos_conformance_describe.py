"""describe() says when a verdict is not conclusive, as the report's first line does."""

from __future__ import annotations

import numpy as np

import sparse_opt as so
from sparse_opt import conformance
from sparse_opt.demos.conformance_demo import describe


class WholeRowsLazyAdam:
    """SparseAdamTable(LAZY) behind the candidate protocol; it takes complete rows only (no step_entries)."""

    family, claims = "adam", "lazy"

    def __init__(self, table, hyper):
        self.params = np.array(table)
        config = so.SparseAdamConfig(lr=hyper.lr, beta1=hyper.beta1, beta2=hyper.beta2, eps=hyper.eps,
                                     weight_decay=hyper.weight_decay, maximize=hyper.maximize, mode="lazy")
        self.opt = so.SparseAdamTable(self.params, config)

    def step(self, row_ids, row_grads):
        self.opt.step(so.CsrGradient.from_rows(row_ids, row_grads, self.params.shape[0]))

    def table(self):
        return self.params.copy()


def test_a_skipped_scenario_that_tells_the_semantics_apart_is_named_as_not_conclusive():
    report = conformance.check(WholeRowsLazyAdam)
    assert report.semantics == "lazy" and report.unrun == ("adam_incomplete_rows",) and not report.ok
    assert "not conclusive" in str(report).splitlines()[0]
    text = describe(report)
    assert text.startswith("WholeRowsLazyAdam implements lazy (12 of 12 scenarios); 1 skipped (adam_incomplete_rows)")
    assert "; not conclusive: adam_incomplete_rows would tell it apart from other references." in text


def test_a_conclusive_verdict_says_nothing_of_the_kind():
    report = conformance.check(conformance.adapters.kit.KitAdamLazy)
    assert report.ok and "not conclusive" not in describe(report)
