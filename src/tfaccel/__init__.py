"""tfaccel: make TensorFlow fast and trouble-free on NVIDIA GPUs.

Importing tfaccel never imports TensorFlow or the NVIDIA driver: each sits behind one
module (`tfaccel._tf` and `tfaccel.hardware.nvml`) and is loaded on first use.
"""

from __future__ import annotations

from tfaccel._version import __version__

__all__ = ["__version__", "configure"]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # `tfaccel.configure` is loaded on first use, so `import tfaccel` stays light.
    if name == "configure":
        from tfaccel.optimize.apply import configure

        return configure
    raise AttributeError(f"module 'tfaccel' has no attribute {name!r}")
