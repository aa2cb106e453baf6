"""Applying Settings to TensorFlow and Keras, in the order TensorFlow needs.

Device-level settings (memory growth, memory limit, allocator, unified memory) can only
change before TensorFlow initializes its runtime: after that, asking for a *different*
value is a ConfigureOrderError, and asking for the same value is a no-op, so calling
`configure()` twice is safe. Precision and XLA are global Keras/TF settings that can
change any time; compile-time options (jit_compile, steps_per_execution), rematerialization,
gradient accumulation and tf.data options are returned as helpers on the report, since
they apply to objects the user builds.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tfaccel import _compat
from tfaccel._tf import import_tensorflow, tf_internal
from tfaccel.errors import InputError
from tfaccel.hardware.capabilities import auto_precision
from tfaccel.optimize.settings import (
    IMPLIED_XLA_OPTIONS,
    KERAS_PATCHES,
    XLA_OPTIONS,
    Settings,
    input_cast_dtype,
    read_settings_file,
)

# Environment variables TensorFlow reads when its runtime starts.
ENV_ALLOCATOR = "TF_GPU_ALLOCATOR"
ENV_UNIFIED = "TF_FORCE_UNIFIED_MEMORY"
ENV_XLA = "XLA_FLAGS"

UNIFIED_COST = (
    "pages that do not fit in GPU memory live in host memory and migrate on access over "
    "PCIe (tens of GB/s, against several TB/s of HBM): steps that touch them run many "
    "times slower. Use it to make a too-large model run at all, not to make it fast"
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
        it from `dataset()`)."""
        return {"batch_size": self.settings.batch_size} if self.settings.batch_size else {}

    def rebatched(self, ds: Any, model: Any = None) -> Any:
        """`ds` at the tuned batch size, its batches unbatched first (workloads.inputs
        tells them from examples; `model` where the data's shapes cannot): InputError
        where it still cannot tell. Without a batch size, `ds` as it is."""
        size = self.settings.batch_size
        if not size:
            return ds
        from tfaccel.workloads.inputs import rebatch

        return rebatch(ds, model, size)[0]

    def _rebatched_or_kept(self, ds: Any, model: Any) -> Any:
        """`rebatched`, or where it cannot tell, the data's own batches, and it says so."""
        import warnings

        try:
            return self.rebatched(ds, model)
        except InputError as exc:
            warnings.warn(
                f"batch_size {self.settings.batch_size} not applied: {exc.message} "
                "(report.dataset(ds, model=model) tells examples from batches)",
                stacklevel=3,
            )
            return ds

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

    def cast(t: Any) -> Any:
        return tf.cast(t, dtype) if t.dtype.is_floating and t.dtype != dtype else t

    def fn(*element: Any) -> Any:
        inputs = tf.nest.map_structure(cast, element[0])
        return inputs if len(element) == 1 else (inputs, *element[1:])

    return fn


def runtime_initialized() -> bool:
    """True once TensorFlow's eager context exists (devices can no longer be configured)."""
    try:
        context = tf_internal("python.eager.context")
    except ImportError:
        return False
    try:
        return context.context()._context_handle is not None
    except Exception:
        return False


def resolve_precision(requested: str, compute_capability: str | None) -> tuple[str, str]:
    """(precision, why) for `auto`, by compute capability."""
    if requested != "auto":
        return requested, "as requested"
    return auto_precision(compute_capability)


def unified_memory_limit_mib(total_mib: int, factor: float) -> int:
    """The logical device size that oversubscribes `total_mib` by `factor`."""
    return int(total_mib * factor)


def _set_env(name: str, value: str | None, initialized: bool, knob: str) -> AppliedStatus:
    current = os.environ.get(name)
    if current == value:
        return "unchanged"
    if initialized:
        raise ConfigureOrderError(
            f"{knob} can no longer change: TensorFlow already started its GPU runtime",
            expected=f"tfaccel.configure() before building any model or tensor, or "
            f"{name}={value} in the environment before starting Python",
            received=f"{name}={current!r}",
            hint="call tfaccel.configure() at the top of your script",
        )
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return "applied"


# The flags configure() itself put into XLA_FLAGS in this process (only those go again).
_XLA_ADDED: list[str] = []


