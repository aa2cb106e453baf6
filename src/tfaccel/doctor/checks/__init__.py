"""The doctor's checks: each a small function of the context returning Check rows.

Order matters only for reading: installation, build, driver, libraries, platform, and
last "does TensorFlow see the GPU", which names the first real cause it finds above.
"""

from __future__ import annotations

from tfaccel.doctor.checks.base import CheckFn, no_gpu_here
from tfaccel.doctor.checks.build import check_build, check_compat
from tfaccel.doctor.checks.driver import check_driver
from tfaccel.doctor.checks.install import (
    check_companions,
    check_keras,
    check_keras_backend,
    check_requirements,
    check_tf_install,
    check_tfaccel_support,
)
from tfaccel.doctor.checks.libraries import (
    check_conda,
    check_duplicates,
    check_ld_library_path,
    check_libraries,
    check_nvcc,
)
from tfaccel.doctor.checks.platform import (
    check_capability,
    check_gpu_state,
    check_mps,
    check_platform,
    check_shadowing,
    check_tf_memory_env,
    check_visible_devices,
    check_xla_flags,
)
from tfaccel.doctor.checks.verdict import check_tf_sees_gpu

CHECKS: tuple[CheckFn, ...] = (
    check_tf_install,
    check_keras,
    check_requirements,
    check_keras_backend,
    check_companions,
    check_tfaccel_support,
    check_build,
    check_driver,
    check_gpu_state,
    check_libraries,
    check_compat,
    check_duplicates,
    check_ld_library_path,
    check_nvcc,
    check_conda,
    check_platform,
    check_visible_devices,
    check_tf_memory_env,
    check_shadowing,
    check_xla_flags,
    check_mps,
    check_capability,
)

__all__ = ["CHECKS", "CheckFn", "check_tf_sees_gpu", "no_gpu_here"]
