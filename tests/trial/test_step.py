"""trial.step: tfaccel's data-parallel training step (XLA per replica, the fused
optimizer update, gradient accumulation, several outputs), on CPU replicas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

TRAINER = """
import json
import numpy as np, tensorflow as tf, keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfaccel.trial.step import DistributedTrainer
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
out = {}
for policy, scale in (("float32", None), ("mixed_bfloat16", None), ("mixed_float16", 1024.0)):
    keras.mixed_precision.set_global_policy(policy)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(4)])
        opt = keras.optimizers.SGD(0.1)
    t = DistributedTrainer(model, opt, "mse", strategy, 32, jit=True, steps_per_execution=5,
                           loss_scale=scale)
    rng = np.random.default_rng(0)
    x = rng.random((320, 8), dtype=np.float32); y = rng.random((320, 4), dtype=np.float32)
    losses = t.run(t.distribute(tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()), 3)
    diff = max(float(np.abs(v.value.values[0].numpy() - v.value.values[1].numpy()).max())
               for v in model.trainable_variables)
    out[policy] = {"losses": losses, "replica_diff": diff, "update": t.update_path}
print("RESULT " + json.dumps(out))
"""


def _run_cpu_script(tmp_path: Path, source: str) -> dict[str, Any]:
    """Run `source` in a fresh CPU-only process; the JSON of its `RESULT ` line."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(Path(__file__).parents[2] / "src"),
    }
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])


