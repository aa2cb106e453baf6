"""Scaling on real GPUs (run on the two-GPU machine: pytest -m multi_gpu)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.multi_gpu
def test_two_gpus_train_with_nccl_and_time_the_gradient_all_reduce() -> None:
    from tfaccel.optimize.settings import Settings
    from tfaccel.scale.runner import run_scale
    from tfaccel.trial.runner import StepPlan

    points = run_scale(
        "tiny",
        [1, 2],
        Settings(precision="mixed_bfloat16", xla="jit", batch_size=256, steps_per_execution=5),
        StepPlan(5, 2, 10),
        timeout_s=600,
        cross_device_ops="nccl",  # "auto" picked CollectiveAllReduce on the H200 pair
    )
    assert [p.status for p in points] == ["ok", "ok"], [p.error for p in points]
    two = points[1]
    assert two.engine == "tfaccel step" and two.global_batch == 512
    assert two.cross_device_ops == "NcclAllReduce"
    assert two.allreduce_ms is not None and two.allreduce_ms > 0


@pytest.mark.multi_gpu
def test_allreduce_bus_bandwidth_is_an_nvlink_or_pcie_figure() -> None:
    """A replica all-reduce of 256 MiB, not a gather to the host (which read 17 GB/s)."""
    script = (
        "from tfaccel.bench import micro\n"
        "m = micro.allreduce(256, repeats=5, number=5)\n"
        "print('BUSBW', m.median)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("BUSBW")), None)
    assert line is not None, out.stderr[-2000:]
    busbw = float(line.split()[1])
    # PCIe Gen4 x16 moves about 25 GB/s; NVLink machines far more. Below that, the
    # measurement is not an all-reduce among the GPUs.
    assert busbw > 25, busbw
