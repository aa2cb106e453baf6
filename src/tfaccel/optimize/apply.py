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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfaccel import _compat
from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError
from tfaccel.hardware.capabilities import auto_precision
from tfaccel.optimize import rnn_algorithm
from tfaccel.optimize.environment import (
    ENV_ALLOCATOR,
    ENV_UNIFIED,
    MPS_WARNING,
    apply_allocator,
    apply_memory,
    apply_xla_options,
    gpu_total_mib,
    mps_running,
    runtime_initialized,
)
from tfaccel.optimize.mixed_code import MIXED_CODE, mixed_code_on, set_mixed_code
from tfaccel.optimize.report import Applied, ConfigureReport
from tfaccel.optimize.settings import (
    KERAS_PATCHES,
    Settings,
    input_cast_dtype,
    read_settings_file,
)


def resolve_precision(requested: str, compute_capability: str | None) -> tuple[str, str]:
    """(precision, why) for `auto`, by compute capability."""
    if requested != "auto":
        return requested, "as requested"
    return auto_precision(compute_capability)


def _gpu_capability(tf: Any, gpus: list[Any]) -> str | None:
    if not gpus:
        return None
    try:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        return f"{capability[0]}.{capability[1]}" if capability else None
    except Exception:
        return None


_LAST: dict[str, Any] = {}


def _float8_row(capability: str | None, xla: str) -> Applied:
    from tfaccel.optimize.float8 import fp8_capable

    what = "report.compile(model) quantizes its Dense/EinsumDense layers to float8 first"
    if not fp8_capable(capability):
        where = f"compute capability {capability} has" if capability else "without a GPU there are"
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


def _apply_attention(settings: Settings, capability: str | None) -> list[Applied]:
    """Keras' attention, or cuDNN's flash attention (tfaccel.optimize.attention). A row
    only when cuDNN's is asked for or was in use; where it cannot run (no GPU of 8.0+,
    no XLA) a warning, and Keras' own stays."""
    from tfaccel.optimize import attention

    if settings.attention == "keras":
        return _apply_patched("attention", "keras")
    if not attention.flash_capable(capability):
        attention.set_attention("keras")
        where = f"compute capability {capability}" if capability else "no GPU"
        return [
            Applied(
                "attention",
                "cudnn",
                "warning",
                f"{where}: cuDNN's flash attention needs 8.0+; Keras' attention stays",
            )
        ]
    detail = attention.set_attention("cudnn")
    if settings.xla == "off":
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
            Applied(
                earlier.knob,
                earlier.value,
                "unchanged" if earlier.status == "applied" else earlier.status,
                earlier.detail,
            )
            for earlier in previous.rows
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
    asked, spe_row = _spe_for_this_keras(settings)
    rows = [apply_allocator(asked, initialized), rnn_algorithm.apply(asked, initialized)]
    if asked.memory != "unified" and os.environ.get(ENV_UNIFIED) == "1" and not initialized:
        os.environ.pop(ENV_UNIFIED, None)
    xla_row = apply_xla_options(asked, initialized)
    tf = import_tensorflow()
    gpus = list(tf.config.list_physical_devices("GPU"))
    rows.extend(apply_memory(tf, asked, gpus, initialized, gpu_total_mib()))
    if gpus and asked.memory == "default" and mps_running():
        rows.append(Applied("memory", "default", "warning", MPS_WARNING))
    capability = _gpu_capability(tf, gpus)
    precision, row = _apply_precision(tf, asked, capability)
    rows.append(row)
    if mixed_code_on():
        rows.append(Applied("outputs", "float32", "applied", MIXED_CODE))
    rows.extend(_apply_xla(tf, asked, xla_row, spe_row))
    for knob in KERAS_PATCHES:  # attention needs cuDNN's flash attention: its own checks
        patched = _apply_attention(asked, capability) if knob == "attention" else None
        rows.extend(patched if patched is not None else _apply_patched(knob, getattr(asked, knob)))
    rows.extend(_model_rows(asked, capability))
    rows.append(_data_row(asked, precision))
    report = ConfigureReport(asked, precision, len(gpus), tuple(rows), capability)
    rows.extend(_strategy_rows(report, len(gpus)))
    report.rows = tuple(rows)
    _LAST.update(settings=settings, report=report)
    return report


def _spe_for_this_keras(settings: Settings) -> tuple[Settings, Applied | None]:
    """The settings with steps_per_execution left at 1 where Keras would train other
    steps with more (`_compat.KERAS_SPE`), and the row that says so; else as they are."""
    spe = settings.steps_per_execution
    why = _compat.keras_needs(f"steps_per_execution={spe}", *_compat.KERAS_SPE) if spe > 1 else None
    if why is None:
        return settings, None
    row = Applied("steps_per_execution", spe, "warning", f"{why}: left at 1")
    return settings.replace(steps_per_execution=1), row


