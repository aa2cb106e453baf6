"""What a GPU can do, by compute capability, and which GPUs a process may use.

One table (`FEATURES`) says from which compute capability each feature tfaccel relies
on exists; tune, configure, plan and scale ask it through `supports` instead of
comparing numbers of their own. Also here: the GPUs CUDA_VISIBLE_DEVICES leaves a
process, and whether an MPS daemon runs. Nothing here imports NVML or TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Literal

Feature = Literal[
    "tensor_cores", "bf16", "tf32", "mig", "flash_attention", "fp8", "cudnn_layer_norm"
]

# feature: (the first compute capability that has it, what it is)
FEATURES: dict[Feature, tuple[float, str]] = {
    "tensor_cores": (7.0, "fp16 tensor cores (Volta)"),
    "bf16": (8.0, "bf16 tensor cores, float32's range without loss scaling (Ampere)"),
    "tf32": (8.0, "TF32 tensor cores for float32 matrix products (Ampere)"),
    "mig": (8.0, "Multi-Instance GPU partitions (A100, H100 and later data-center GPUs)"),
    "flash_attention": (8.0, "cuDNN's flash attention (Ampere)"),
    "fp8": (8.9, "FP8 tensor cores (Ada, Hopper)"),
    "cudnn_layer_norm": (9.0, "cuDNN's fused layer norms with their backward pass (Hopper)"),
}


def capability_at_least(compute_capability: str | None, minimum: float) -> bool:
    """Is this compute capability ("9.0") known and at least `minimum`? False for None
    and for a string that is not a number; "10.0" is above "8.0" (numbers, not text)."""
    try:
        return compute_capability is not None and float(compute_capability) >= minimum
    except ValueError:
        return False


def supports(compute_capability: str | None, feature: Feature) -> bool:
    """Does a GPU of this compute capability have `feature` (FEATURES)?"""
    return capability_at_least(compute_capability, FEATURES[feature][0])


def precisions(compute_capability: str | None) -> list[str]:
    """Every precision a GPU of this capability runs well (None: no GPU, float32
    only: 16-bit on the CPU is slower, and there are no tensor cores)."""
    if supports(compute_capability, "bf16"):
        return ["float32", "tf32", "mixed_bfloat16", "mixed_float16"]
    if supports(compute_capability, "tensor_cores"):
        return ["float32", "mixed_float16"]
    return ["float32"]


def auto_precision(compute_capability: str | None) -> tuple[str, str]:
    """(precision, why) that `precision="auto"` picks for this compute capability."""
    capability = compute_capability
    if capability is None:
        return "float32", "no GPU: 16-bit on the CPU is slower, not faster"
    if supports(capability, "bf16"):
        why = (
            f"compute capability {capability} >= 8.0 has bf16 tensor cores (no loss scaling needed)"
        )
        return "mixed_bfloat16", why
    if supports(capability, "tensor_cores"):
        return "mixed_float16", f"compute capability {capability}: fp16 tensor cores, no bf16"
    return "float32", f"compute capability {capability} has no tensor cores"


def _cuda_visible(value: str | None) -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES") if value is None else value


def visible_indices(
    uuids: Sequence[str | None], cuda_visible_devices: str | None = None
) -> list[int]:
    """NVML indices of the GPUs a CUDA process sees, in CUDA's order.

    `uuids` are NVML's, by NVML index. `cuda_visible_devices` defaults to the
    environment's CUDA_VISIBLE_DEVICES; entries are indices or (prefixes of) UUIDs, and
    CUDA stops at the first entry that names no GPU. NVML numbers GPUs by PCI bus, as
    CUDA does for GPUs of one model (or with CUDA_DEVICE_ORDER=PCI_BUS_ID).
    """
    value = _cuda_visible(cuda_visible_devices)
    if value is None:
        return list(range(len(uuids)))
    out: list[int] = []
    for token in (part.strip() for part in value.split(",")):
        if token.lstrip("-").isdigit():
            i = int(token)
            if not 0 <= i < len(uuids) or i in out:
                break
            out.append(i)
            continue
        match = [i for i, uuid in enumerate(uuids) if uuid and token and uuid.startswith(token)]
        if len(match) != 1 or match[0] in out:
            break
        out.append(match[0])
    return out


def visible_devices(count: int, cuda_visible_devices: str | None = None) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entries of the `count` GPUs this process may use: the
    user's own (indices or UUIDs, in their order), or 0..count-1 when it is not set. A
    run on n GPUs takes the first n, so it never reaches a GPU the user left out (a
    shared server's other GPUs)."""
    value = _cuda_visible(cuda_visible_devices)
    if value is None:
        return [str(i) for i in range(count)]
    return [part.strip() for part in value.split(",") if part.strip()][:count]


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def mps_state(env: Mapping[str, str], proc_root: str = "/proc") -> tuple[list[str], list[str]]:
    """(MPS pipe directories with a control socket, MPS daemon processes running)."""
    pipes: list[str] = []
    for directory in (env.get("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps", "/var/run/nvidia-mps"):
        if (
            directory
            and os.path.exists(os.path.join(directory, "control"))
            and directory not in pipes
        ):
            pipes.append(directory)
    procs: list[str] = []
    try:
        for pid in os.listdir(proc_root):
            if pid.isdigit():
                comm = _read(os.path.join(proc_root, pid, "comm")).strip()
                if comm.startswith("nvidia-cuda-mps"):
                    procs.append(f"{comm} (pid {pid})")
    except OSError:
        pass
    return pipes, procs
