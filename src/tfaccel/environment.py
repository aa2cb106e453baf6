"""The environment a measurement ran in, recorded with every result file."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def environment() -> dict[str, Any]:
    """GPU, driver, Python and package versions (never raises; missing parts are None)."""
    versions: dict[str, str | None] = {}
    for dist in ("tfaccel", "tensorflow", "keras", "keras-hub", "nvidia-ml-py"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    gpus: list[dict[str, Any]] = []
    driver = cuda = None
    try:
        from tfaccel.hardware.nvml import driver_info

        info = driver_info()
        driver, cuda = info.driver_version, info.cuda_version
        gpus = [
            {
                "name": gpu.name,
                "compute_capability": gpu.compute_capability,
                "memory_total_mib": gpu.memory_total_mib,
            }
            for gpu in info.gpus
        ]
    except Exception:
        pass
    return {
        "gpus": gpus,
        "driver": driver,
        "driver_cuda": cuda,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        # XLA's options in effect (tfaccel's xla_options write them here)
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
        **versions,
    }


def machine_id() -> str:
    """This machine as it is now: host name, boot and the GPUs a child process sees.

    Two measurements compare only where this is the same: the same GPU model on another
    host, or on the same host after a reboot, can run a model 4-5 % apart. A tune
    journal records it with each trial.
    """
    boot = ""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
    except OSError:
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible if visible is not None else "all"
    return f"{platform.node()}/{boot or 'unknown-boot'}/gpus={gpus}"


def _require_installed() -> None:
    """TensorFlow and Keras found on this Python's path (without importing them)."""
    import importlib.util

    from tfaccel._tf import INSTALL_HINT
    from tfaccel.errors import DependencyMissingError

    for name in ("tensorflow", "keras"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise DependencyMissingError(
                f"{name} is not importable by this Python ({sys.executable})",
                expected="TensorFlow and Keras 3 installed where tfaccel runs its trials",
                received=f"no module named {name!r} on its path (PYTHONPATH included)",
                hint=f"{INSTALL_HINT}; tfaccel doctor says what is installed where",
            )


def keras_backend(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The backend Keras 3 runs on, and what chose it, read as Keras reads it (without
    importing Keras): `KERAS_BACKEND`, else the "backend" of keras.json (in
    `KERAS_HOME`, else ~/.keras, or /tmp/.keras where the home folder is not writable),
    else Keras' default, "tensorflow"."""
    env = os.environ if env is None else env
    if env.get("KERAS_BACKEND"):
        return env["KERAS_BACKEND"], "KERAS_BACKEND"
    path = _keras_json(env)
    backend = None
    if path is not None:
        try:
            backend = json.loads(path.read_text()).get("backend")
        except (OSError, ValueError, AttributeError):  # Keras ignores a file it cannot read
            backend = None
    if isinstance(backend, str) and backend:
        return backend, str(path)
    return "tensorflow", "Keras' default"


def backend_fix(where: str) -> str:
    """How to put Keras back on TensorFlow, for what chose its backend (`keras_backend`'s
    second value)."""
    if where == "KERAS_BACKEND":
        return "unset KERAS_BACKEND (or export KERAS_BACKEND=tensorflow)"
    return f'set "backend": "tensorflow" in {where}'


def _keras_json(env: Mapping[str, str]) -> Path | None:
    if env.get("KERAS_HOME"):
        return Path(env["KERAS_HOME"]).expanduser() / "keras.json"
    home = env.get("HOME")
    if not home:
        return None
    base = home if os.access(home, os.W_OK) else "/tmp"
    return Path(base) / ".keras" / "keras.json"


def require_tensorflow_backend() -> None:
    """DependencyMissingError where TensorFlow or Keras is not installed for this
    Python (the one the trials run), InputError where Keras would run on another
    backend: tfaccel's settings and measurements are TensorFlow's (before any work,
    where each trial would fail at `import keras`, or train on JAX or PyTorch)."""
    from tfaccel.errors import InputError

    _require_installed()
    backend, where = keras_backend()
    if backend == "tensorflow":
        return
    env = where == "KERAS_BACKEND"
    raise InputError(
        f"{'KERAS_BACKEND=' + backend if env else where} selects Keras' {backend} backend",
        expected="the TensorFlow backend: tfaccel's settings are TensorFlow's",
        received=f"KERAS_BACKEND={backend}" if env else f'"backend": "{backend}" in {where}',
        hint=backend_fix(where),
    )