def xla_flags_with(
    current: str, options: tuple[str, ...], added: Iterable[str] = ()
) -> tuple[str, list[str]]:
    """(XLA_FLAGS, the flags added) for `options` (names in XLA_OPTIONS): the flags in
    `added` (configure's own, from before) go, the user's stay, in their order, the
    options' flags come last unless the user set them already. A user's flag that an
    option would override (the same flag, another value) is an error, not a guess."""
    gone = set(added)
    kept = [t for t in current.split() if t not in gone]
    wanted = [XLA_OPTIONS[o] for o in options if XLA_OPTIONS[o] not in kept]
    for option in options:
        floor = _compat.xla_flag_floor(XLA_OPTIONS[option])
        if floor is not None:
            raise InputError(
                f"xla_options {option!r} needs TensorFlow >= {floor}; this is "
                f"{_compat.installed_version()}",
                expected=f"TensorFlow {floor} or newer, or the option left out",
                received=option,
                hint="an older XLA aborts the process on a flag it does not know, or "
                "ignores a pass it does not have",
            )
    for flag in wanted:
        name = flag.split("=", 1)[0]
        clash = [t for t in kept if t.split("=", 1)[0] == name]
        if clash:
            raise InputError(
                f"XLA_FLAGS already sets {name} another way",
                expected=f"{flag} (from xla_options), or the option left out",
                received=" ".join(clash),
                hint="merge the two by hand in XLA_FLAGS, or drop the xla_options entry",
            )
    return " ".join(kept + wanted), wanted


def _apply_xla_options(s: Settings, initialized: bool) -> Applied:
    current = os.environ.get(ENV_XLA, "")
    options = s.effective_xla_options
    flags, added = xla_flags_with(current, options, _XLA_ADDED)
    status: AppliedStatus
    if flags.split() == current.split():
        status = "unchanged"
    else:
        status = _set_env(ENV_XLA, flags or None, initialized, f"xla_options={list(options)}")
    _XLA_ADDED[:] = added
    detail = " ".join(XLA_OPTIONS[o] for o in options) or "XLA's defaults"
    # the options a knob added (IMPLIED_XLA_OPTIONS) beyond those asked for, and why
    notes = [
        f"{', '.join(added)}: for {knob}"
        for knob, opts in IMPLIED_XLA_OPTIONS.items()
        if getattr(s, knob) and (added := [o for o in opts if o not in s.xla_options])
    ]
    if notes:
        detail += f" ({'; '.join(notes)})"
    return Applied("xla_options", list(options), status, detail)


def set_xla_options(options: Iterable[str]) -> Applied:
    """Only XLA's options (names in XLA_OPTIONS), for tools that set nothing else (`tfaccel
    bench --xla-options`); before TensorFlow starts, like configure()."""
    s = Settings(xla_options=tuple(options))
    return _apply_xla_options(s, runtime_initialized())


def _apply_memory(
    tf: Any, s: Settings, gpus: list[Any], initialized: bool, total_mib: int | None
) -> list[Applied]:
    rows: list[Applied] = []
    if s.memory == "unified":
        status = _set_env(ENV_UNIFIED, "1", initialized, "memory='unified'")
        rows.append(Applied("memory", "unified", status, f"{ENV_UNIFIED}=1; cost: " + UNIFIED_COST))
    if not gpus:
        if s.memory != "default":
            rows.append(Applied("memory", s.memory, "skipped", "no GPU visible"))
        return rows
    limit = None
    if s.memory == "limit":
        limit = s.memory_limit_mib
    elif s.memory == "unified" and total_mib:
        limit = unified_memory_limit_mib(total_mib, s.unified_oversubscription)
    for gpu in gpus:
        want_growth = s.memory == "growth"
        have_growth = bool(tf.config.experimental.get_memory_growth(gpu))
        if want_growth != have_growth:
            if initialized:
                raise ConfigureOrderError(
                    "memory growth can no longer change: TensorFlow already initialized the GPU",
                    expected="tfaccel.configure() before building any model or tensor",
                    received=f"memory growth is {have_growth}, asked {want_growth}",
                )
            tf.config.experimental.set_memory_growth(gpu, want_growth)
        if limit is not None:
            current = tf.config.get_logical_device_configuration(gpu)
            same = current and len(current) == 1 and current[0].memory_limit == limit
            if not same:
                if initialized:
                    raise ConfigureOrderError(
                        "the GPU memory limit can no longer change: TensorFlow already "
                        "initialized the GPU",
                        expected="tfaccel.configure() first",
                        received=f"limit {limit} MiB",
                    )
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)]
                )
    if s.memory == "growth":
        rows.append(
            Applied(
                "memory",
                "growth",
                "applied",
                f"on {len(gpus)} GPU(s): memory is taken as needed instead of all at start",
            )
        )
    elif limit is not None:
        rows.append(Applied("memory", s.memory, "applied", f"{limit:,} MiB per GPU"))
    return rows


