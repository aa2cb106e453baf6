"""A data-parallel training step that keeps XLA per replica.

Keras `fit` under MirroredStrategy fails with XLA, with steps_per_execution > 1 and with
mixed_float16's loss-scale optimizer (its synchronisation sits inside compiled code).
This step does what TensorFlow's model garden does instead: each replica computes its
loss and gradients in an XLA-compiled function; the all-reduce and the optimizer update
run outside it, in the replica context; `steps_per_execution` steps loop inside one
tf.function. float16 uses a fixed loss scale and skips a step whose gradients are not
finite; bfloat16 and float32 need no scaling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tfaccel._tf import import_tensorflow


class DistributedTrainer:
    """Train `model` with `strategy` (build model and optimizer inside strategy.scope())."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        loss: Any,
        strategy: Any,
        global_batch: int,
        jit: bool = True,
        steps_per_execution: int = 1,
        loss_scale: float | None = None,
    ) -> None:
        import keras

        tf = import_tensorflow()
        self.tf = tf
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.global_batch = global_batch
        self.steps_per_execution = steps_per_execution
        self.loss_scale = loss_scale
        base = keras.losses.get(loss) if isinstance(loss, str) else loss
        if isinstance(base, keras.losses.Loss):
            config = base.get_config()
            config["reduction"] = None  # per-example losses, scaled by the global batch
            self.loss_fn = type(base).from_config(config)
        else:
            self.loss_fn = base  # a loss function already returns per-example values
        with strategy.scope():
            optimizer.build(model.trainable_variables)
        scale = loss_scale or 1.0

        def grads(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                pred = model(x, training=True)
                per_example = tf.cast(self.loss_fn(y, pred), tf.float32)
                loss = tf.reduce_sum(per_example) / global_batch
                scaled = loss * scale
            g = tape.gradient(scaled, model.trainable_variables)
            return loss, [tf.cast(gi, tf.float32) / scale if gi is not None else gi for gi in g]

        self._grads = tf.function(grads, jit_compile=jit)

        def replica_step(x: Any, y: Any) -> Any:
            loss, g = self._grads(x, y)
            if loss_scale:
                # Skip a step whose gradients overflowed on any replica: every replica
                # agrees through an all-reduce of the flag, and the update gets zeros.
                ok = tf.cast(
                    tf.reduce_all([tf.reduce_all(tf.math.is_finite(gi)) for gi in g]), tf.float32
                )
                ctx = tf.distribute.get_replica_context()
                replicas = float(strategy.num_replicas_in_sync)
                ok = ctx.all_reduce(tf.distribute.ReduceOp.SUM, ok)  # == replicas if all ok
                g = [tf.where(ok >= replicas, gi, tf.zeros_like(gi)) for gi in g]
            # Keras' optimizer all-reduces the gradients itself in a replica context.
            self._apply(g)
            return loss

        @tf.function
        def run_steps(iterator: Iterator[Any], k: Any) -> Any:
            total = tf.constant(0.0)
            for _ in tf.range(k):
                x, y = next(iterator)
                per = strategy.run(replica_step, args=(x, y))
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)
            return total / tf.cast(k, tf.float32)

        self._run_steps = run_steps

    def _apply(self, grads: Any) -> Any:
        variables = self.model.trainable_variables
        self.optimizer.apply(
            [self.tf.cast(g, v.dtype) for g, v in zip(grads, variables, strict=True)], variables
        )
        return self.tf.constant(True)

    def distribute(self, dataset: Any) -> Iterator[Any]:
        """An iterator over `dataset` (batched at the global batch) split across replicas."""
        return iter(self.strategy.experimental_distribute_dataset(dataset))

    def run(self, iterator: Iterator[Any], executions: int = 1) -> list[float]:
        """Run `executions` x steps_per_execution steps; returns the mean loss of each."""
        k = self.tf.constant(self.steps_per_execution)
        return [float(self._run_steps(iterator, k)) for _ in range(executions)]


def per_replica_values(strategy: Any, make: Callable[[Any], Any]) -> Any:
    """Distributed values made by `make(ctx)`, each placed on its own replica's device.

    `strategy.experimental_distribute_values_from_function` leaves placement to the
    caller: without a device scope every replica's value lands on the default device.
    """
    tf = import_tensorflow()
    devices = strategy.extended.worker_devices

    def value_fn(ctx: Any) -> Any:
        with tf.device(devices[ctx.replica_id_in_sync_group]):
            return tf.nest.map_structure(tf.identity, make(ctx))

    return strategy.experimental_distribute_values_from_function(value_fn)
