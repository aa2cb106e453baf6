"""A data-parallel training step that keeps XLA per replica.

Keras `fit` under MirroredStrategy fails with XLA, with steps_per_execution > 1 and with
mixed_float16's loss-scale optimizer (its synchronisation sits inside compiled code).
This step does what TensorFlow's model garden does instead: each replica computes its
loss and gradients in an XLA-compiled function; the all-reduce and the optimizer update
run outside it, in the replica context; `steps_per_execution` steps loop inside one
tf.function. float16 uses a fixed loss scale and skips a step whose gradients are not
finite; bfloat16 and float32 need no scaling.

Gradient accumulation: Keras' optimizer (`gradient_accumulation_steps`) decides in a
`cond` whether to apply, with the all-reduce inside it, which a MirroredStrategy refuses
("merge_call called while defining a new graph"). Here one step takes that many
batches, sums their gradients on each replica, and all-reduces and applies once: the
same update, one synchronisation per update instead of none that works.

The optimizer update: Keras' TensorFlow optimizer updates each variable on each device
as its own small graph (for ResNet-50 with Adam about 1,600 kernel launches per replica
and step). With `fuse_update` the update of all variables runs as one XLA-compiled
function per replica instead, in the same cross-replica update context Keras uses (so
the optimizer's own `update_step` math runs unchanged). If that cannot be traced for an
optimizer, the trainer falls back to Keras' path and says why (`update_error`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tfaccel._tf import import_tensorflow, tf_internal
from tfaccel.workloads.loss import per_example_loss


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
        fuse_update: bool | None = None,
        host_cast: Any = None,
    ) -> None:
        tf = import_tensorflow()
        self.tf = tf
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.global_batch = global_batch
        self.steps_per_execution = steps_per_execution
        # The optimizer's own accumulation moves here (see the module doc).
        target = getattr(optimizer, "inner_optimizer", None) or optimizer
        self.accumulate = int(getattr(target, "gradient_accumulation_steps", None) or 1)
        if self.accumulate > 1:
            target.gradient_accumulation_steps = None
        self.samples_per_step = global_batch * self.accumulate
        self.loss_scale = loss_scale
        # per-example losses (summed over a model's outputs), scaled by the global batch
        self.loss_fn = per_example_loss(loss)
        with strategy.scope():
            optimizer.build(model.trainable_variables)
        self.update_path = "keras per variable"
        self.update_error: str | None = None
        if jit if fuse_update is None else fuse_update:
            self._fuse_update(jit=jit)
        scale = loss_scale or 1.0

        def grads(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                pred = model(x, training=True)
                per_example = tf.cast(self.loss_fn(y, pred), tf.float32)
                loss = tf.reduce_sum(per_example) / global_batch
                scaled = loss * scale
            gradients = tape.gradient(scaled, model.trainable_variables)
            # Embedding gradients come as IndexedSlices; dense ones all-reduce in one
            # NCCL call (a BERT batch's slices are larger than the dense table).
            gradients = [
                tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad
                for grad in gradients
            ]
            return loss, [
                tf.cast(grad, tf.float32) / scale if grad is not None else grad
                for grad in gradients
            ]

        self._grads = tf.function(grads, jit_compile=jit)
        self.host_cast = tf.as_dtype(host_cast) if host_cast is not None else None
        host = strategy.extended.worker_devices[0].rsplit("/device:", 1)[0] + "/device:CPU:0"

        def stage(tensor: Any) -> Any:
            # A host op whose consumer is on a GPU gets its output allocated in pinned
            # host memory, so its copy is a DMA that need not wait like a pageable one.
            if not tensor.dtype.is_floating or tensor.dtype == self.host_cast:
                return tensor
            with tf.device(host):
                return tf.cast(tensor, self.host_cast)

        def replica_step(batches: Any) -> Any:
            losses, grads_of = [], []
            for x, y in batches:  # the accumulated batches of one update
                if self.host_cast is not None:
                    x = tf.nest.map_structure(stage, x)
                loss, gradients = self._grads(x, y)
                losses.append(loss)
                grads_of.append(gradients)
            loss = tf.add_n(losses) / len(losses)
            gradients = [
                None if per_batch[0] is None else tf.add_n(list(per_batch)) / len(per_batch)
                for per_batch in zip(*grads_of, strict=True)
            ]
            if loss_scale:
                gradients = self._zero_if_overflow(gradients)
            # Keras' optimizer all-reduces the gradients itself in a replica context.
            self._apply(gradients)
            return loss

        def run_steps(iterator: Iterator[Any], count: Any) -> Any:
            total = tf.constant(0.0)
            for _ in tf.range(count):
                batches = [next(iterator) for _ in range(self.accumulate)]
                per = strategy.run(replica_step, args=(batches,))
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)
            return total / tf.cast(count, tf.float32)

        self._make_run_steps = lambda: tf.function(run_steps)
        self._run_steps = self._make_run_steps()
        self._traced = False

    def _zero_if_overflow(self, gradients: list[Any]) -> list[Any]:
        """Skip a step whose gradients overflowed on any replica: every replica agrees
        through an all-reduce of the flag, and the update gets zeros."""
        tf = self.tf
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(grad)) for grad in gradients])
        ctx = tf.distribute.get_replica_context()
        ok = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(finite, tf.float32))
        replicas = float(self.strategy.num_replicas_in_sync)  # ok == replicas: all finite
        return [tf.where(ok >= replicas, grad, tf.zeros_like(grad)) for grad in gradients]

    def _fuse_update(self, jit: bool) -> None:
        """One XLA-compiled update of every variable per replica (see the module doc).

        It takes the place of the optimizer's `_distributed_tf_update_step`, which Keras
        calls through merge_call with the all-reduced gradients: one
        `extended.update` runs a function on each replica's device inside that replica's
        update context, where reads and writes of mirrored variables (weights, slots,
        the iteration count) resolve to the replica's own copy."""
        import keras

        distribute_lib = tf_internal("python.distribute.distribute_lib")

        tf = self.tf
        # A LossScaleOptimizer applies through its inner optimizer: patch that one.
        optimizer = self._update_target()
        compiled: dict[int, Any] = {}  # one function per replica: each captures its copies

        def fused(distribution: Any, grads_and_vars: Any, learning_rate: Any) -> None:
            pairs = [(grad, variable) for grad, variable in grads_and_vars if grad is not None]
            if not pairs:
                return
            variables = [variable for _, variable in pairs]

            def on_replica(_first: Any, *grads: Any) -> Any:
                i = distribute_lib.get_update_replica_id()
                if i not in compiled:

                    def update(grads: Any, lr: Any) -> Any:
                        for grad, variable in zip(grads, variables, strict=True):
                            optimizer.update_step(grad, variable, lr)
                        return tf.constant(True)

                    compiled[i] = tf.function(update, jit_compile=jit)
                lr = learning_rate
                if isinstance(lr, keras.Variable):  # read here: this replica's copy
                    lr = lr.value
                return compiled[i](list(grads), tf.convert_to_tensor(lr))

            distribution.extended.update(
                variables[0], on_replica, args=tuple(grad for grad, _ in pairs), group=False
            )

        optimizer._distributed_tf_update_step = fused
        self.update_path = "xla per replica" if jit else "one function per replica"

    def _update_target(self) -> Any:
        return getattr(self.optimizer, "inner_optimizer", None) or self.optimizer

    def _unfuse_update(self, error: BaseException) -> None:
        """Back to Keras' own per-variable update, recording why."""
        self._update_target().__dict__.pop("_distributed_tf_update_step", None)
        self.update_path = "keras per variable"
        self.update_error = f"{type(error).__name__}: {str(error)[-600:]}"
        self._run_steps = self._make_run_steps()

    def _apply(self, grads: Any) -> Any:
        variables = self.model.trainable_variables
        self.optimizer.apply(
            [
                self.tf.cast(grad, variable.dtype)
                for grad, variable in zip(grads, variables, strict=True)
            ],
            variables,
        )
        return self.tf.constant(True)

    def distribute(self, dataset: Any) -> Iterator[Any]:
        """An iterator over `dataset` (batched at the global batch) split across replicas."""
        return iter(self.strategy.experimental_distribute_dataset(dataset))

    def distribute_per_replica(
        self, dataset_fn: Callable[[Any], Any], buffer: int = 2
    ) -> Iterator[Any]:
        """An iterator over per-replica pipelines: `dataset_fn(input_context)` returns a
        dataset batched at `input_context.get_per_replica_batch_size(global_batch)`.

        Nothing is split on the host (splitting a 600 MB ResNet-50 global batch is a
        host memory copy every step), and each replica's batches are fetched to its
        device `buffer` steps ahead, so the host-to-device copy overlaps compute. With
        `host_cast` the batches stay on the host until the step casts them there."""
        options = self.tf.distribute.InputOptions(
            experimental_fetch_to_device=self.host_cast is None,
            experimental_per_replica_buffer_size=buffer,
        )
        return iter(self.strategy.distribute_datasets_from_function(dataset_fn, options))

    def run(self, iterator: Iterator[Any], executions: int = 1) -> list[float]:
        """Run `executions` x steps_per_execution steps (updates, of `accumulate` batches
        each); returns the mean loss of each execution."""
        count = self.tf.constant(self.steps_per_execution)
        out: list[float] = []
        if not self._traced and self.update_path != "keras per variable":
            # The first call traces and compiles. Should the fused update fail there
            # (an optimizer it cannot trace), no update was applied yet: use Keras' path.
            try:
                out.append(float(self._run_steps(iterator, count)))
            except (TypeError, ValueError, NotImplementedError, self.tf.errors.OpError) as exc:
                if isinstance(exc, self.tf.errors.ResourceExhaustedError):
                    raise
                self._unfuse_update(exc)
            executions -= len(out)
        self._traced = True
        out += [float(self._run_steps(iterator, count)) for _ in range(executions)]
        return out


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