def _gpu_capability(tf: Any, gpus: list[Any]) -> str | None:
    if not gpus:
        return None
    try:
        cc = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        return f"{cc[0]}.{cc[1]}" if cc else None
    except Exception:
        return None


def gpu_total_mib() -> int | None:
    try:
        from tfaccel.hardware.nvml import driver_info

        info = driver_info()
        return info.gpus[0].memory_total_mib if info.gpus else None
    except Exception:
        return None


def _mps_running() -> bool:
    try:
        from tfaccel.hardware.capabilities import mps_state

        pipes, procs = mps_state(os.environ)
        return bool(pipes or procs)
    except Exception:
        return False


_LAST: dict[str, Any] = {}


def _float8_row(cc: str | None, xla: str) -> Applied:
    from tfaccel.optimize.float8 import fp8_capable

    what = "report.compile(model) quantizes its Dense/EinsumDense layers to float8 first"
    if not fp8_capable(cc):
        where = f"compute capability {cc} has" if cc else "without a GPU there are"
        return Applied(
            "float8",
            True,
            "warning",
            f"{what}; {where} no FP8 tensor cores: the products stay 16-bit, "
            "the quantization only adds work and rounding",
        )
    if xla == "off":
        return Applied(
            "float8",
            True,
            "warning",
            f"{what}; without XLA no FP8 GEMM is formed: use xla='jit'",
        )
    return Applied(
        "float8",
        True,
        "at-compile",
        f"{what}: FP8 GEMMs under XLA (through cuBLASLt: xla_options cublas_gemm)",
    )


def _apply_attention(s: Settings, cc: str | None) -> list[Applied]:
    """Keras' attention, or cuDNN's flash attention (tfaccel.optimize.attention). A row
    only when cuDNN's is asked for or was in use; where it cannot run (no GPU of 8.0+,
    no XLA) a warning, and Keras' own stays."""
    from tfaccel.optimize import attention

    if s.attention == "keras":
        return _apply_patched("attention", "keras")
    if not attention.flash_capable(cc):
        attention.set_attention("keras")
        where = f"compute capability {cc}" if cc else "no GPU"
        return [
            Applied(
                "attention",
                "cudnn",
                "warning",
                f"{where}: cuDNN's flash attention needs 8.0+; Keras' attention stays",
            )
        ]
    detail = attention.set_attention("cudnn")
    if s.xla == "off":
        return [Applied("attention", "cudnn", "warning", f"{detail}; without XLA: use xla='jit'")]
    return [Applied("attention", "cudnn", "applied", detail)]


def _apply_patched(knob: str, value: str) -> list[Applied]:
    """Keras' function, or tfaccel's replacement (dropout's masks, flat einsums; the
    knobs of optimize.patches). A row only when the replacement is asked for or was in
    use."""
    from tfaccel.optimize.patches import PATCHES

    patch = PATCHES[knob]
    if value == "keras" and patch.in_use() == "keras":
        return []
    return [Applied(knob, value, "applied", patch.use(value))]


def apply_settings(settings: Settings) -> ConfigureReport:
    """Apply `settings`; see the module docstring for what changes when."""
    if _LAST.get("settings") == settings and "report" in _LAST:
        previous: ConfigureReport = _LAST["report"]
        same = tuple(
            Applied(r.knob, r.value, "unchanged" if r.status == "applied" else r.status, r.detail)
            for r in previous.rows
        )
        report = ConfigureReport(
            settings,
            previous.precision,
            previous.gpus,
            same,
            previous.compute_capability,
            previous._strategy,
        )
        _LAST["report"] = report
        return report
    _compat.check_keras_features(settings)  # before anything is set or patched
    initialized = runtime_initialized()
    s = settings
    rows = [_apply_allocator(s, initialized)]
    if s.memory != "unified" and os.environ.get(ENV_UNIFIED) == "1" and not initialized:
        os.environ.pop(ENV_UNIFIED, None)
    xla_row = _apply_xla_options(s, initialized)
    tf = import_tensorflow()
    gpus = list(tf.config.list_physical_devices("GPU"))
    rows.extend(_apply_memory(tf, s, gpus, initialized, gpu_total_mib()))
    if gpus and s.memory == "default" and _mps_running():
        rows.append(Applied("memory", "default", "warning", MPS_WARNING))
    cc = _gpu_capability(tf, gpus)
    precision, row = _apply_precision(tf, s, cc)
    rows.append(row)
    rows.extend(_apply_xla(tf, s, xla_row))
    for knob in KERAS_PATCHES:  # attention needs cuDNN's flash attention: its own checks
        patched = _apply_attention(s, cc) if knob == "attention" else None
        rows.extend(patched if patched is not None else _apply_patched(knob, getattr(s, knob)))
    rows.extend(_model_rows(s, cc))
    rows.append(_data_row(s, precision))
    report = ConfigureReport(s, precision, len(gpus), tuple(rows), cc)
    rows.extend(_strategy_rows(report, len(gpus)))
    report.rows = tuple(rows)
    _LAST.update(settings=settings, report=report)
    return report


