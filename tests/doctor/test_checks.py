"""The doctor's checks on real files: a fake-but-real TensorFlow install per test."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.doctor.conftest import LINUX, TF_SEES_NOTHING, MakeCtx
from tests.fakes import FakeGpu, FakeNvml, build_lib, write_dist
from tfaccel.doctor import Check, DoctorContext, Status, run_doctor
from tfaccel.doctor.checks import check_tf_install
from tfaccel.doctor.checks.platform import _capability_verdict, check_visible_devices
from tfaccel.doctor.probes import TfRuntime


def rows(report_checks: tuple[Check, ...]) -> dict[str, Check]:
    return {c.id: c for c in report_checks}


def _fake_nvcc(tmp_path: Path, release: str) -> Path:
    """A folder with an `nvcc` that prints `release` as the real one does."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nvcc = bindir / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return bindir


def test_healthy_install_loads_every_library(fake_tf: tuple[Path, MakeCtx]) -> None:
    _site, make = fake_tf
    report = run_doctor(make())
    by = rows(report.checks)
    assert not report.failed, [c for c in report.checks if c.status is Status.FAIL]
    assert by["lib.loaded"].finding.startswith("10 of 10 resolve and load")
    assert "nvidia-cudnn-cu12 9.3.0.75 (pip)" in by["lib.loaded"].finding
    assert by["tf.compat"].status is Status.OK
    assert by["driver"].status is Status.OK
    assert by["tf.gpus"].status is Status.OK
    # TF 2.21 has no sm_90 machine code: an H200 runs JIT-compiled PTX.
    cc = by["gpu.compute_capability.0"]
    assert cc.status is Status.WARN and "compute_90 PTX" in cc.finding
    assert cc.fix and "CUDA_CACHE_MAXSIZE" in cc.fix
    assert report.verdict.startswith("TensorFlow can use the GPU")


