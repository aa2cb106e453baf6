"""The one door to TensorFlow.

No other tfaccel module imports `tensorflow` (a test checks it). Commands that only inspect
the installation (doctor, hw) use `tf_spec()` and read files; commands that run
TensorFlow call `import_tensorflow()`, which fails with a pip hint instead of a
traceback when TensorFlow is missing.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

from tfaccel._native import quiet_native
from tfaccel.errors import DependencyMissingError

INSTALL_HINT = "pip install 'tfaccel[and-cuda]'  (pulls tensorflow[and-cuda] with its CUDA wheels)"


# Every distribution that installs the `tensorflow` import package.
TF_DISTRIBUTIONS: tuple[str, ...] = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "tensorflow-rocm",
    "intel-tensorflow",
    "tf-nightly",
    "tf-nightly-cpu",
    "tf-nightly-gpu",
    "tf-nightly-intel",
)


def installed_version() -> str | None:
    """TensorFlow's version: the running one if it is imported, else the installed
    distribution's, read without importing it (so it can decide what to set first)."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(getattr(tf, "__version__", None), str):
        return str(tf.__version__)
    for name in TF_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def tf_package_dir() -> Path | None:
    """The directory of the installed `tensorflow` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


# The command line turns this on (not under -v): TensorFlow's import then keeps absl's
# INFO/WARNING lines off the terminal (tfaccel._native). The Python API leaves the
# user's stderr alone.
QUIET_IMPORT = {"on": False}


def import_tensorflow() -> ModuleType:
    """Import TensorFlow, or raise DependencyMissingError with the install command."""
    quiet = QUIET_IMPORT["on"] and "tensorflow" not in sys.modules
    try:
        with quiet_native() if quiet else contextlib.nullcontext():
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


# tf.data.Dataset's own module, watched for its import (`script.file_caches`) rather than
# imported: a hook must not import TensorFlow before the script does.
DATASET_OPS = "tensorflow.python.data.ops.dataset_ops"
