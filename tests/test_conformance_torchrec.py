"""TorchRec (``EmbeddingBagCollection`` + ``DistributedModelParallel`` + fused optimizers), judged: recorded verdicts
(numpy only), a second route (the numpy replay of FBGEMM's CPU update the fused kernel runs), the live run
reproducing the recordings bit for bit, and two processes sharding the table giving the same tables and verdicts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_conformance_fbgemm import _replay

from sparse_opt.conformance import Recording, check
from sparse_opt.conformance.catalogue import kernel_scenarios

HERE = Path(__file__).resolve().parent / "conformance" / "torchrec"

#: Recording -> verdict on the kernel form. SGD: TorchRec hands momentum = 0.9 to EXACT_SGD, which drops it.
VERDICTS = {
    "TorchrecSgd": (),
    "TorchrecAdagrad": ("adagrad", "adagrad_no_decay"),
    "TorchrecRowwiseAdagrad": ("rowwise_adagrad", "rowwise_no_decay"),
}
#: What the fused kernel is, for the replay: (rule, decay).
REPLAYS = {"TorchrecSgd": "sgd", "TorchrecAdagrad": "adagrad", "TorchrecRowwiseAdagrad": "rowwise"}


def _load(name: str) -> Recording:
    return Recording.load(HERE / f"{name}.npz")


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_recorded_torchrec_verdict(name):
    recording = _load(name)
    assert recording.form == "kernel" and recording.versions["torchrec"] == "1.8.0"
    report = check(recording)
    assert report.verdict == VERDICTS[name] and not report.ok


def test_torchrec_fused_sgd_drops_momentum_and_decay_silently():
    report = check(_load("TorchrecSgd"))
    d = report.divergence
    assert (d.reference, d.scenario, d.step) == ("sgd_lazy", "sgd_gap_f32x4", 2)  # momentum's first push
    m0 = [s for s in kernel_scenarios("sgd") if s.name.endswith("_m0")]
    plain = check(_load("TorchrecSgd"), scenarios=m0)
    assert plain.verdict == ("tf_momentum", "sgd_no_decay")  # without momentum: SGD that ignores weight_decay


@pytest.mark.parametrize("name", sorted(REPLAYS))
def test_numpy_replay_of_the_fused_kernel_gives_the_recorded_tables(name):
    """Second route: FBGEMM's CPU update (momentum and decay dropped) replayed in numpy, bit for bit."""
    recording, ran = _load(name), 0
    for s in kernel_scenarios(recording.family, schedules=recording.schedules):
        run = recording.runs[s.name]
        if run.trajectory is not None:
            np.testing.assert_array_equal(run.trajectory, _replay(s, REPLAYS[name], "none"), err_msg=s.name)
            ran += 1
    assert ran >= 6


# --------------------------------------------------------------------------- live


@pytest.fixture(scope="module")
def torchrec():
    pytest.importorskip("torchrec")
    from sparse_opt.conformance.adapters import torchrec as adapters

    return adapters


def _same(live: Recording, recorded: Recording) -> None:
    assert live.runs.keys() == recorded.runs.keys()
    for key, run in live.runs.items():
        was = recorded.runs[key]
        same_reason = run.skipped.replace(live.candidate, recorded.candidate)  # the sharded adapter's name differs
        assert (same_reason, run.error) == (was.skipped, was.error), key
        if run.trajectory is not None:
            np.testing.assert_array_equal(run.trajectory, was.trajectory, err_msg=f"{live.candidate} {key}")


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_live_torchrec_reproduces_its_recording_bit_for_bit(torchrec, name):
    from sparse_opt.conformance import record

    _same(record(getattr(torchrec, name)), _load(name))


def test_two_processes_sharding_the_table_give_the_same_tables_and_verdicts(torchrec):
    """Rows split over two ranks (two tables placed table-wise: TorchRec 1.8.0 has no row-wise sharding on CPU);
    steps on which rank 1's rows get no id still leave every row where one process leaves it."""
    recordings, shards = torchrec.record_sharded()
    assert {rank: set(map(tuple, rows["TorchrecRowwiseAdagrad"])) for rank, rows in shards.items()} == {
        0: {(0, 2)}, 1: {(2, 2)}}
    idle = 0
    for name, live in recordings.items():
        _same(live, _load(name))  # the same tables, bit for bit, as the single process
        assert check(live).verdict == VERDICTS[name]
        for s in kernel_scenarios(live.family):
            run = live.runs.get(s.name)  # a constant-rate candidate is not run on the schedule scenarios
            if run is not None and run.trajectory is not None:
                idle += sum(not np.any(step.row_ids >= 2) for step in s.steps)
    assert idle > 50  # steps on which rank 1 got no id, all checked
