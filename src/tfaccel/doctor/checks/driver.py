"""The NVIDIA driver: present, loaded, new enough for the CUDA TensorFlow uses."""

from __future__ import annotations

from tfaccel import data
from tfaccel.doctor.checks.base import NO_GPU, no_gpu_here
from tfaccel.doctor.context import DoctorContext, version_tuple
from tfaccel.doctor.model import Check, Status


def check_driver(ctx: DoctorContext) -> list[Check]:
    title = "NVIDIA driver"
    see = "nvidia-smi"
    if ctx.platform.system == "Darwin":
        return [Check("driver", title, Status.SKIP, "macOS has no NVIDIA CUDA driver")]
    drv = ctx.driver
    if not drv.available and no_gpu_here(ctx):
        return [
            Check(
                "driver",
                title,
                Status.SKIP,
                f"{NO_GPU}, so there is no driver to fix: TensorFlow runs on the CPU here",
                see="lspci | grep -i nvidia",
            )
        ]
    nvml_lib = ctx.loader.resolve("libnvidia-ml.so.1") if not drv.available else None
    if nvml_lib is not None and nvml_lib.error:
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"NVML cannot start: libnvidia-ml.so.1 resolves first to {nvml_lib.path} "
                f"(via {nvml_lib.origin}), which is {nvml_lib.error}",
                fix=f"move {nvml_lib.path} out of the way, or reinstall the NVIDIA driver",
                see=f"file {nvml_lib.path}",
            )
        ]
    if not drv.available:
        fix = (
            "install the NVIDIA driver (Ubuntu: sudo ubuntu-drivers install; others: the "
            "distribution's nvidia-driver package), then reboot"
        )
        if ctx.platform.container:
            fix = (
                "start the container with GPU access: docker run --gpus all ... "
                "(needs the NVIDIA Container Toolkit on the host)"
            )
        if ctx.platform.wsl:
            fix = "install or update the NVIDIA driver on Windows (not inside WSL)"
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"No usable NVIDIA driver: NVML cannot start ({drv.error})",
                fix=fix,
                see=see,
            )
        ]
    finding = f"driver {drv.driver_version}, supports CUDA up to {drv.cuda_version}"
    need = (ctx.build_info or {}).get("cuda_version")
    if not need or not drv.cuda_version:
        return [Check("driver", title, Status.OK, finding, see=see)]
    have_v, need_v = version_tuple(drv.cuda_version), version_tuple(str(need))
    minimum = data.load("cuda_drivers")["minimum"].get(str(need_v[0]), {})
    key = "windows" if ctx.platform.system == "Windows" else "linux"
    if have_v[:1] < need_v[:1]:
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"{finding}; TensorFlow {ctx.tf_version} needs CUDA {need_v[0]}.x, "
                f"which needs driver >= {minimum.get(key) or 'the CUDA release notes say'}",
                fix=f"upgrade the NVIDIA driver to >= {minimum.get(key)}",
                see=see,
            )
        ]
    if have_v[:2] < need_v[:2]:
        return [
            Check(
                "driver",
                title,
                Status.WARN,
                f"{finding}; TensorFlow was built with CUDA {need}. CUDA minor version "
                "compatibility lets it run, but PTX from the newer toolkit cannot be "
                "JIT-compiled by this driver",
                fix=f"upgrade the NVIDIA driver to one that supports CUDA {need_v[0]}.{need_v[1]}",
                see=see,
            )
        ]
    return [Check("driver", title, Status.OK, f"{finding}; TensorFlow needs CUDA {need}", see=see)]
