"""tfaccel: make TensorFlow fast and trouble-free on NVIDIA GPUs.

Importing tfaccel never imports TensorFlow or the NVIDIA driver: each sits behind one
module (`tfaccel._tf` and `tfaccel.hardware.nvml`) and is loaded on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
