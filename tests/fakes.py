"""Test doubles at tfaccel's boundaries: a fake `pynvml` module and tiny real ELF libraries."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    cc: tuple[int, int] = (9, 0)
    memory_total: int = 143771 * 2**20
    memory_used: int = 0
    broken: bool = False
    unsupported: Sequence[str] = ()
    extra: dict[str, Any] | None = None


class FakeNvml:
    """Implements the pynvml functions tfaccel calls; every value can be set per test."""

    NVMLError = FakeNVMLError

    def __init__(
        self,
        gpus: Sequence[FakeGpu] = (FakeGpu(),),
        driver: str = "580.159.03",
        cuda: int = 13000,
        init_error: str | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.calls: list[str] = []
        self.shutdowns = 0

    def _gpu(self, handle: int, fn: str) -> FakeGpu:
        gpu = self.gpus[handle]
        if fn in gpu.unsupported:
            raise FakeNVMLError("Not Supported")
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if self.gpus[i].broken:
            raise FakeNVMLError("GPU is lost")
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self._gpu(h, "nvmlDeviceGetName").name.encode()

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._gpu(h, "nvmlDeviceGetCudaComputeCapability").cc

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        g = self._gpu(h, "nvmlDeviceGetMemoryInfo")

        class Mem:
            total = g.memory_total
            used = g.memory_used
            free = g.memory_total - g.memory_used

        return Mem()

    def __getattr__(self, name: str) -> Any:
        # Functions a test configured through FakeGpu.extra: {"nvmlDeviceGetX": value}.
        if name.startswith("nvmlDevice"):

            def call(h: int, *args: Any) -> Any:
                gpu = self._gpu(h, name)
                if gpu.extra and name in gpu.extra:
                    value = gpu.extra[name]
                    return value(*args) if callable(value) else value
                raise FakeNVMLError("Not Supported")

            return call
        raise AttributeError(name)


CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")


def needs_keras_for(knob: str, value: object) -> pytest.MarkDecorator:
    """Skip where the installed Keras is older than the knob's floor (tfaccel._compat):
    there configure refuses the knob, which tests/optimize/test_compat.py checks."""
    from tfaccel import _compat

    why = _compat.keras_floor(knob, value)
    return pytest.mark.skipif(why is not None, reason=why or "")


def build_lib(
    out: Path,
    soname: str,
    *,
    needs: Sequence[Path] = (),
    runpath: Sequence[str] = (),
    rpath: Sequence[str] = (),
    symbol: str = "tfaccel_test_fn",
    real_name: str | None = None,
) -> Path:
    """Compile a tiny shared library with the machine's C compiler.

    Args:
        out: the directory to write into.
        soname: DT_SONAME, and the file name unless `real_name` is given (then `soname`
            is created as a symlink to it, as packages ship libraries).
        needs: libraries to link against (become DT_NEEDED by their soname).
        runpath / rpath: DT_RUNPATH / DT_RPATH entries ($ORIGIN allowed).
    """
    assert CC is not None
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"{symbol}.c"
    src.write_text(f"int {symbol}(void) {{ return 42; }}\n")
    target = out / (real_name or soname)
    cmd = [CC, "-shared", "-fPIC", "-o", str(target), str(src), f"-Wl,-soname,{soname}"]
    if needs:
        cmd += ["-Wl,--no-as-needed", *[str(lib) for lib in needs]]
    if runpath:
        cmd += ["-Wl,--enable-new-dtags", "-Wl,-rpath," + ":".join(runpath)]
    elif rpath:
        cmd += ["-Wl,--disable-new-dtags", "-Wl,-rpath," + ":".join(rpath)]
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()
    if real_name:
        link = out / soname
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(real_name, link)
        return link
    return target


def write_dist(
    site: Path, name: str, version: str, requires: Sequence[str] = (), installer: str = "pip"
) -> None:
    """Create an installed-distribution record (dist-info) for importlib.metadata."""
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (d / "METADATA").write_text("\n".join(lines) + "\n")
    (d / "INSTALLER").write_text(installer + "\n")
    (d / "RECORD").write_text("")


# A user's module of entry points that fail each its own way (trial and tune tests).
BROKEN = """
import keras
def _loss(y, p):
    raise RuntimeError("the loss broke at run time")

def crashes_in_fit():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    return {"model": m, "loss": _loss}

def unknown_loss():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    return {"model": m, "loss": "no_such_loss"}

def raises():
    import json
    json.loads("{")
"""


def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    """Write the user's module `name` into tmp_path, the working directory and path."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