def test_missing_wheel_names_the_library_and_the_pip_fix(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    shutil.rmtree(site / "nvidia/cudnn")
    report = run_doctor(make(runtime=TF_SEES_NOTHING))
    by = rows(report.checks)
    assert by["lib.cudnn"].status is Status.FAIL
    assert "libcudnn.so.9 is not found" in by["lib.cudnn"].finding
    assert by["lib.cudnn"].fix == "pip install 'nvidia-cudnn-cu12<10.0,>=9.3.0.75'"
    # The verdict names the real cause, not TF's log line (which talks about cuDNN 8).
    assert by["tf.gpus"].status is Status.FAIL
    assert "libcudnn.so.9 is not found" in by["tf.gpus"].finding
    assert "lib.cudnn" in by["tf.gpus"].finding


def test_library_present_but_its_dependency_missing(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    lib_dir = site / "nvidia/cudnn/lib"
    (lib_dir / "libcudnn.so.9").unlink()
    elsewhere = build_lib(site.parent / "gone", "libcudnn_graph.so.9")
    top = build_lib(lib_dir, "libcudnn.so.9", needs=[elsewhere], runpath=["$ORIGIN"])
    report = run_doctor(make(runtime=TF_SEES_NOTHING))
    row = rows(report.checks)["lib.cudnn"]
    assert row.status is Status.FAIL
    assert f"exists at {top}" in row.finding
    assert f"libcudnn_graph.so.9 (needed by {top}) is missing" in row.finding


def test_all_wheels_missing_is_one_grouped_row(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    shutil.rmtree(site / "nvidia")
    by = rows(run_doctor(make(runtime=TF_SEES_NOTHING)).checks)
    assert by["lib.missing"].status is Status.FAIL
    assert by["lib.missing"].finding.startswith("10 of the 10 CUDA libraries")
    assert by["lib.missing"].fix == "pip install 'tensorflow[and-cuda]==2.21.0'"
    assert "lib.cudnn" not in by


def test_duplicate_versions_are_named_with_the_one_loaded(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    build_lib(site / "torch/lib", "libcudnn.so.9", real_name="libcudnn.so.9.1.0")
    by = rows(run_doctor(make()).checks)
    dup = by["lib.duplicates"]
    assert dup.status is Status.WARN
    assert "9.3.0.75 at " in dup.finding and "(loaded)" in dup.finding
    assert "9.1.0 at " + str(site / "torch/lib/libcudnn.so.9") in dup.finding


def test_ld_library_path_shadowing_an_old_cudart(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    old = site.parent / "cuda-12.0/lib64"
    build_lib(old, "libcudart.so.12", real_name="libcudart.so.12.0.107")
    by = rows(run_doctor(make(env={"LD_LIBRARY_PATH": str(old), "PATH": "/x"})).checks)
    assert by["env.ld_library_path"].status is Status.WARN
    assert f"libcudart.so.12 from {old}" in by["env.ld_library_path"].finding
    assert by["env.ld_library_path"].fix.startswith("unset LD_LIBRARY_PATH")  # type: ignore[union-attr]
    assert by["tf.compat"].status is Status.WARN
    assert "CUDA runtime 12.0.107 is older than the 12.5" in by["tf.compat"].finding


def test_a_cuda13_library_linked_under_the_cuda12_name(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    lib_dir = site / "nvidia/cublas/lib"
    (lib_dir / "libcublas.so.12").unlink()
    cu13 = site / "nvidia/cu13/lib"
    build_lib(cu13, "libcublas.so.13", real_name="libcublas.so.13.1.0")
    (lib_dir / "libcublas.so.12").symlink_to(cu13 / "libcublas.so.13")
    by = rows(run_doctor(make()).checks)
    row = by["lib.renamed"]
    assert row.status is Status.WARN
    assert f"libcublas.so.12 -> {cu13 / 'libcublas.so.13.1.0'}" in row.finding
    assert "lib.cublas" not in by  # it does load


def test_old_driver_fails_with_the_minimum_named(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    nvml = FakeNvml(
        [FakeGpu(name="Tesla V100-SXM2-16GB", cc=(7, 0))], driver="470.82.01", cuda=11040
    )
    by = rows(run_doctor(make(nvml=nvml, runtime=TF_SEES_NOTHING)).checks)
    assert by["driver"].status is Status.FAIL
    assert "supports CUDA up to 11.4" in by["driver"].finding
    assert "525.60.13" in by["driver"].finding
    assert by["gpu.compute_capability.0"].status is Status.OK  # sm_70 is compiled in
    assert "supports CUDA up to 11.4" in by["tf.gpus"].finding


def test_ptx_only_gpu_with_a_driver_older_than_the_ptx_fails(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    _, make = fake_tf
    by = rows(run_doctor(make(nvml=FakeNvml([FakeGpu()], cuda=12020))).checks)
    assert by["driver"].status is Status.WARN
    cc = by["gpu.compute_capability.0"]
    assert cc.status is Status.FAIL and "JIT fails" in cc.finding


def test_nvml_missing_is_a_driver_failure_not_a_crash(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    nvml = FakeNvml(init_error="NVML Shared Library Not Found")
    by = rows(run_doctor(make(nvml=nvml, runtime=TF_SEES_NOTHING)).checks)
    assert by["driver"].status is Status.FAIL
    assert "NVML Shared Library Not Found" in by["driver"].finding
    assert by["gpu.state"].status is Status.SKIP


def test_lost_gpu_is_reported(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    nvml = FakeNvml([FakeGpu(), FakeGpu(broken=True)])
    by = rows(run_doctor(make(nvml=nvml)).checks)
    assert by["gpu.state"].status is Status.FAIL
    assert "GPU 1: FakeNVMLError: GPU is lost" in by["gpu.state"].finding


def test_cuda_visible_devices_hiding_everything(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    by = rows(run_doctor(make(env={"CUDA_VISIBLE_DEVICES": "-1"}, runtime=TF_SEES_NOTHING)).checks)
    assert by["env.cuda_visible_devices"].status is Status.FAIL
    assert by["env.cuda_visible_devices"].fix == "unset CUDA_VISIBLE_DEVICES"
    assert "hides every GPU" in by["tf.gpus"].finding


@pytest.mark.parametrize(
    ("env", "finding", "fix"),
    [
        ({"TF_FORCE_GPU_ALLOW_GROWTH": "1"}, "TF_FORCE_GPU_ALLOW_GROWTH='1' is ignored", "=true"),
        ({"TF_FORCE_GPU_ALLOW_GROWTH": "True"}, "reads only 'true' or 'false'", "=true"),
        ({"TF_GPU_ALLOCATOR": "cuda_malloc"}, "cudaMalloc, unpooled", "unset TF_GPU_ALLOCATOR"),
        ({"TF_GPU_ALLOCATOR": "memory_guard"}, "a debugging allocator", "unset TF_GPU_ALLOCATOR"),
        ({"TF_GPU_ALLOCATOR": "async"}, "'Invalid allocator type'", "unset TF_GPU_ALLOCATOR"),
    ],
)
def test_tensorflows_memory_variables_that_do_not_do_what_was_meant(
    env: dict[str, str], finding: str, fix: str
) -> None:
    """TensorFlow ignores them with a log line, or slows every step: a warn with the fix."""
    from tfaccel.doctor.checks.platform import check_tf_memory_env

    (row,) = check_tf_memory_env(DoctorContext(env=env))
    assert row.status is Status.WARN and finding in row.finding and fix in (row.fix or "")
    both = check_tf_memory_env(
        DoctorContext(env={"TF_FORCE_GPU_ALLOW_GROWTH": "1", "TF_GPU_ALLOCATOR": "cuda_malloc"})
    )
    assert [r.id for r in both] == ["env.tf_memory.growth", "env.tf_memory.allocator"]


def test_tensorflows_memory_variables_understood() -> None:
    from tfaccel.doctor.checks.platform import check_tf_memory_env

    for env in ({}, {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "TF_GPU_ALLOCATOR": "cuda_malloc_async"}):
        (row,) = check_tf_memory_env(DoctorContext(env=env))
        assert row.status is Status.OK, row
    (row,) = check_tf_memory_env(DoctorContext(env={"TF_FORCE_GPU_ALLOW_GROWTH": "false"}))
    assert row.status is Status.OK and "memory='growth' too, is off" in row.finding


def test_cuda_visible_devices_out_of_range(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    by = rows(run_doctor(make(env={"CUDA_VISIBLE_DEVICES": "0,3"})).checks)
    assert by["env.cuda_visible_devices"].status is Status.WARN
    row = by["env.cuda_visible_devices"]
    assert "('3'), so 1 GPU(s) are visible; 1 GPU(s) exist" in row.finding
    assert row.fix == "export CUDA_VISIBLE_DEVICES=0"


def test_cuda_visible_devices_without_a_driver_to_match_against(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    """With no GPU listed to match the entries against, a well-formed UUID is not said
    to be a visible GPU."""
    _, make = fake_tf
    ctx = make(env={"CUDA_VISIBLE_DEVICES": "GPU-0123abcd"}, nvml=FakeNvml([]))
    (row,) = check_visible_devices(ctx)
    assert row.status is Status.OK
    assert "1 well-formed entry, not matched against a GPU" in row.finding
    assert "visible" not in row.finding


def test_side_by_side_distributions(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    write_dist(site, "tensorflow-cpu", "2.20.0")
    row = rows(run_doctor(make()).checks)["tf.install"]
    assert row.status is Status.FAIL
    assert "tensorflow 2.21.0, tensorflow-cpu 2.20.0" in row.finding
    assert row.fix and row.fix.startswith("pip uninstall -y tensorflow tensorflow-cpu")


def test_a_required_companion_distribution_is_not_a_conflict(tmp_path: Path) -> None:
    write_dist(tmp_path, "tensorflow", "2.15.0", ["tensorflow-intel==2.15.0"])
    write_dist(tmp_path, "tensorflow-intel", "2.15.0")
    ctx = DoctorContext(dist_paths=[str(tmp_path)], tf_dir_override=tmp_path)
    [row] = check_tf_install(ctx)
    assert row.status is Status.OK, row.finding


def test_keras_that_does_not_match(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    shutil.rmtree(site / "keras-3.15.1.dist-info")
    write_dist(site, "keras", "2.15.0")
    row = rows(run_doctor(make()).checks)["tf.keras"]
    assert row.status is Status.FAIL
    assert "keras 2.15.0 does not match tensorflow 2.21.0" in row.finding
    assert row.fix == "pip install 'keras>=3.12.0'"


def test_legacy_keras_flag_without_tf_keras(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    by = rows(run_doctor(make(env={"TF_USE_LEGACY_KERAS": "1"})).checks)
    assert by["tf.keras_legacy"].status is Status.FAIL
    assert by["tf.keras_legacy"].fix == "pip install 'tf-keras~=2.21.0'"


def test_keras_on_another_backend(fake_tf: tuple[Path, MakeCtx], tmp_path: Path) -> None:
    """KERAS_BACKEND, or keras.json's backend: Keras models then never reach TF's GPU."""
    _, make = fake_tf
    by = rows(run_doctor(make(env={"KERAS_BACKEND": "jax"})).checks)
    assert by["keras.backend"].status is Status.FAIL
    assert "Keras runs on its jax backend (KERAS_BACKEND)" in by["keras.backend"].finding
    assert by["keras.backend"].fix == "unset KERAS_BACKEND (or export KERAS_BACKEND=tensorflow)"
    (tmp_path / ".keras").mkdir()
    (tmp_path / ".keras/keras.json").write_text('{"backend": "torch"}')
    by = rows(run_doctor(make(env={"HOME": str(tmp_path)})).checks)
    assert by["keras.backend"].status is Status.FAIL
    assert by["keras.backend"].fix == f'set "backend": "tensorflow" in {tmp_path}/.keras/keras.json'
    (tmp_path / ".keras/keras.json").write_text("{not json")  # Keras ignores it too
    by = rows(run_doctor(make(env={"HOME": str(tmp_path)})).checks)
    assert by["keras.backend"].status is Status.OK
    assert by["keras.backend"].finding == "tensorflow (Keras' default)"


def test_cpu_only_build(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    info = site / "tensorflow/python/platform/build_info.py"
    info.write_text(
        "import collections\nbuild_info = collections.OrderedDict("
        "[('is_cuda_build', False), ('is_rocm_build', False)])\n"
    )
    by = rows(run_doctor(make(runtime=TF_SEES_NOTHING)).checks)
    assert by["tf.build"].status is Status.FAIL
    assert "built without CUDA" in by["tf.build"].finding
    assert "built without CUDA" in by["tf.gpus"].finding


def test_build_info_is_parsed_never_executed(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    marker = site / "executed"
    info = site / "tensorflow/python/platform/build_info.py"
    info.write_text(f"open({str(marker)!r}, 'w').write('x')\n" + info.read_text())
    ctx = make()
    assert ctx.build_info and ctx.build_info["cuda_version"] == "12.5.1"
    assert not marker.exists()


def test_platform_traps(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    win = replace(LINUX, system="Windows", release="10")
    row = rows(run_doctor(make(platform=win)).checks)["platform"]
    assert row.status is Status.FAIL and "WSL2" in (row.fix or "")
    box = replace(LINUX, container="docker", nvidia_device_nodes=())
    row = rows(run_doctor(make(platform=box)).checks)["platform"]
    assert row.status is Status.FAIL and "--gpus all" in (row.fix or "")
    wsl = replace(LINUX, wsl=True, wsl_libcuda=False)
    row = rows(run_doctor(make(platform=wsl)).checks)["platform"]
    assert row.status is Status.FAIL and "/usr/lib/wsl/lib" in row.finding


def test_mps_daemon_is_noticed(fake_tf: tuple[Path, MakeCtx], tmp_path: Path) -> None:
    from tfaccel.hardware.capabilities import mps_state

    pipe = tmp_path / "mps"
    pipe.mkdir()
    (pipe / "control").write_text("")
    proc = tmp_path / "proc/4242"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("nvidia-cuda-mps-control\n")
    pipes, procs = mps_state({"CUDA_MPS_PIPE_DIRECTORY": str(pipe)}, str(tmp_path / "proc"))
    assert pipes == [str(pipe)] and procs == ["nvidia-cuda-mps-control (pid 4242)"]
    _, make = fake_tf
    facts = replace(LINUX, mps_pipe_dirs=tuple(pipes), mps_processes=tuple(procs))
    assert rows(run_doctor(make(platform=facts)).checks)["gpu.mps"].status is Status.WARN


def test_conda_and_pip_mix(fake_tf: tuple[Path, MakeCtx], tmp_path: Path) -> None:
    prefix = tmp_path / "conda"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta/cudatoolkit-11.8.0-0.json").write_text(
        '{"name": "cudatoolkit", "version": "11.8.0"}'
    )
    _, make = fake_tf
    row = rows(run_doctor(make(env={"CONDA_PREFIX": str(prefix)})).checks)["env.conda"]
    assert row.status is Status.WARN and "cudatoolkit 11.8.0" in row.finding


def test_nvcc_mismatch_is_explained_not_alarmed(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    bindir = _fake_nvcc(tmp_path, "11.8")
    _, make = fake_tf
    row = rows(run_doctor(make(env={"PATH": str(bindir)})).checks)["cuda.nvcc"]
    assert row.status is Status.OK
    assert "nvcc 11.8" in row.finding and "This is normal" in row.finding


def test_a_crashing_check_does_not_stop_the_others(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf

    def check_boom(ctx: DoctorContext) -> list[Check]:
        raise RuntimeError("boom")

    report = run_doctor(make(), checks=(check_boom, check_tf_install))
    by = rows(report.checks)
    assert by["internal.boom"].status is Status.WARN
    assert "RuntimeError: boom" in by["internal.boom"].finding
    assert by["tf.install"].status is Status.OK
    assert "tf.gpus" in by


def test_tensorflow_not_installed(tmp_path: Path, monkeypatch: object) -> None:
    import tfaccel._tf as tfmod

    mp = monkeypatch  # type: ignore[assignment]
    mp.setattr(tfmod, "tf_package_dir", lambda: None)  # type: ignore[attr-defined]
    ctx = DoctorContext(
        dist_paths=[str(tmp_path)],
        driver_override=None,
        nvml_lib=FakeNvml(init_error="Driver Not Loaded"),
    )
    report = run_doctor(ctx)
    by = rows(report.checks)
    assert by["tf.install"].status is Status.FAIL
    assert by["tf.install"].fix == "pip install 'tensorflow[and-cuda]'"
    assert by["tf.gpus"].status is Status.SKIP
    assert report.failed


def test_capability_verdicts() -> None:
    tf221 = ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
    assert _capability_verdict("8.0", tf221)[0] is Status.OK
    status, text = _capability_verdict("8.6", tf221)
    assert status is Status.OK and "binary compatible" in text
    assert _capability_verdict("9.0", tf221)[0] is Status.WARN
    assert _capability_verdict("12.0", tf221)[0] is Status.WARN
    assert _capability_verdict("5.2", tf221)[0] is Status.FAIL
    assert _capability_verdict("9.0", ["sm_80", "sm_90"])[0] is Status.OK
    assert _capability_verdict("9.0", ["sm_80", "sm_86"])[0] is Status.FAIL


def test_xla_flags_it_does_not_know_fail_with_the_flags_to_keep(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    from tfaccel.doctor.probes import XlaFlagsProbe

    _, make = fake_tf
    env = {"XLA_FLAGS": "--xla_gpu_autotune_level=2 --xla_gpu_enable_cuda_graphs=true"}
    unknown = XlaFlagsProbe(True, False, "XLA_FLAGS", ("--xla_gpu_enable_cuda_graphs=true",))
    by = rows(run_doctor(make(env=env, xla_flags_override=unknown)).checks)
    check = by["env.xla_flags"]
    assert check.status is Status.FAIL and "aborts the process" in check.finding
    assert check.fix == 'export XLA_FLAGS="--xla_gpu_autotune_level=2"'
    alone = {"TF_XLA_FLAGS": "--tf_xla_bogus=1"}
    gone = XlaFlagsProbe(True, False, "TF_XLA_FLAGS", ("--tf_xla_bogus=1",))
    by = rows(run_doctor(make(env=alone, xla_flags_override=gone)).checks)
    assert by["env.xla_flags"].fix == "unset TF_XLA_FLAGS"
    by = rows(run_doctor(make(env=env, xla_flags_override=XlaFlagsProbe(True))).checks)
    assert by["env.xla_flags"].status is Status.OK
    assert rows(run_doctor(make()).checks)["env.xla_flags"].status is Status.OK  # none set


def test_a_keras_py_in_the_current_directory_is_named(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    _, make = fake_tf
    here = tmp_path / "project"
    here.mkdir()
    assert rows(run_doctor(make(cwd=str(here))).checks)["env.shadowing"].status is Status.OK
    (here / "keras.py").write_text("raise ImportError('my own keras.py')\n")
    (here / "tensorflow").mkdir()
    (here / "tensorflow" / "__init__.py").write_text("")
    row = rows(run_doctor(make(cwd=str(here))).checks)["env.shadowing"]
    assert row.status is Status.FAIL and "keras.py" in row.finding and "tensorflow" in row.finding
    assert row.fix is not None and row.fix.startswith("rename ")


def test_no_version_is_read_from_a_truncated_library(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    """Issue 45: a truncated libcudnn.so.9 first on the path gave "cuDNN 9 is older than
    the tested 9.3" (a version read from its file name), was listed as "a copy of a
    different version", and its fault was "invalid ELF header". Now: the row names the
    truncation, no version comes from it, and it is no duplicate of another version."""
    site, make = fake_tf
    good = site / "nvidia/cudnn/lib/libcudnn.so.9"
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    data = good.read_bytes()
    (bad_dir / "libcudnn.so.9").write_bytes(data[: len(data) // 2])
    report = run_doctor(make(env={"LD_LIBRARY_PATH": str(bad_dir), "PATH": "/x"}))
    by = rows(report.checks)
    row = by["lib.cudnn"]
    assert row.status is Status.FAIL and "truncated: the file ends at" in row.finding
    assert "invalid ELF header" not in row.finding
    assert "older than" not in by["tf.compat"].finding
    assert "libcudnn" not in by["lib.duplicates"].finding


def test_a_corrupt_cudnn_first_on_ld_library_path_is_named_as_the_cause(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    import os

    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = bad_dir / "libcudnn.so.9"
    bad.write_bytes(os.urandom(8192))
    site, make = fake_tf
    report = run_doctor(
        make(env={"LD_LIBRARY_PATH": str(bad_dir), "PATH": "/x"}, runtime=TF_SEES_NOTHING)
    )
    by = rows(report.checks)
    row = by["lib.cudnn"]
    assert row.status is Status.FAIL
    assert f"resolves first to {bad}" in row.finding and "invalid ELF header" in row.finding
    assert str(site / "nvidia/cudnn/lib/libcudnn.so.9") in row.finding  # never reached
    assert row.fix and f"move {bad} out of the way" in row.fix
    assert "lib.cudnn" in by["tf.gpus"].finding  # the verdict points at it
    assert "(loaded)" not in by["lib.duplicates"].finding


def test_nvjitlink_loads_through_cusparse_and_curand_is_not_asked_for(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    # TensorFlow 2.21's RUNPATH has no folder for either (as the template's): a correct
    # pip install must not report them missing.
    _, make = fake_tf
    by = rows(run_doctor(make()).checks)
    assert "lib.nvJitLink" not in by and "lib.curand" not in by
    details = by["lib.loaded"].details["libraries"]  # type: ignore[index]
    assert details["libnvJitLink.so.12"]["origin"] == "RUNPATH of libcusparse.so.12"
    assert "libcurand.so.10" not in details


def test_a_machine_without_an_nvidia_gpu_has_no_driver_to_fix(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    _, make = fake_tf
    nvml = FakeNvml(init_error="NVML Shared Library Not Found")
    container = replace(LINUX, container="docker", nvidia_device_nodes=(), nvidia_pci_devices=0)
    row = rows(run_doctor(make(nvml=nvml, platform=container, runtime=TF_SEES_NOTHING)).checks)[
        "driver"
    ]
    assert row.status is Status.SKIP and "no NVIDIA GPU" in row.finding
    assert row.fix is None or "docker" not in row.fix
    # where the bus shows a GPU, the container fix stays
    with_gpu = replace(container, nvidia_pci_devices=1)
    row = rows(run_doctor(make(nvml=nvml, platform=with_gpu, runtime=TF_SEES_NOTHING)).checks)[
        "driver"
    ]
    assert row.status is Status.FAIL and "docker run --gpus all" in (row.fix or "")


def test_nvcc_beside_a_tensorflow_without_cuda_says_so(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    bindir = _fake_nvcc(tmp_path, "12.4")
    site, make = fake_tf
    (site / "tensorflow/python/platform/build_info.py").write_text(
        "import collections\nbuild_info = collections.OrderedDict("
        "[('is_cuda_build', False), ('is_rocm_build', False)])\n"
    )
    row = rows(run_doctor(make(env={"PATH": str(bindir)}, runtime=TF_SEES_NOTHING)).checks)[
        "cuda.nvcc"
    ]
    assert "None" not in row.finding and "built without CUDA" in row.finding


def test_nvcc_when_no_cuda_runtime_loads_says_so(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    bindir = _fake_nvcc(tmp_path, "12.4")
    site, make = fake_tf
    shutil.rmtree(site / "nvidia/cuda_runtime")
    row = rows(run_doctor(make(env={"PATH": str(bindir)}, runtime=TF_SEES_NOTHING)).checks)[
        "cuda.nvcc"
    ]
    assert "no CUDA runtime loads" in row.finding and "differs from" not in row.finding


def test_a_corrupt_nvml_library_is_named_not_called_missing(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path
) -> None:
    import os

    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    (bad_dir / "libnvidia-ml.so.1").write_bytes(os.urandom(4096))
    _, make = fake_tf
    nvml = FakeNvml(init_error="NVML Shared Library Not Found")
    env = {"LD_LIBRARY_PATH": str(bad_dir), "PATH": "/x"}
    container = replace(LINUX, container="docker")
    row = rows(run_doctor(make(env=env, nvml=nvml, platform=container)).checks)["driver"]
    assert row.status is Status.FAIL
    assert f"resolves first to {bad_dir / 'libnvidia-ml.so.1'}" in row.finding
    assert "invalid ELF header" in row.finding and "docker" not in (row.fix or "")


def test_a_pair_tfaccel_supports_in_part_says_what_it_loses(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    shutil.rmtree(site / "keras-3.15.1.dist-info")
    write_dist(site, "keras", "3.12.0")
    by = rows(run_doctor(make()).checks)
    row = by["tfaccel.support"]
    assert row.status is Status.WARN
    assert "float8=True (needs Keras 3.13.0)" in row.finding
    assert "attention='cudnn' (needs Keras 3.15.0)" in row.finding
    assert "gradient_checkpointing" not in row.finding


def test_the_tested_pair_loses_nothing(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    row = rows(run_doctor(make()).checks)["tfaccel.support"]
    assert row.status is Status.OK and "every feature" in row.finding


def test_a_keras_below_tfaccels_floor_fails_with_the_fix(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    shutil.rmtree(site / "keras-3.15.1.dist-info")
    write_dist(site, "keras", "3.0.5")
    row = rows(run_doctor(make()).checks)["tfaccel.support"]
    assert row.status is Status.FAIL and "tfaccel needs Keras 3.6 or newer" in row.finding
    assert row.fix == "pip install 'keras>=3.6'"


def test_kerashub_and_tensorflow_text_pins_are_held_to_the_tensorflow_here(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    """KerasHub 0.32 wants Keras 3.15+; tensorflow-text X.Y wants TensorFlow X.Y: pins
    that break when one of the set is upgraded alone, named with the fix."""
    site, make = fake_tf
    shutil.rmtree(site / "keras-3.15.1.dist-info")
    write_dist(site, "keras", "3.12.0")
    write_dist(site, "keras-hub", "0.32.0", ["keras>=3.15", "tensorflow-text>=2.20.1"])
    write_dist(site, "tensorflow-text", "2.20.1", ["tensorflow<2.21,>=2.20.0"])
    ctx = make()  # TensorFlow 2.21.0
    by = rows(run_doctor(ctx).checks)
    hub, text = by["keras-hub.match"], by["tensorflow-text.match"]
    assert hub.status is Status.FAIL
    assert hub.finding == "keras-hub 0.32.0 requires keras>=3.15, and keras 3.12.0 is installed"
    assert hub.fix == (
        f"pip install 'keras-hub' 'tensorflow=={ctx.tf_version}' 'keras==3.12.0'  "
        "(pip picks the keras-hub that fits them)"
    )
    assert text.status is Status.FAIL
    assert text.finding == (
        "tensorflow-text 2.20.1 requires tensorflow<2.21,>=2.20.0, and tensorflow 2.21.0 is "
        "installed"
    )


def test_companions_that_fit_pass_and_absent_ones_add_no_row(fake_tf: tuple[Path, MakeCtx]) -> None:
    site, make = fake_tf
    assert "keras-hub.match" not in rows(run_doctor(make()).checks)
    write_dist(site, "keras-hub", "0.32.0", ["keras>=3.15"])
    row = rows(run_doctor(make()).checks)["keras-hub.match"]
    assert row.status is Status.OK and row.finding == "keras-hub 0.32.0"


def test_a_numpy_below_what_ml_dtypes_needs_is_named_with_its_fix(
    fake_tf: tuple[Path, MakeCtx],
) -> None:
    """TensorFlow 2.21 accepts numpy 1.26 but its ml-dtypes needs numpy 2: `import
    tensorflow` then ends in a SystemError that names neither. The doctor names the
    package and the version to install, not a reinstall of TensorFlow and its CUDA."""
    site, make = fake_tf
    shutil.rmtree(site / "tensorflow-2.21.0.dist-info")
    write_dist(site, "tensorflow", "2.21.0", ["keras>=3.12.0", "numpy>=1.26.0", "ml_dtypes>=0.5.1"])
    write_dist(site, "ml-dtypes", "0.5.4", ["numpy>=2.0.0"])
    write_dist(site, "numpy", "1.26.4")
    failed_import = TfRuntime(
        ran=True,
        error="SystemError: <built-in function __import__> returned a result with an "
        "exception set; raised from ImportError: numpy.core.multiarray failed to import",
    )
    by = rows(run_doctor(make(runtime=failed_import)).checks)
    req = by["tf.requirements"]
    assert req.status is Status.FAIL
    assert "numpy 1.26.4 does not meet ml-dtypes's numpy>=2.0.0" in req.finding
    assert req.fix == "pip install 'numpy>=2.0.0'"
    gpu = by["tf.gpus"]
    assert "raised from ImportError: numpy.core.multiarray" in gpu.finding
    assert gpu.fix == "pip install 'numpy>=2.0.0'"  # not --force-reinstall tensorflow
    order = [
        c.id for c in run_doctor(make(runtime=failed_import)).checks if c.status is Status.FAIL
    ]
    assert order[0] == "tf.requirements"  # the cause before its consequences


def test_requirements_met_is_one_green_row(fake_tf: tuple[Path, MakeCtx]) -> None:
    _, make = fake_tf
    row = rows(run_doctor(make()).checks)["tf.requirements"]
    assert row.status is Status.OK and "is met" in row.finding


def test_an_ld_library_path_entry_the_loader_cannot_read_is_a_warning(
    fake_tf: tuple[Path, MakeCtx], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ld.so skips a directory it cannot search without a word, so the CUDA libraries
    a user put there never load: the row said "ok". (Tests run as root, whom
    permissions do not stop: the directory's refusal is simulated.)"""
    import os

    closed = tmp_path / "cuda-libs"
    closed.mkdir()
    real_listdir = os.listdir

    def listdir(path: object = ".") -> list[str]:
        if str(path) == str(closed):
            raise PermissionError(13, "Permission denied", str(path))
        return real_listdir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", listdir)
    _, make = fake_tf
    env = {"LD_LIBRARY_PATH": f"{closed}:{tmp_path / 'gone'}", "PATH": "/x"}
    row = rows(run_doctor(make(env=env)).checks)["env.ld_library_path"]
    assert row.status is Status.WARN
    assert f"cannot read {closed} (Permission denied)" in row.finding
    assert f"do not exist: {tmp_path / 'gone'}" in row.finding
    assert row.fix is not None and "chmod a+rx" in row.fix


def test_a_cuda_library_with_a_version_requirement_is_one_row_of_data(
    fake_tf: tuple[Path, MakeCtx], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tested-build rule reads its libraries from cuda_libraries.json (`tested_as`)
    and their versions from tf_cuda_compat.json: NCCL given a row and a column is
    compared as cuDNN is, with no code of its own."""
    from tfaccel import data

    load = data.load

    def with_nccl(name: str) -> dict[str, object]:
        doc: dict[str, Any] = load(name)
        if name == "cuda_libraries":
            doc["libraries"]["nccl"]["tested_as"] = {"column": "nccl", "label": "NCCL"}
        if name == "tf_cuda_compat":
            for row in doc["rows"]:
                row["nccl"] = "2.28"  # the fake site's wheel is 2.27.7
        return doc

    _, make = fake_tf
    monkeypatch.setattr(data, "load", with_nccl)
    by = rows(run_doctor(make()).checks)
    assert by["tf.compat"].status is Status.WARN
    assert "NCCL 2.27.7 is older than the 2.28" in by["tf.compat"].finding