def test_trainer_keeps_replicas_identical_in_every_precision(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    result = _run_cpu_script(tmp_path, TRAINER)
    for policy, r in result.items():
        assert r["replica_diff"] == 0.0, policy
        assert r["losses"][-1] < r["losses"][0], (policy, r["losses"])
        assert r["update"] == "xla per replica", policy


FUSED = """
import json
import numpy as np, tensorflow as tf, keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfaccel.trial.step import DistributedTrainer
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
out = {}
for fuse in (False, True):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(4)])
        opt = keras.optimizers.AdamW(0.01, weight_decay=0.01)
    t = DistributedTrainer(model, opt, "mse", strategy, 32, jit=True, steps_per_execution=5,
                           fuse_update=fuse)
    rng = np.random.default_rng(0)
    x = rng.random((320, 8), dtype=np.float32); y = rng.random((320, 4), dtype=np.float32)
    it = t.distribute_per_replica(
        lambda ctx: tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat())
    losses = t.run(it, 3)
    out[str(fuse)] = {
        "losses": losses,
        "update": t.update_path,
        "error": t.update_error,
        "iterations": int(opt.iterations.numpy()),
        "replica_diff": max(float(np.abs(a.numpy() - b.numpy()).max())
                            for a, b in (v.value.values for v in model.trainable_variables)),
        "weights": [v.value.values[0].numpy().ravel().tolist() for v in model.trainable_variables],
    }

# An optimizer whose update cannot be compiled: the trainer falls back and says why.
class NoXla(keras.optimizers.SGD):
    def update_step(self, gradient, variable, learning_rate):
        from tensorflow.python.ops import control_flow_util
        graph = tf.compat.v1.get_default_graph()
        if control_flow_util.GraphOrParentsInXlaContext(graph):
            raise NotImplementedError("no XLA for this optimizer")
        return super().update_step(gradient, variable, learning_rate)

with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    opt = NoXla(0.1)
t = DistributedTrainer(model, opt, "mse", strategy, 32, jit=True, steps_per_execution=5)
losses = t.run(t.distribute_per_replica(
    lambda ctx: tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()), 3)
out["fallback"] = {"losses": losses, "update": t.update_path, "error": t.update_error,
                   "iterations": int(opt.iterations.numpy())}
print("RESULT " + json.dumps(out))
"""


def test_fused_update_matches_keras_per_variable_update(tmp_path: Path) -> None:
    """The XLA-per-replica optimizer update (AdamW, with weight decay) lands on the same
    weights as Keras' own per-variable update, on both replicas, with per-replica input."""
    pytest.importorskip("tensorflow")
    import numpy as np

    r = _run_cpu_script(tmp_path, FUSED)
    keras_path, fused = r["False"], r["True"]
    assert keras_path["update"] == "keras per variable"
    assert fused["update"] == "xla per replica" and fused["error"] is None
    assert fused["iterations"] == keras_path["iterations"] == 15
    assert fused["replica_diff"] == 0.0
    np.testing.assert_allclose(fused["losses"], keras_path["losses"], rtol=1e-5)
    for a, b in zip(fused["weights"], keras_path["weights"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert keras_path["losses"][-1] < keras_path["losses"][0]
    fallback = r["fallback"]
    assert fallback["update"] == "keras per variable"
    assert "no XLA for this optimizer" in fallback["error"]
    assert len(fallback["losses"]) == 3 and fallback["iterations"] == 15


ACCUMULATE = """
import json
import numpy as np, tensorflow as tf, keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfaccel.trial.step import DistributedTrainer
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
rng = np.random.default_rng(0)
x = rng.random((128, 8), dtype=np.float32); y = rng.random((128, 4), dtype=np.float32)
out = {}
for name, batch, steps in (("accumulated", 32, 2), ("one batch", 64, None)):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        opt = keras.optimizers.SGD(0.1, gradient_accumulation_steps=steps)
    t = DistributedTrainer(model, opt, "mse", strategy, batch, jit=True)
    it = t.distribute(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).repeat())
    t.run(it, 2)
    out[name] = {"weights": [v.value.values[0].numpy().ravel().tolist()
                             for v in model.trainable_variables],
                 "iterations": int(opt.iterations.numpy()), "per_step": t.samples_per_step}
print("RESULT " + json.dumps(out))
"""


def test_accumulated_gradients_update_like_one_large_batch(tmp_path: Path) -> None:
    """Keras' own accumulation fails under MirroredStrategy (its all-reduce sits in a
    cond); the trainer sums the batches' gradients and applies once."""
    pytest.importorskip("tensorflow")
    result = _run_cpu_script(tmp_path, ACCUMULATE)
    acc, big = result["accumulated"], result["one batch"]
    assert acc["iterations"] == big["iterations"] == 2  # two updates each
    assert acc["per_step"] == big["per_step"] == 64
    for a, b in zip(acc["weights"], big["weights"], strict=True):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6)


def test_the_step_trains_a_model_with_several_outputs() -> None:
    """tfaccel's step sums each output's loss; over the batch it is Keras' own total."""
    tf = pytest.importorskip("tensorflow")
    import keras
    import numpy as np

    from tfaccel.trial.step import DistributedTrainer
    from tfaccel.workloads.loss import per_example_loss

    losses = {"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "box": "mse"}
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inp = keras.Input((8,))
        out = {"cls": keras.layers.Dense(3)(inp), "box": keras.layers.Dense(4)(inp)}
        model = keras.Model(inp, out)
        opt = keras.optimizers.SGD(0.1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype("float32")
    teacher = rng.normal(size=(8, 7))  # labels a fixed teacher gives: learnable
    y = {
        "cls": (x @ teacher[:, :3]).argmax(axis=1).astype("int32"),
        "box": (x @ teacher[:, 3:]).astype("float32"),
    }
    mine = float(per_example_loss(losses)(y, model(x))) / 64
    model.compile(loss=losses)
    keras_total = float(model.compute_loss(x=x, y=y, y_pred=model(x)))
    assert mine == pytest.approx(keras_total, rel=1e-5)
    t = DistributedTrainer(model, opt, losses, strategy, 16, jit=False, steps_per_execution=2)
    run = t.run(t.distribute(tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()), 8)
    assert all(np.isfinite(run)) and run[-1] < run[0] / 2, run
