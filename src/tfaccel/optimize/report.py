"""What `tfaccel.configure` did: one row per knob (`Applied`), and the report that
carries them with the helpers for the parts that apply to the user's own objects
(compile, the dataset, the strategy, checkpointing). Built by `optimize.apply`; read by
the trials, `tfaccel run` and the renderers."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError
from tfaccel.optimize.settings import (
    Settings,
    input_cast_dtype,
)


class ConfigureOrderError(InputError):
    """A setting that can no longer change because TensorFlow already started."""


# What became of a knob: set now, already so, set when the user's model is compiled or
# built (report.compile / the precision policy), not applicable here, or set with a
# warning.
AppliedStatus = Literal["applied", "unchanged", "at-compile", "at-build", "skipped", "warning"]


@dataclass(frozen=True)
class Applied:
    """One knob: what was asked, what happened."""

    knob: str
    value: Any
    status: AppliedStatus
    detail: str = ""


@dataclass
class ConfigureReport:
    """What configure() did, and helpers for the parts that apply to the user's objects."""

    settings: Settings
    precision: str  # resolved: float32 | tf32 | mixed_float16 | mixed_bfloat16 | bfloat16
    gpus: int
    rows: tuple[Applied, ...]
    compute_capability: str | None = None
    # The segments `checkpoint`/`compile` cut (tfaccel.optimize.remat.CheckpointPlan).
    checkpointing: list[Any] = field(default_factory=list)
    # The layers `compile` quantized to float8 (names), with float8 on.
    float8_layers: list[str] = field(default_factory=list)
    _strategy: Any = field(default=None, repr=False)

    def summary(self, console: Any = None) -> None:
        """Print what was applied, one row per knob (a rich table; knob by knob on a
        narrow console)."""
        from rich.console import Console

        console = console or Console()
        console.print(self)

    def brief(self) -> list[str]:
        """What changes, in a few lines (tfaccel run says them before the script's
        output); warnings with their reasons."""
        from tfaccel.render.configure import configure_brief

        return configure_brief(self)

    def __rich_console__(self, console: Any, options: Any) -> Any:  # rich.print(report)
        from tfaccel.render.configure import configure_view

        yield configure_view(self, options.max_width)

    def compile_kwargs(self) -> dict[str, Any]:
        """Arguments for `model.compile`: jit_compile and steps_per_execution."""
        jit: Any = {"jit": True, "off": False, "autoclustering": False, "auto": "auto"}[
            self.settings.xla
        ]
        return {"jit_compile": jit, "steps_per_execution": self.settings.steps_per_execution}

    def optimizer(self, optimizer: Any = "adam") -> Any:
        """A Keras optimizer with gradient accumulation set (a name, config or instance)."""
        opt = keras_optimizer(optimizer)
        steps = self.settings.gradient_accumulation_steps
        if steps > 1:
            config = opt.get_config()
            config["gradient_accumulation_steps"] = steps
            opt = type(opt).from_config(config)
        return opt

    def compile(self, model: Any, optimizer: Any = "adam", **kwargs: Any) -> Any:
        """`model.compile` with the configured optimizer, XLA and steps_per_execution;
        with gradient checkpointing, the model's graph checkpointed by segments first;
        with float8, its Dense and EinsumDense layers quantized first."""
        self.checkpoint(model)
        self.quantize(model)
        args = {**self.compile_kwargs(), **kwargs}
        model.compile(optimizer=self.optimizer(optimizer), **args)
        return model

    def quantize(self, model: Any) -> list[str]:
        """With float8 on: Keras' float8 quantization of the model's Dense and EinsumDense
        layers (`tfaccel.optimize.float8`); the names of the layers in float8, also kept
        in `self.float8_layers`. [] when off."""
        if not self.settings.float8:
            return []
        from tfaccel.optimize.float8 import quantize_float8

        self.float8_layers = quantize_float8(model)
        return self.float8_layers

    def checkpoint(self, model: Any) -> list[Any]:
        """With gradient checkpointing on: cut the model's Functional graph (or the
        backbone's, in a task model) into segments recomputed in the backward pass
        (`tfaccel.optimize.remat.checkpoint`); the plans applied, also kept in
        `self.checkpointing`. [] when off, or for a subclassed model, which keeps the
        per-layer recomputation of `remat_scope()`."""
        if not self.settings.gradient_checkpointing:
            return []
        from tfaccel.optimize import remat

        plans = remat.checkpoint(model)
        self.checkpointing = plans
        return plans

    def remat_scope(self) -> contextlib.AbstractContextManager[Any]:
        """Build the model inside this scope for gradient checkpointing: each layer
        recomputed on its own (keras.RematScope), which is what a subclassed model gets.
        A Functional model's graph is cut into segments by `compile`/`checkpoint`
        instead, which saves memory where per-layer recomputation cannot."""
        if not self.settings.gradient_checkpointing:
            return contextlib.nullcontext()
        import keras

        from tfaccel.optimize import remat

        remat.install()  # layers called with training=... fail in Keras' own (TF backend)
        return keras.RematScope(mode="full")

    @property
    def strategy(self) -> Any:
        """The tf.distribute strategy chosen (created on first use)."""
        if self._strategy is None:
            tf = import_tensorflow()
            name = self.strategy_name
            if name == "mirrored":
                self._strategy = tf.distribute.MirroredStrategy()
            elif name == "one_device":
                self._strategy = tf.distribute.OneDeviceStrategy(
                    "/gpu:0" if self.gpus else "/cpu:0"
                )
            else:
                self._strategy = tf.distribute.get_strategy()
        return self._strategy

    @property
    def strategy_name(self) -> str:
        choice = self.settings.strategy
        if choice == "auto":
            return "mirrored" if self.gpus > 1 else "none"
        return choice

    def strategy_scope(self) -> contextlib.AbstractContextManager[Any]:
        if self.strategy_name == "none":
            return contextlib.nullcontext()
        return self.strategy.scope()

    @property
    def input_dtype(self) -> str | None:
        """The dtype float inputs cross to the GPU in with `input_cast` (None: as they are)."""
        return input_cast_dtype(self.settings.input_cast, self.precision)

    def cast_inputs(self, element: Any) -> Any:
        """`input_cast` applied once to an (inputs, labels) element held in memory (a
        synthetic batch); `dataset()` does the same per element of a pipeline, and skips
        what is already in the compute dtype."""
        dtype = self.input_dtype
        if dtype is None:
            return element
        tf = import_tensorflow()
        tensors = tf.nest.map_structure(tf.convert_to_tensor, element)
        return _cast_inputs(tf, dtype)(*tensors)

    def fit_kwargs(self) -> dict[str, Any]:
        """Arguments for `model.fit` with numpy inputs: the batch size (a dataset gets
        it from `dataset()`) and the validation's (validation arrays), where set."""
        sizes = {
            "batch_size": self.settings.batch_size,
            "validation_batch_size": self.settings.validation_batch_size,
        }
        return {name: size for name, size in sizes.items() if size}

    def rebatched(self, ds: Any, model: Any = None) -> Any:
        """`ds` at the tuned batch size, its batches unbatched first (workloads.inputs
        tells them from examples; `model` where the data's shapes cannot): InputError
        where it still cannot tell. Without a batch size, `ds` as it is."""
        size = self.settings.batch_size
        if not size:
            return ds
        from tfaccel.workloads.inputs import rebatch

        return rebatch(ds, model, size)[0]

    def _rebatched_or_kept(self, dataset: Any, model: Any) -> Any:
        """`rebatched`, or where it cannot tell, the data's own batches, and it says so."""
        import warnings

        try:
            return self.rebatched(dataset, model)
        except InputError as exc:
            warnings.warn(
                f"batch_size {self.settings.batch_size} not applied: {exc.message} "
                "(report.dataset(ds, model=model) tells examples from batches)",
                stacklevel=3,
            )
            return dataset

    def dataset(self, ds: Any, cast: bool = True, model: Any = None, batch: bool = True) -> Any:
        """Apply the tf.data settings: the batch size (re-batched, unless `batch=False`:
        `model` tells examples from batches where the data's shapes cannot), determinism,
        caching, `input_cast` (unless `cast=False`: a step that casts on the host
        itself), prefetch (host or device)."""
        tf = import_tensorflow()
        if batch:
            ds = self._rebatched_or_kept(ds, model)
        options = tf.data.Options()
        options.deterministic = self.settings.deterministic_data
        options.autotune.enabled = True
        ds = ds.with_options(options)
        if self.settings.cache_dataset:
            ds = ds.cache()
        compute = self.input_dtype if cast else None
        if compute is not None:
            ds = ds.map(_cast_inputs(tf, compute), num_parallel_calls=tf.data.AUTOTUNE)
        if self.settings.prefetch == "device" and self.gpus == 1 and self.strategy_name == "none":
            return ds.apply(tf.data.experimental.prefetch_to_device("/gpu:0"))
        if self.settings.prefetch != "off":
            return ds.prefetch(tf.data.AUTOTUNE)
        return ds


def _cast_inputs(tf: Any, dtype: Any) -> Any:
    """A tf.data map function: the inputs' floating tensors (the first element of
    (inputs, labels[, weights])) cast to `dtype`; integers and labels as they are."""

    dtype = tf.as_dtype(dtype)

    def cast(tensor: Any) -> Any:
        return (
            tf.cast(tensor, dtype) if tensor.dtype.is_floating and tensor.dtype != dtype else tensor
        )

    def fn(*element: Any) -> Any:
        inputs = tf.nest.map_structure(cast, element[0])
        return inputs if len(element) == 1 else (inputs, *element[1:])

    return fn


def keras_optimizer(optimizer: Any) -> Any:
    """A Keras optimizer from a name, a config dict or an instance (returned as is). A
    config is copied first: Keras rewrites the dict it deserializes, and workloads share
    theirs."""
    import keras

    if isinstance(optimizer, (str, dict)):
        return keras.optimizers.get(copy.deepcopy(optimizer))
    return optimizer
