"""The doctor against the TensorFlow really installed here (CPU machines and the GPU one)."""

from __future__ import annotations

import pytest

from tests.conftest import visible_gpus
from tfaccel._tf import tf_package_dir
from tfaccel.doctor import DoctorContext, Status, run_doctor
from tfaccel.doctor.checks import no_gpu_here
from tfaccel.doctor.probes import tf_runtime_probe

pytestmark = pytest.mark.skipif(tf_package_dir() is None, reason="TensorFlow is not installed")


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return run_doctor(DoctorContext())


def test_install_and_build_match_what_tensorflow_reports(report) -> None:  # type: ignore[no-untyped-def]
    by = {c.id: c for c in report.checks}
    probe = tf_runtime_probe()
    assert probe.error is None, probe.error
    assert by["tf.install"].status is Status.OK
    assert probe.version is not None and by["tf.install"].finding.split()[1] == probe.version
    assert by["tf.keras"].status is Status.OK
    assert by["tf.build"].status is Status.OK
    build = by["tf.build"].details["build_info"]
    assert probe.built_with_cuda == bool(build.get("is_cuda_build"))


def test_gpu_verdict_is_explained(report) -> None:  # type: ignore[no-untyped-def]
    gpu = next(c for c in report.checks if c.id == "tf.gpus")
    if visible_gpus():
        assert gpu.status is Status.OK, gpu.finding
    elif no_gpu_here(DoctorContext()):
        # No NVIDIA GPU on this machine at all: said as such, and no row offers a
        # driver, a container flag or 3 GB of CUDA wheels as a fix
        assert gpu.status is Status.SKIP and "no NVIDIA GPU" in gpu.finding
        assert report.verdict.startswith("This machine has no NVIDIA GPU")
        gpu_fixes = ("driver", "--gpus", "and-cuda", "nvidia")
        fixes = [c.fix for c in report.checks if c.fix]
        assert not [f for f in fixes if any(w in f for w in gpu_fixes)], fixes
    else:
        # A GPU on the bus that TensorFlow cannot use: the doctor must say why.
        assert gpu.status is Status.FAIL
        assert "Cause:" in gpu.finding, gpu.finding
        assert gpu.fix


@pytest.mark.gpu
def test_gpu_machine_doctor_finds_the_gpu_and_its_libraries(report) -> None:  # type: ignore[no-untyped-def]
    by = {c.id: c for c in report.checks}
    assert by["tf.gpus"].status is Status.OK, by["tf.gpus"].finding
    assert by["driver"].status in (Status.OK, Status.WARN)
    assert by["lib.loaded"].status is Status.OK
    assert not any(c.id.startswith("lib.") and c.status is Status.FAIL for c in report.checks)
    caps = [c for c in report.checks if c.id.startswith("gpu.compute_capability.")]
    assert caps and all(c.details["compute_capability"] for c in caps)
    assert report.verdict.startswith("TensorFlow can use the GPU")


def test_xla_names_the_flag_it_does_not_know() -> None:
    """XLA aborts at its first compilation on an unknown flag; the probe says which."""
    import os

    from tfaccel.doctor.probes import xla_flags_probe

    env = {**os.environ, "XLA_FLAGS": "--xla_gpu_autotune_level=2"}
    assert xla_flags_probe(env).ok
    old = "--xla_gpu_enable_cuda_graphs=true"  # an older XLA's flag
    bad = xla_flags_probe({**env, "XLA_FLAGS": f"--xla_gpu_autotune_level=2 {old}"})
    assert bad.ran and not bad.ok
    assert (bad.variable, bad.unknown) == ("XLA_FLAGS", (old,))
    assert not xla_flags_probe({k: v for k, v in env.items() if k != "XLA_FLAGS"}).ran
