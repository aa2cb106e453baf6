"""The GPU spec data file (`data/gpu_specs.json`): lookup by key, alias or NVML name."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from tfaccel import data
from tfaccel.errors import InputError

PRECISIONS = ("fp32", "tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's published figures (dense TFLOP/s, GB, GB/s, W)."""

    key: str
    names: tuple[str, ...]
    architecture: str
    compute_capability: str
    sm_count: int
    cuda_cores: int
    memory_gb: float
    memory_type: str
    memory_bus_bits: int
    memory_bandwidth_gbs: float
    peak_tflops: dict[str, float | None]
    tdp_w: float
    interconnect: str
    nvlink_gbs: float | None
    form_factor: str
    source: str

    def peak(self, precision: str) -> float | None:
        """Peak TFLOP/s for `fp32`, `tf32`, `fp16`, `bf16` or `fp8` (tensor where it exists)."""
        key = precision if precision in self.peak_tflops else f"{precision}_tensor"
        value = self.peak_tflops.get(key)
        if value is None and precision in ("fp16", "bf16"):
            return None
        return value


def _norm(name: str) -> str:
    text = name.lower().strip()
    text = re.sub(r"^(nvidia\s+)?(tesla\s+|geforce\s+)?", "", text)
    return re.sub(r"[\s_]+", " ", text)


@cache
def all_specs() -> tuple[GpuSpec, ...]:
    """Every entry of the spec file."""
    out = []
    for entry in data.load("gpu_specs")["gpus"]:
        fields: dict[str, Any] = dict(entry)
        fields["names"] = tuple(fields["names"])
        out.append(GpuSpec(**fields))
    return tuple(out)


def find_spec(name: str) -> GpuSpec | None:
    """The spec for a key ("H200"), alias ("a100") or NVML name ("NVIDIA H200")."""
    want = _norm(name)
    for spec in all_specs():
        if want == _norm(spec.key) or want in {_norm(alias) for alias in spec.names}:
            return spec
    return None


def get_spec(name: str) -> GpuSpec:
    """Like find_spec, but an unknown name is an InputError listing the known keys."""
    spec = find_spec(name)
    if spec is not None:
        return spec
    keys = [entry.key for entry in all_specs()]
    close = difflib.get_close_matches(name.upper(), keys, n=3, cutoff=0.4)
    raise InputError(
        f"Unknown GPU {name!r}",
        expected="one of " + ", ".join(keys),
        received=repr(name),
        hint=f"did you mean {' or '.join(close)}?" if close else "tfaccel hw --list-specs",
    )


def cores_per_sm(compute_capability: str | None) -> int | None:
    """FP32 CUDA cores per SM for an architecture ("8.6" -> 128)."""
    if not compute_capability:
        return None
    table: dict[str, int] = data.load("gpu_specs")["cores_per_sm"]
    return table.get(compute_capability)


def architecture_name(compute_capability: str | None) -> str | None:
    """ "9.0" -> "Hopper"."""
    if not compute_capability:
        return None
    table: dict[str, str] = data.load("gpu_specs")["architectures"]
    major = compute_capability.split(".")[0]
    return table.get(compute_capability) or table.get(major)