MPS_WARNING = (
    "MPS is running: every process sharing the GPU would try to take all its memory; "
    "use memory='growth' or memory='limit' with memory_limit_mib"
)


def _apply_allocator(s: Settings, initialized: bool) -> Applied:
    alloc = None if s.allocator == "default" else s.allocator
    status = _set_env(ENV_ALLOCATOR, alloc, initialized, f"allocator={s.allocator!r}")
    how = (
        "cudaMallocAsync: the driver's stream-ordered pool"
        if alloc
        else "TensorFlow's BFC allocator"
    )
    return Applied("allocator", s.allocator, status, how)


_PRECISION_NOTES = {
    "mixed_float16": "; loss scaling: Keras wraps the optimizer in LossScaleOptimizer at compile",
    "float32": "; TF32 off (strict float32)",
    "tf32": "; float32 variables and math on TF32 tensor cores",
    "bfloat16": "; weights in bf16 too: for inference and generation, where the mixed policy "
    "casts every float32 weight again on each call (train with mixed_bfloat16)",
}


def _apply_precision(tf: Any, s: Settings, cc: str | None) -> tuple[str, Applied]:
    """Keras' global dtype policy and TF32, for the precision asked (or chosen)."""
    import keras

    precision, why = resolve_precision(s.precision, cc)
    policy = "float32" if precision in ("float32", "tf32") else precision
    keras.mixed_precision.set_global_policy(policy)
    tf.config.experimental.enable_tensor_float_32_execution(precision != "float32")
    return precision, Applied(
        "precision", precision, "applied", why + _PRECISION_NOTES.get(precision, "")
    )


def _apply_xla(tf: Any, s: Settings, xla_row: Applied) -> list[Applied]:
    """XLA: TensorFlow's auto-clustering, or compile's jit_compile; XLA's options;
    steps_per_execution."""
    if s.xla == "autoclustering":
        tf.config.optimizer.set_jit("autoclustering")
        how = "TensorFlow clusters ops into XLA kernels inside tf.function graphs"
        rows = [Applied("xla", "autoclustering", "applied", how)]
    else:
        tf.config.optimizer.set_jit(False)
        jit = {"jit": True, "off": False, "auto": "auto"}[s.xla]
        rows = [Applied("xla", s.xla, "at-compile", f"model.compile(jit_compile={jit!r})")]
    if s.effective_xla_options or xla_row.status != "unchanged":
        rows.append(xla_row)
    how = "steps run per call into the compiled function"
    rows.append(Applied("steps_per_execution", s.steps_per_execution, "at-compile", how))
    return rows


def _model_rows(s: Settings, cc: str | None) -> list[Applied]:
    """What applies to the model at compile or build: float8, gradient checkpointing,
    gradient accumulation; a row each, also when off."""
    rows = [_float8_row(cc, s.xla) if s.float8 else Applied("float8", False, "unchanged", "off")]
    if s.gradient_checkpointing:
        how = (
            "report.compile(model) cuts a Functional graph into segments recomputed in the "
            "backward pass; a subclassed model: build it inside report.remat_scope() (each "
            "layer recomputed)"
        )
        rows.append(Applied("gradient_checkpointing", True, "at-build", how))
    else:
        rows.append(Applied("gradient_checkpointing", False, "unchanged", "off"))
    steps = s.gradient_accumulation_steps
    how = "report.optimizer(...) sets the optimizer's gradient_accumulation_steps"
    rows.append(
        Applied("gradient_accumulation_steps", steps, "at-compile", how)
        if steps > 1
        else Applied("gradient_accumulation_steps", 1, "unchanged", "off: one batch per update")
    )
    return rows


