"""What the TensorFlow and Keras in use support of what tfaccel sets or patches, in one
place, decided before anything is set or patched. XLA flags: XLA aborts the whole
process ("Unknown flags in XLA_FLAGS") at its first compilation on a flag it does not
know, with no message of tfaccel's.

The floors are the first TensorFlow release whose XLA accepted the flag, from a matrix run
that installed each TensorFlow from 2.16 to 2.21 and compiled with the flag set.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib import metadata

from packaging.version import InvalidVersion, Version

from tfaccel._tf import installed_version
from tfaccel.errors import InputError

# The TensorFlow releases tfaccel supports (pyproject's floor) and was tested up to, and
# the oldest Keras it supports (pyproject's floor: before 3.6 a Sequential model's
# `input` raises, which tune and plan read).
TF_SUPPORTED = ("2.16", "2.21")
KERAS_FLOOR = "3.6"

# flag name (or flag=value) -> the first TensorFlow that knows it, and what an older one
# does with it (flags not listed: every supported one knows them)
_ABORTS = "older XLA aborts on it"
XLA_FLAG_SINCE: dict[str, tuple[str, str]] = {
    "--xla_gpu_per_fusion_autotune_cache_dir": ("2.18", _ABORTS),
    "--xla_gpu_cudnn_gemm_fusion_level": ("2.18", _ABORTS),
    "--xla_gpu_experimental_enable_fusion_block_level_rewriter": ("2.19", _ABORTS),
    # its list of command types (DYNAMIC_SLICE_COPY_FUSION, ...) aborts 2.18 and 2.19
    "--xla_gpu_enable_command_buffer": ("2.20", _ABORTS),
    # one type taken from the default list: known to every supported XLA (2.16.2 and
    # 2.21.0 parse it; an unknown type aborts)
    "--xla_gpu_enable_command_buffer=-CUBLASLT": (TF_SUPPORTED[0], _ABORTS),
    "--xla_gpu_experimental_all_fusions_with_triton": ("2.21", _ABORTS),
    # Measured on an H200: TF 2.16's XLA strength-reduces a GEMV inside its algebraic
    # simplifier, and its optimized HLO keeps the reduce with the pass disabled. Verified
    # on 2.21; the pass's own source dates from 2025, so 2.19 is left out unverified.
    "--xla_disable_hlo_passes=dot-strength-reduction": (
        "2.20",
        "older XLA has no such pass: the option changes nothing",
    ),
}


def xla_flag_floor(flag: str, tf_version: str | None = None) -> str | None:
    """The TensorFlow version `flag` needs when the one in use (or `tf_version`) is
    older; None when it is supported, or when the version cannot be told."""
    known = XLA_FLAG_SINCE.get(flag, XLA_FLAG_SINCE.get(flag.split("=", 1)[0]))
    since = known[0] if known else None
    version = tf_version or installed_version()
    if since is None or version is None:
        return None
    try:
        older = Version(version).release[:2] < Version(since).release[:2]
    except InvalidVersion:
        return None
    return since if older else None


def xla_flags_floor(flags: Iterable[str], tf_version: str | None = None) -> str | None:
    """The newest TensorFlow that one of `flags` (an XLA option's) needs
    (`xla_flag_floor`), or None."""
    floors = [floor for flag in flags if (floor := xla_flag_floor(flag, tf_version))]
    return max(floors, key=lambda floor: Version(floor).release) if floors else None


# (knob, value) -> (the first Keras whose internals tfaccel's implementation of it
# uses, what it uses). From the same matrix run: Keras 3.0.5 to 3.15.1 on TF 2.16.
KERAS_FEATURE_SINCE: dict[tuple[str, object], tuple[str, str]] = {
    ("attention", "cudnn"): ("3.15.0", "Keras' attention fallback called with 8 arguments"),
    ("float8", True): ("3.13.0", "quantize(..., filters=...)"),
    ("gradient_checkpointing", True): ("3.9.0", "keras.remat"),
}
# The Keras whose internals every knob that patches Keras was verified on (an older one
# may lack them: the knob then refuses, naming what is missing).
KERAS_VERIFIED = "3.15.1"


def keras_version() -> str | None:
    """Keras' version: the imported one, else the installed one (without importing it)."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(getattr(keras, "__version__", None), str):
        return str(keras.__version__)
    try:
        return metadata.version("keras")
    except metadata.PackageNotFoundError:
        return None


# tune's trials of steps_per_execution time windows by the batch numbers Keras gives
# its callbacks, counted per step from 3.11 (per execution before).
KERAS_TUNE_SPE = ("3.11.0", "batch numbers per step in callbacks")
# steps_per_execution above 1 trains what it would at 1 from Keras 3.7 (3.7, 3.8, 3.10,
# 3.11 and 3.15 checked); on 3.6 longer executions trained other batches and dropped
# the validation (the measurements page; experiments/2026-12-05-keras-spe).
KERAS_SPE = ("3.7.0", "Keras 3.6 trains other batches and drops the validation")


def keras_floor(knob: str, value: object, version: str | None = None) -> str | None:
    """Why `knob=value` cannot run on the Keras in use ("needs Keras >= X (what); this is
    Y"), or None when it can (or the version cannot be told)."""
    gate = KERAS_FEATURE_SINCE.get((knob, value))
    return None if gate is None else keras_needs(f"{knob}={value!r}", *gate, version)


def keras_needs(what: str, since: str, why: str, version: str | None = None) -> str | None:
    """Why `what` cannot run ("... needs Keras >= since (why); this is X") when the Keras
    in use (or `version`) is older; None when it is not, or cannot be told."""
    have = version or keras_version()
    if have is None:
        return None
    try:
        if Version(have) >= Version(since):
            return None
    except InvalidVersion:
        return None
    return f"{what} needs Keras >= {since} ({why}); this is {have}"


def check_keras_features(settings: object) -> None:
    """An InputError for the first setting this Keras cannot run, before anything is
    patched."""
    for (knob, value), (since, _) in KERAS_FEATURE_SINCE.items():
        why = keras_floor(knob, value) if getattr(settings, knob, None) == value else None
        if why is not None:
            raise InputError(
                why,
                expected=f"Keras {since} or newer",
                received=f"{knob}={value!r}",
                hint=f"pip install 'keras>={since}', or leave {knob} at its default",
            )


def features_lost(tf_version: str | None, keras: str | None) -> list[str]:
    """What of tfaccel this TensorFlow / Keras pair cannot run, one line each."""
    lost = [
        f"XLA flag {flag} (needs TensorFlow {since})"
        for flag, (since, _) in XLA_FLAG_SINCE.items()
        if tf_version and xla_flag_floor(flag, tf_version)
    ]
    lost += [
        f"{knob}={value!r} (needs Keras {since})"
        for (knob, value), (since, _) in KERAS_FEATURE_SINCE.items()
        if keras and keras_floor(knob, value, keras)
    ]
    return lost
