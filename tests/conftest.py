"""Shared fixtures and the gpu / multi_gpu / slow markers.

GPU tests are skipped, with the reason, where NVML reports no GPU.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

# GPU tests run TensorFlow in the pytest process and in child processes (trials, NCCL).
# Without growth the first in-process test takes nearly all memory of every GPU and the
# children's NCCL set-up fails ("unhandled cuda error").
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (run on the GPU machine)")
    config.addinivalue_line("markers", "multi_gpu: needs two or more NVIDIA GPUs")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@functools.lru_cache(maxsize=1)
def visible_gpus() -> int:
    from tfaccel.hardware.nvml import driver_info

    return len(driver_info().gpus)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpus = None
    for item in items:
        wants_multi = "multi_gpu" in item.keywords
        if "gpu" not in item.keywords and not wants_multi:
            continue
        if gpus is None:
            gpus = visible_gpus()
        if gpus == 0:
            item.add_marker(pytest.mark.skip(reason="no NVIDIA GPU visible through NVML"))
        elif wants_multi and gpus < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2+ GPUs, {gpus} visible"))


@pytest.fixture
def script_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of a user's script under test: a fresh folder, entered,
    without the caller's KERAS_BACKEND (a script's Keras here is TensorFlow's)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    return tmp_path
