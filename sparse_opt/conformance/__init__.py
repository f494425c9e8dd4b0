"""Which semantics does your optimizer implement? Conformance checks for sparse optimizers.

Public suites test a lazy update against a single step or a dense run; this
package runs small, named scenarios -- each isolating one semantic point (a row
touched, left dormant for ``k`` steps and touched again; repeated ids; empty
steps; eps placement; weight decay on dormant rows; ...) -- through a candidate
optimizer and compares its trajectory with every *reference*: the kit's modes
and the production variants (torch, TensorFlow, Keras, FBGEMM and HugeCTR; FBGEMM's
GPU-only Adam and HugeCTR modelled from published source), written as plain
numpy loops. The catalogue's *kernel form* (float32, 4 columns:
``scenarios(family, "kernel")``) is what production embedding kernels can run:
FBGEMM's CPU TBE optimizers and TorchRec are judged on it, live.

Check your own optimizer in a few lines::

    import numpy as np
    from sparse_opt.conformance import check

    class MySparseSgd:                       # the candidate protocol (see .candidate)
        family, claims = "sgd", "sgd_lazy"
        def __init__(self, table, hyper):
            self.p, self.buf, self.h = table.copy(), np.zeros_like(table), hyper
        def step(self, row_ids, row_grads):
            g = np.zeros_like(self.p); np.add.at(g, row_ids, row_grads)
            hit = np.unique(row_ids)
            self.buf[hit] = self.h.momentum * self.buf[hit] + g[hit] + self.h.weight_decay * self.p[hit]
            self.p[hit] -= self.h.lr * self.buf[hit]
        def table(self):
            return self.p

    print(check(MySparseSgd))                # verdict, first divergence, per-scenario errors

(This one ignores ``maximize`` and so diverges in ``sgd_maximize``: the report
says where.) A candidate with a ``read(rows)`` method is run as a training loop
instead, reading only the rows each step looks up (a catch-up on read is
checked across the gaps); a report is ``ok`` only when every scenario that
tells its semantics apart from another reference ran. A candidate with
``schedules = True`` takes learning-rate schedules (step ``t`` uses
``hyper.rate(t)``) and is also run on the schedule scenarios, whose rates
change inside dormant gaps: there dense training (``dense_adamw``,
``sgd_dense``) is told from the production catch-up that gives every skipped
step the current rate (``current_rate``, ``sgd_current_rate``: TorchRec, FBGEMM
``DECOUPLE_GLOBAL``, HugeCTR ``LazyGlobal``, modelled). ``python -m sparse_opt.conformance export DIR`` writes the
scenarios with every reference's expected trajectory as JSON
(``docs/conformance_schema.md``) for implementations in other languages, and
``check-vectors DIR`` reads them back.

Only numpy is needed; the torch, TensorFlow, FBGEMM and TorchRec adapters
import their library when built. Recorded runs of the real libraries live in
``tests/conformance`` (FBGEMM's and TorchRec's in its ``fbgemm/`` and
``torchrec/``); ``make test-live`` re-runs them.
"""

from sparse_opt.conformance.candidate import Candidate, Run, run
from sparse_opt.conformance.case import Scenario, Step
from sparse_opt.conformance.catalogue import SCENARIOS, scenario, scenarios
from sparse_opt.conformance.hyper import FAMILIES, Hyper
from sparse_opt.conformance.recording import Recording, record
from sparse_opt.conformance.report import Divergence, Report, ScenarioResult
from sparse_opt.conformance.semantics import REFERENCES, Reference, expected, reference, references
from sparse_opt.conformance.tolerance import Deviation, Expected
from sparse_opt.conformance.vectors import Vector, check_vectors, export_vectors, load_vectors, verify_vectors
from sparse_opt.conformance.verdict import check, judge

__all__ = [
    "Candidate",
    "Deviation",
    "Divergence",
    "Expected",
    "FAMILIES",
    "Hyper",
    "REFERENCES",
    "Recording",
    "Reference",
    "Report",
    "Run",
    "SCENARIOS",
    "Scenario",
    "ScenarioResult",
    "Step",
    "Vector",
    "check",
    "check_vectors",
    "expected",
    "export_vectors",
    "judge",
    "load_vectors",
    "record",
    "reference",
    "references",
    "run",
    "scenario",
    "scenarios",
    "verify_vectors",
]
