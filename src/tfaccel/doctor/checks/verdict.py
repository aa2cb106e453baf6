"""The question itself: does TensorFlow see the GPU, and if not, the first real cause found
above."""

from __future__ import annotations

from tfaccel.doctor.checks.base import NO_GPU, TF_GPUS, no_gpu_here, tf_pin
from tfaccel.doctor.context import DoctorContext
from tfaccel.doctor.model import Check, Status

_CAUSE_ORDER = (
    "tf.install",
    "tf.requirements",
    "tf.build",
    "platform",
    "env.cuda_visible_devices",
    "driver",
    "lib.libcuda",
    "gpu.state",
    "lib.",
    "gpu.compute_capability",
)


def _reinstall(ctx: DoctorContext) -> str:
    """TensorFlow installed again: with its CUDA wheels where there is a GPU to use."""
    extra = "" if no_gpu_here(ctx) else "[and-cuda]"
    return f"pip install --force-reinstall 'tensorflow{extra}{tf_pin(ctx)}'"


def check_tf_sees_gpu(ctx: DoctorContext, earlier: list[Check]) -> list[Check]:
    title = "TensorFlow sees the GPU"
    if ctx.tf_dir is None:
        return [Check("tf.gpus", title, Status.SKIP, "TensorFlow is not installed")]
    runtime = ctx.tf_runtime
    if not runtime.ran:
        return [Check("tf.gpus", title, Status.SKIP, "not run (--no-import)", see=TF_GPUS)]
    if not runtime.error and not runtime.gpus and no_gpu_here(ctx):
        finding = f"{NO_GPU}: TensorFlow {runtime.version} runs on the CPU, as it should here"
        return [Check("tf.gpus", title, Status.SKIP, finding, see=TF_GPUS)]
    details = {"tf_log": list(runtime.log_lines), "import_seconds": round(runtime.seconds, 1)}
    if runtime.error:
        unmet = next(
            (check for check in earlier if check.id == "tf.requirements" and check.fix), None
        )
        why = f" (check tf.requirements: {unmet.finding})" if unmet else ""
        return [
            Check(
                "tf.gpus",
                title,
                Status.FAIL,
                f"importing TensorFlow failed: {runtime.error}{why}",
                # the package at fault, where a requirement names it; a reinstall
                # (which also pulls the CUDA wheels) only where none does
                fix=unmet.fix if unmet else _reinstall(ctx),
                see="python -c 'import tensorflow'",
                details=details,
            )
        ]
    if runtime.gpus:
        names = ", ".join(
            f"{gpu.get('device')}: {gpu.get('name')} "
            f"(compute capability {gpu.get('compute_capability')})"
            for gpu in runtime.gpus
        )
        return [
            Check(
                "tf.gpus",
                title,
                Status.OK,
                f"TensorFlow {runtime.version} sees {len(runtime.gpus)} GPU(s): {names}",
                see=TF_GPUS,
                details=details,
            )
        ]
    cause = None
    for prefix in _CAUSE_ORDER:
        for check in earlier:
            if check.status is Status.FAIL and (
                check.id == prefix
                or (prefix.endswith(".") and check.id.startswith(prefix))
                or check.id.startswith(prefix + ".")
            ):
                cause = check
                break
        if cause:
            break
    if cause is not None:
        finding = f"TensorFlow sees no GPU. Cause: {cause.finding} (check {cause.id})"
        return [
            Check(
                "tf.gpus", title, Status.FAIL, finding, fix=cause.fix, see=TF_GPUS, details=details
            )
        ]
    hint = " TensorFlow's log says: " + runtime.log_lines[-1] if runtime.log_lines else ""
    return [
        Check(
            "tf.gpus",
            title,
            Status.FAIL,
            "TensorFlow sees no GPU, and no check above found why." + hint,
            fix="run with TF_CPP_MIN_LOG_LEVEL=0 and TF_CPP_VMODULE=dso_loader=1 to see "
            "each library TensorFlow tries to open",
            see=TF_GPUS,
            details=details,
        )
    ]
