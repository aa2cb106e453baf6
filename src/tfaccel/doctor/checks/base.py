"""What every section of the doctor's checks shares: the commands it points to, the check
function's type, and whether the machine has an NVIDIA GPU at all."""

from __future__ import annotations

from collections.abc import Callable

from tfaccel.doctor.context import DoctorContext
from tfaccel.doctor.model import Check

PIP_LIST = "pip list 2>/dev/null | grep -iE 'tensorflow|tf-nightly|keras|nvidia'"
TF_BUILD = 'python -c "import tensorflow as tf; print(tf.sysconfig.get_build_info())"'
TF_GPUS = "python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\""

CheckFn = Callable[[DoctorContext], list[Check]]


def tf_pin(ctx: DoctorContext) -> str:
    return f"=={ctx.tf_version}" if ctx.tf_version else ""


NO_GPU = "this machine has no NVIDIA GPU (none on its PCI bus)"


def no_gpu_here(ctx: DoctorContext) -> bool:
    """A Linux machine (not WSL, whose GPU is Windows') with no NVIDIA device on its PCI
    bus: no driver, CUDA library or container flag would give TensorFlow a GPU, so the
    rows that would fix one say so instead of a fix."""
    return ctx.platform.system == "Linux" and ctx.platform.nvidia_pci_devices == 0
