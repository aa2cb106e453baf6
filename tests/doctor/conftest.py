"""A TensorFlow installation on disk, built once per session and copied per test.

Every library in it is a real shared object compiled here; the doctor resolves and
dlopen()s them for real. Only NVML, the TF import probe and the platform are injected.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import CC, FakeGpu, FakeNvml, build_lib, write_dist
from tfaccel.doctor import DoctorContext
from tfaccel.doctor import loader as ld
from tfaccel.doctor.probes import PlatformFacts, TfRuntime
from tfaccel.hardware.nvml import driver_info

BUILD_INFO = (
    "import collections\n"
    "build_info = collections.OrderedDict([('cpu_compiler', 'clang'), "
    "('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), "
    "('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), "
    "('is_rocm_build', False), ('is_tensorrt_build', False)])\n"
)
# (wheel folder, pip distribution, version, sonames with their real file names)
WHEELS: list[tuple[str, str, str, list[tuple[str, str | None]]]] = [
    ("cuda_runtime", "nvidia_cuda_runtime_cu12", "12.5.82", [("libcudart.so.12", None)]),
    (
        "cublas",
        "nvidia_cublas_cu12",
        "12.5.3.2",
        [("libcublasLt.so.12", None), ("libcublas.so.12", None)],
    ),
    ("cufft", "nvidia_cufft_cu12", "11.2.3.61", [("libcufft.so.11", None)]),
    ("curand", "nvidia_curand_cu12", "10.3.6.82", [("libcurand.so.10", None)]),
    ("nvjitlink", "nvidia_nvjitlink_cu12", "12.5.82", [("libnvJitLink.so.12", None)]),
    ("cusolver", "nvidia_cusolver_cu12", "11.6.3.83", [("libcusolver.so.11", None)]),
    ("cusparse", "nvidia_cusparse_cu12", "12.5.1.3", [("libcusparse.so.12", None)]),
    ("cuda_cupti", "nvidia_cuda_cupti_cu12", "12.5.82", [("libcupti.so.12", None)]),
    ("cudnn", "nvidia_cudnn_cu12", "9.3.0.75", [("libcudnn.so.9", None)]),
    ("nccl", "nvidia_nccl_cu12", "2.27.7", [("libnccl.so.2", None)]),
]
TF_REQUIRES = [
    "keras>=3.12.0",
    'nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == "and-cuda"',
    'nvidia-cuda-runtime-cu12<13.0,>=12.5.82; extra == "and-cuda"',
    'nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == "and-cuda"',
]


def _needs(site: Path, soname: str) -> tuple[list[Path], list[str]]:
    """The DT_NEEDED and RUNPATH NVIDIA's wheels give a library (the ones that matter)."""
    if soname == "libcublas.so.12":
        return [site / "nvidia/cublas/lib/libcublasLt.so.12"], ["$ORIGIN"]
    if soname in ("libcusparse.so.12", "libcusolver.so.11"):
        return [site / "nvidia/nvjitlink/lib/libnvJitLink.so.12"], ["$ORIGIN/../../nvjitlink/lib"]
    return [], []


def _build_template(root: Path) -> Path:
    site = root / "site"
    tf = site / "tensorflow"
    # As TensorFlow 2.21's: no folder for cuRAND or nvJitLink (nvJitLink is found
    # through cuSPARSE's and cuSOLVER's own RUNPATH, as in NVIDIA's wheels).
    runpath = [f"$ORIGIN/../nvidia/{w}/lib" for w, *_ in WHEELS if w not in ("curand", "nvjitlink")]
    build_lib(tf, "libtensorflow_framework.so.2", runpath=runpath)
    (tf / "python/platform").mkdir(parents=True)
    (tf / "python/platform/build_info.py").write_text(BUILD_INFO)
    (tf / "__init__.py").write_text("")
    write_dist(site, "tensorflow", "2.21.0", TF_REQUIRES)
    write_dist(site, "keras", "3.15.1")
    build_lib(root / "driver", "libcuda.so.1")
    for folder, dist, version, libs in WHEELS:
        lib_dir = site / "nvidia" / folder / "lib"
        records = []
        for soname, real in libs:
            needs, runpath = _needs(site, soname)
            build_lib(lib_dir, soname, real_name=real, needs=needs, runpath=runpath)
            records.append(f"nvidia/{folder}/lib/{real or soname},,")
        write_dist(site, dist.replace("_", "-"), version)
        (site / f"{dist}-{version}.dist-info" / "RECORD").write_text("\n".join(records) + "\n")
    return site


@pytest.fixture(scope="session")
def tf_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CC is None:
        pytest.skip("no C compiler on this machine")
    return _build_template(tmp_path_factory.mktemp("tftemplate"))


LINUX = PlatformFacts(
    system="Linux",
    machine="x86_64",
    release="6.8.0",
    wsl=False,
    container=None,
    nvidia_device_nodes=("/dev/nvidia0", "/dev/nvidiactl"),
)
TF_SEES_H200 = TfRuntime(
    ran=True,
    version="2.21.0",
    built_with_cuda=True,
    gpus=(
        {"device": "/physical_device:GPU:0", "name": "NVIDIA H200", "compute_capability": "9.0"},
    ),
)
TF_SEES_NOTHING = TfRuntime(
    ran=True,
    version="2.21.0",
    built_with_cuda=True,
    gpus=(),
    log_lines=("W dso_loader: Could not load dynamic library 'libcudnn.so.8'",),
)

MakeCtx = Callable[..., DoctorContext]


@pytest.fixture
def fake_tf(tf_template: Path, tmp_path: Path) -> tuple[Path, MakeCtx]:
    """(site directory, factory of DoctorContext over that site)."""
    site = tmp_path / "site"
    shutil.copytree(tf_template, site, symlinks=True)

    def make(
        env: dict[str, str] | None = None,
        nvml: Any = None,
        platform: PlatformFacts = LINUX,
        runtime: TfRuntime = TF_SEES_H200,
        **kw: Any,
    ) -> DoctorContext:
        return DoctorContext(
            env=env if env is not None else {"PATH": "/nonexistent"},
            dist_paths=[str(site)],
            tf_dir_override=site / "tensorflow",
            site_dirs_override=[str(site)],
            ld_cache_override={
                **ld.system_ld_cache(),
                "libcuda.so.1": [str(tf_template.parent / "driver/libcuda.so.1")],
            },
            platform_override=platform,
            tf_runtime_override=runtime,
            driver_override=driver_info(nvml if nvml is not None else FakeNvml([FakeGpu()])),
            **kw,
        )

    return site, make
