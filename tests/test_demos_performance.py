"""The performance tooling as a whole: what imports what, and the benchmark harness in ``benchmarks/``.

Notebook 07's helpers (``sparse_opt.demos.workload``, ``contenders``, ``timing``,
``memory``, ``perf_plots``) have their own test modules. Here: ``import
sparse_opt`` and the measuring helpers need numpy only (no torch, no
matplotlib); only ``perf_plots`` needs matplotlib, and never pyplot; torch is
imported by ``benchmarks/torch_contenders.py`` alone. Then the harness:
machine report, torch adapters, command line, and one tiny run of the whole
benchmark (sizes small enough for a second; its clocks are not checked).
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparse_opt.demos.contenders import DENSE_ADAM, DENSE_EQUIVALENT_ADAM, DORMANCY_ADAM, LAZY_ADAM
from sparse_opt.demos.timing import StepTiming
from sparse_opt.demos.workload import Workload

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMALL = Workload(rows=500, cols=4, batch=64, seed=3)


def imported_after(statement):
    """The top-level packages a fresh interpreter has imported after ``statement``, as a set of names."""
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_sparse_opt_and_the_measuring_helpers_need_numpy_only():
    modules = imported_after(
        "import sparse_opt, sparse_opt.demos.workload, sparse_opt.demos.contenders,"
        " sparse_opt.demos.timing, sparse_opt.demos.memory"
    )
    assert "numpy" in modules
    assert not {m for m in modules if m.split(".")[0] in ("torch", "matplotlib")}


def test_plots_need_matplotlib_but_not_pyplot_or_torch():
    modules = imported_after("import sparse_opt.demos.perf_plots")
    assert "matplotlib.figure" in modules
    assert "matplotlib.pyplot" not in modules and "torch" not in modules


@pytest.fixture
def bench(monkeypatch):
    """The benchmark script and its harness modules, imported as the script imports them."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_sparse_step
    import machine
    import torch_contenders

    return bench_sparse_step, machine, torch_contenders


def test_machine_info_and_its_format(bench):
    _, machine, _ = bench
    info = machine.machine_info()
    for key in ("cpu", "logical cpus", "numpy", "sparse_opt", "torch", "OPENBLAS_CORETYPE", "load average (1, 5, 15 min)"):
        assert key in info
    assert info["numpy"] == np.__version__ and info["torch"] == "not compared"
    assert len(info["load average (1, 5, 15 min)"].split(", ")) == 3
    text = machine.format_machine_info(info)
    assert text.count("\n") == len(info) - 1 and len({line.index(" : ") for line in text.splitlines()}) == 1


def test_torch_contenders_without_torch(bench, monkeypatch):
    _, _, tc = bench
    assert tc.torch_contenders(None) == []
    monkeypatch.setattr(tc.importlib.util, "find_spec", lambda name: None)
    assert tc.load_torch() is None


def test_torch_contenders_step_the_touched_rows_and_hold_m_and_v(bench):
    pytest.importorskip("torch")
    _, _, tc = bench
    from sparse_opt.demos.memory import state_bytes_per_param

    torch = tc.load_torch()
    contenders = tc.torch_contenders(torch)
    assert [(c.name, c.dense, c.library) for c in contenders] == [
        (tc.SPARSE_ADAM, False, "torch"),
        (tc.DENSE_ADAM, True, "torch"),
    ]
    ids, grads = SMALL.batches(1)[0]
    for c in contenders:
        table = SMALL.table()
        before = table.copy()
        c.make(table).step(ids, grads)  # torch.from_numpy shares the table's memory
        np.testing.assert_array_equal(np.flatnonzero((table != before).any(axis=1)), np.unique(ids))
        assert state_bytes_per_param(c) == 8.0


def test_command_line_defaults_full_and_quick(bench):
    b, _, _ = bench
    full, quick = b.parse_args([]), b.parse_args(["--quick"])
    assert (full.rows, full.cols, full.batch, full.repeats, full.dense_repeats) == (1_000_000, 64, 4096, 300, 5)
    assert (quick.rows, quick.batch, quick.repeats) == (100_000, 1024, 30)
    assert quick.sweep_rows == [10_000, 100_000, 1_000_000]
    assert b.parse_args(["--quick", "--rows", "7"]).rows == 7
    assert b.parse_args(["--repeats", "2"]).dense_repeats == 2  # never more dense steps than rounds


GOAL_TABLE = Workload(rows=1_000_000, cols=64, batch=4096, seed=7)


def test_dense_equivalent_goals_are_read_off_one_run(bench):
    b, _, _ = bench
    assert b.on_goal_table(GOAL_TABLE) and not b.on_goal_table(SMALL)
    ms = {DENSE_EQUIVALENT_ADAM: 2.0, DORMANCY_ADAM: 1.0, "torch Adam (dense)": 500.0, DENSE_ADAM: 90.0}
    run = [StepTiming(name, GOAL_TABLE, 1.0, (m / 1e3,)) for name, m in ms.items()]
    lines = b.dense_equivalent_goals(run).splitlines()
    assert "2.00x the step time of SparseAdamTable DORMANCY_DECAY" in lines[1] and lines[1].endswith("goal met")
    assert "250.0x faster than torch Adam (dense)" in lines[2] and lines[2].endswith("goal met")
    assert "45.00x faster than DenseAdam" in lines[3]
    slow = [StepTiming(t.contender, t.workload, t.nnz, (20 * t.seconds[0],)) if t.contender == DENSE_EQUIVALENT_ADAM else t for t in run]
    assert b.dense_equivalent_goals(slow).count("GOAL NOT MET") == 2
    no_torch = b.dense_equivalent_goals([t for t in run if "torch" not in t.contender])
    assert "torch Adam (dense): not timed" in no_torch
    assert b.dense_equivalent_goals(run[1:]) == f"{DENSE_EQUIVALENT_ADAM}: not timed"
    elsewhere = b.dense_equivalent_goals([StepTiming(t.contender, SMALL, t.nnz, t.seconds) for t in slow])
    assert "GOAL NOT MET" not in elsewhere and elsewhere.count("not judged") == 2


def test_a_tiny_full_run():
    """The script as it is run (its own interpreter: the harness is found beside it), at sizes that take a second."""
    argv = "--no-torch --rows 3000 --cols 4 --batch 32 --repeats 4 --warmup 1 --dense-repeats 2"
    argv += " --sweep-rows 3000 6000 --sweep-batch 8 32"
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_sparse_step.py"), *argv.split()], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for heading in ("Machine", "Main comparison", "Table rows sweep", "Batch sweep", "Memory", "After the run"):
        assert f"## {heading}" in out
    assert "torch: not compared" in out and "speed-up vs" not in out
    assert "x the step time of SparseAdamTable DORMANCY_DECAY" in out
    assert "torch Adam (dense): not timed" in out
    main_table = out.split("## Main comparison")[1].split("##")[0]
    for name in (LAZY_ADAM, DORMANCY_ADAM, DENSE_EQUIVALENT_ADAM, DENSE_ADAM):
        assert f"\n{name} " in main_table
    assert "catch-up weights by global step" in out