_PRECISION_NOTES = {
    "mixed_float16": "; loss scaling: Keras wraps the optimizer in LossScaleOptimizer at compile",
    "float32": "; TF32 off (strict float32)",
    "tf32": "; float32 variables and math on TF32 tensor cores",
    "bfloat16": "; weights in bf16 too: for inference and generation, where the mixed policy "
    "casts every float32 weight again on each call (train with mixed_bfloat16)",
}


def _apply_precision(tf: Any, settings: Settings, capability: str | None) -> tuple[str, Applied]:
    """Keras' global dtype policy and TF32, for the precision asked (or chosen)."""
    import keras

    precision, why = resolve_precision(settings.precision, capability)
    policy = "float32" if precision in ("float32", "tf32") else precision
    keras.mixed_precision.set_global_policy(policy)
    set_mixed_code(policy.startswith("mixed_"))
    tf.config.experimental.enable_tensor_float_32_execution(precision != "float32")
    return precision, Applied(
        "precision", precision, "applied", why + _PRECISION_NOTES.get(precision, "")
    )


def _apply_xla(
    tf: Any, settings: Settings, xla_row: Applied, spe_row: Applied | None
) -> list[Applied]:
    """XLA: TensorFlow's auto-clustering, or compile's jit_compile; XLA's options;
    steps_per_execution (`spe_row`: why it was left at 1)."""
    if settings.xla == "autoclustering":
        tf.config.optimizer.set_jit("autoclustering")
        how = "TensorFlow clusters ops into XLA kernels inside tf.function graphs"
        rows = [Applied("xla", "autoclustering", "applied", how)]
    else:
        tf.config.optimizer.set_jit(False)
        jit = {"jit": True, "off": False, "auto": "auto"}[settings.xla]
        rows = [Applied("xla", settings.xla, "at-compile", f"model.compile(jit_compile={jit!r})")]
    if settings.effective_xla_options or xla_row.status != "unchanged":
        rows.append(xla_row)
    how = "steps run per call into the compiled function"
    spe = settings.steps_per_execution
    rows.append(spe_row or Applied("steps_per_execution", spe, "at-compile", how))
    return rows


def _model_rows(settings: Settings, capability: str | None) -> list[Applied]:
    """What applies to the model at compile or build: float8, gradient checkpointing,
    gradient accumulation; a row each, also when off."""
    rows = [
        _float8_row(capability, settings.xla)
        if settings.float8
        else Applied("float8", False, "unchanged", "off")
    ]
    if settings.gradient_checkpointing:
        how = (
            "report.compile(model) cuts a Functional graph into segments recomputed in the "
            "backward pass; a subclassed model: build it inside report.remat_scope() (each "
            "layer recomputed)"
        )
        rows.append(Applied("gradient_checkpointing", True, "at-build", how))
    else:
        rows.append(Applied("gradient_checkpointing", False, "unchanged", "off"))
    steps = settings.gradient_accumulation_steps
    how = "report.optimizer(...) sets the optimizer's gradient_accumulation_steps"
    rows.append(
        Applied("gradient_accumulation_steps", steps, "at-compile", how)
        if steps > 1
        else Applied("gradient_accumulation_steps", 1, "unchanged", "off: one batch per update")
    )
    return rows


def _data_row(settings: Settings, precision: str) -> Applied:
    cast: str = settings.input_cast
    if cast != "off" and not input_cast_dtype(cast, precision):
        cast = f"{cast} (no effect: {precision} has no 16-bit compute dtype)"
    size = settings.batch_size
    value = {
        "batch_size": size,
        "prefetch": settings.prefetch,
        "cache": settings.cache_dataset,
        "deterministic": settings.deterministic_data,
        "input_cast": cast,
        "device_arrays": settings.device_arrays,
    }
    how = "report.dataset(ds) applies them" + (
        f" and re-batches to {size}; numpy inputs: model.fit(x, y, **report.fit_kwargs())"
        if size
        else ""
    )
    return Applied("tf.data", value, "at-build", how)


def _strategy_rows(report: ConfigureReport, gpus: int) -> list[Applied]:
    settings = report.settings
    how = f"{gpus} GPU(s) visible; build inside report.strategy_scope()"
    rows = [Applied("strategy", report.strategy_name, "at-build", how)]
    if report.strategy_name == "mirrored" and settings.gradient_accumulation_steps > 1:
        rows.append(
            Applied(
                "gradient_accumulation_steps",
                settings.gradient_accumulation_steps,
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

                unknown = [key for key in kwargs if key not in FIELDS]
                close = [
                    match for key in unknown for match in difflib.get_close_matches(key, FIELDS, 1)
                ]
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
        set_mixed_code(False)
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
            apply_xla_options(Settings(), initialized=False)  # configure's own flags go
        _LAST.clear()


configure = _Configure()


@contextlib.contextmanager
def configured(settings: Settings) -> Iterator[ConfigureReport]:
    """Apply settings for a block and reset afterwards (tests, trials)."""
    try:
        yield configure(settings)
    finally:
        configure.reset()