def _data_row(s: Settings, precision: str) -> Applied:
    cast: str = s.input_cast
    if cast != "off" and not input_cast_dtype(cast, precision):
        cast = f"{cast} (no effect: {precision} has no 16-bit compute dtype)"
    size = s.batch_size
    value = {
        "batch_size": size,
        "prefetch": s.prefetch,
        "cache": s.cache_dataset,
        "deterministic": s.deterministic_data,
        "input_cast": cast,
        "device_arrays": s.device_arrays,
    }
    how = "report.dataset(ds) applies them" + (
        f" and re-batches to {size}; numpy inputs: model.fit(x, y, **report.fit_kwargs())"
        if size
        else ""
    )
    return Applied("tf.data", value, "at-build", how)


def _strategy_rows(report: ConfigureReport, gpus: int) -> list[Applied]:
    s = report.settings
    how = f"{gpus} GPU(s) visible; build inside report.strategy_scope()"
    rows = [Applied("strategy", report.strategy_name, "at-build", how)]
    if report.strategy_name == "mirrored" and s.gradient_accumulation_steps > 1:
        rows.append(
            Applied(
                "gradient_accumulation_steps",
                s.gradient_accumulation_steps,
                "warning",
                "Keras' fit fails with accumulation under MirroredStrategy (the optimizer "
                "all-reduces inside a cond); tfaccel.trial.step.DistributedTrainer "
                "accumulates instead (tfaccel scale does)",
            )
        )
    return rows


class _Configure:
    """The `tfaccel.configure` callable, with `from_file` and `reset` attached."""

    def __call__(self, settings: Settings | None = None, **kwargs: Any) -> ConfigureReport:
        """Apply settings (a Settings object and/or keyword arguments of Settings)."""
        if settings is not None and not isinstance(settings, Settings):
            raise InputError(
                "configure() takes a Settings object or keyword arguments",
                expected="configure(precision='mixed_bfloat16', ...) or configure(Settings(...))",
                received=f"{type(settings).__name__} {settings!r}",
                hint=f"configure(precision={settings!r})" if isinstance(settings, str) else None,
            )
        base = settings or Settings()
        if kwargs:
            try:
                base = base.replace(**kwargs)
            except TypeError as exc:
                import difflib

                from tfaccel.optimize.settings import FIELDS

                unknown = [k for k in kwargs if k not in FIELDS]
                close = [m for k in unknown for m in difflib.get_close_matches(k, FIELDS, 1)]
                raise InputError(
                    "Unknown configure() argument",
                    expected="keywords among " + ", ".join(FIELDS),
                    received=", ".join(unknown) or str(exc),
                    hint=f"did you mean {', '.join(close)}?" if close else None,
                ) from exc
        return apply_settings(base)

    def from_file(self, path: str | Path = "tfaccel.json", **overrides: Any) -> ConfigureReport:
        """Apply the settings `tfaccel tune` wrote (arguments override the file)."""
        return self(read_settings_file(path), **overrides)

    def reset(self) -> None:
        """Restore what configure() changed that can change back (policy, TF32, JIT,
        dropout, einsum, attention)."""
        import keras

        keras.mixed_precision.set_global_policy("float32")
        tf = import_tensorflow()
        tf.config.experimental.enable_tensor_float_32_execution(True)
        tf.config.optimizer.set_jit(False)
        from tfaccel.optimize.patches import PATCHES

        for patch in PATCHES.values():
            if patch.in_use() != "keras":
                patch.use("keras")
        if not runtime_initialized():
            os.environ.pop(ENV_ALLOCATOR, None)
            os.environ.pop(ENV_UNIFIED, None)
            _apply_xla_options(Settings(), initialized=False)  # configure's own flags go
        _LAST.clear()


configure = _Configure()


@contextlib.contextmanager
def configured(settings: Settings) -> Iterator[ConfigureReport]:
    """Apply settings for a block and reset afterwards (tests, trials)."""
    try:
        yield configure(settings)
    finally:
        configure.reset()


def keras_optimizer(optimizer: Any) -> Any:
    """A Keras optimizer from a name, a config dict or an instance (returned as is). A
    config is copied first: Keras rewrites the dict it deserializes, and workloads share
    theirs."""
    import keras

    if isinstance(optimizer, (str, dict)):
        return keras.optimizers.get(copy.deepcopy(optimizer))
    return optimizer
