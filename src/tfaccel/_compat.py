"""What the TensorFlow in use supports of what tfaccel sets, in one table, decided
before anything is set: XLA aborts the whole process ("Unknown flags in XLA_FLAGS") at
its first compilation on a flag it does not know, with no message of tfaccel's.

The floors are the first TensorFlow release whose XLA accepted the flag, from a matrix run
that installed each TensorFlow from 2.16 to 2.21 and compiled with the flag set.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from tfaccel._tf import installed_version

# flag name -> the first TensorFlow that knows it (flags not listed: every supported one)
XLA_FLAG_SINCE: dict[str, str] = {
    "--xla_gpu_per_fusion_autotune_cache_dir": "2.18",
    "--xla_gpu_cudnn_gemm_fusion_level": "2.18",
    "--xla_gpu_experimental_enable_fusion_block_level_rewriter": "2.19",
    # its list of command types (DYNAMIC_SLICE_COPY_FUSION, ...) aborts 2.18 and 2.19
    "--xla_gpu_enable_command_buffer": "2.20",
    "--xla_gpu_experimental_all_fusions_with_triton": "2.21",
}


def xla_flag_floor(flag: str, tf_version: str | None = None) -> str | None:
    """The TensorFlow version `flag` needs when the one in use (or `tf_version`) is
    older; None when it is supported, or when the version cannot be told."""
    since = XLA_FLAG_SINCE.get(flag.split("=", 1)[0])
    version = tf_version or installed_version()
    if since is None or version is None:
        return None
    try:
        older = Version(version).release[:2] < Version(since).release[:2]
    except InvalidVersion:
        return None
    return since if older else None


def unsupported_xla_flags(
    flags: Iterable[str], tf_version: str | None = None
) -> list[tuple[str, str]]:
    """(flag, the version it needs) for each flag the TensorFlow in use lacks."""
    out = []
    for flag in flags:
        floor = xla_flag_floor(flag, tf_version)
        if floor is not None:
            out.append((flag.split("=", 1)[0], floor))
    return out
