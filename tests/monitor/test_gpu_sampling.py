"""Real sampling on the GPU machine: a matmul load must show up in the readings."""

from __future__ import annotations

import threading
import time

import pytest


@pytest.mark.gpu
def test_matmul_load_raises_utilization_and_power() -> None:
    tf = pytest.importorskip("tensorflow")
    from tfaccel.monitor.sampler import Sampler

    # The GPU TensorFlow calls GPU:0 (CUDA_VISIBLE_DEVICES may pick another).
    with Sampler("visible", interval_s=0.2) as sampler:
        time.sleep(1.5)
        idle = sampler.latest
        stop = threading.Event()

        def load() -> None:
            with tf.device("/GPU:0"):
                a = tf.random.normal((8192, 8192), dtype=tf.bfloat16)
                while not stop.is_set():
                    for _ in range(20):
                        a = tf.linalg.matmul(a, a) * 0.01
                    float(tf.reduce_sum(a[:1, :1]))

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(6)  # NVML's power reading averages over about a second
        busy = sampler.history(since=time.time() - 3)
        stop.set()
        worker.join()
    assert idle is not None and busy
    util = max(s.gpus[0].util_gpu_pct or 0 for s in busy)
    power = max(s.gpus[0].power_w or 0 for s in busy)
    assert util > 50, util
    assert power > (idle.gpus[0].power_w or 0) + 50, (power, idle.gpus[0].power_w)
