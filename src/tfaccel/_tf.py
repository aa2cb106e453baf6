"""The one door to TensorFlow.

No other tfaccel module imports `tensorflow` (a test checks it). Commands that only inspect
the installation (doctor, hw) use `tf_spec()` and read files; commands that run
TensorFlow call `import_tensorflow()`, which fails with a pip hint instead of a
traceback when TensorFlow is missing.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from tfaccel.errors import DependencyMissingError

INSTALL_HINT = "pip install 'tfaccel[and-cuda]'  (pulls tensorflow[and-cuda] with its CUDA wheels)"


def tf_package_dir() -> Path | None:
    """The directory of the installed `tensorflow` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def import_tensorflow() -> ModuleType:
    """Import TensorFlow, or raise DependencyMissingError with the install command."""
    try:
        return importlib.import_module("tensorflow")
    except ImportError as exc:
        raise DependencyMissingError(
            "TensorFlow is not importable",
            expected="an installed tensorflow package",
            received=f"{type(exc).__name__}: {exc}",
            hint=INSTALL_HINT,
        ) from exc


def tf_internal(module: str) -> ModuleType:
    """A TensorFlow module outside its public API, `tensorflow.<module>`: every use of
    TensorFlow's internals goes through here, so they are found in one place."""
    return importlib.import_module(f"tensorflow.{module}")
