"""trial.parallel: a trial on several replicas with tfaccel's step (`extra`'s
`logical_cpus` makes CPU replicas), and the all-reduce implementations by name."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from tfaccel.optimize.settings import Settings
from tfaccel.trial.parallel import CROSS_DEVICE_OPS, cross_device_ops
from tfaccel.trial.runner import StepPlan, run_trial


def test_a_trial_on_two_cpu_replicas_reports_the_step_and_its_all_reduce() -> None:
    s = Settings(precision="float32", xla="off", batch_size=8, strategy="mirrored")
    extra = {"logical_cpus": 2, "cross_device_ops": "one-device"}
    r = run_trial("tiny", s, StepPlan(warmup=2, windows=2, window=3), 180, extra=extra)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["engine"] == "tfaccel step" and r.extra["replicas"] == 2
    assert r.extra["global_batch"] == 16  # the batch size is per replica
    assert r.extra["cross_device_ops"] == "ReductionToOneDevice"
    assert r.extra["allreduce_ms"] > 0
    assert len(r.windows) == 2 and all(x == x for x in r.losses)


def test_all_reduce_implementations_by_name() -> None:
    assert cross_device_ops("auto") is None  # TensorFlow chooses
    made = {name: type(cross_device_ops(name)).__name__ for name in CROSS_DEVICE_OPS[1:]}
    assert made == {
        "nccl": "NcclAllReduce",
        "hierarchical": "HierarchicalCopyAllReduce",
        "one-device": "ReductionToOneDevice",
    }
    with pytest.raises(ValueError, match="expected one of"):
        cross_device_ops("ring")
