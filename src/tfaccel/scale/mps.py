"""NVIDIA MPS: is the control daemon running, and the exact commands to start/stop it.

`start` and `stop` change how every process shares the GPU: they print the commands by
default and run them only with `execute=True` (the CLI's --yes), as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from tfaccel.errors import DependencyMissingError, GpuError, InputError

DEFAULT_PIPE = "/tmp/nvidia-mps"
DEFAULT_LOG = "/tmp/nvidia-log"
CONTROL = "nvidia-cuda-mps-control"


@dataclass(frozen=True)
class MpsStatus:
    running: bool
    pipe_dir: str
    log_dir: str
    processes: tuple[str, ...]
    control_binary: str | None
    compute_modes: tuple[str, ...]  # per GPU, from NVML
    advice: tuple[str, ...]


def _dirs(env: Mapping[str, str]) -> tuple[str, str]:
    return (
        env.get("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_PIPE),
        env.get("CUDA_MPS_LOG_DIRECTORY", DEFAULT_LOG),
    )


def status(
    env: Mapping[str, str] | None = None, proc_root: str = "/proc", nvml_lib: object = None
) -> MpsStatus:
    """Read-only: pipe directory, daemon processes, compute mode."""
    from tfaccel.hardware.capabilities import mps_state

    env = dict(os.environ if env is None else env)
    pipe, log = _dirs(env)
    pipes, procs = mps_state({**env, "CUDA_MPS_PIPE_DIRECTORY": pipe}, proc_root)
    modes: list[str] = []
    try:
        from tfaccel.hardware.nvml import Nvml

        names = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
        with Nvml(nvml_lib) as nvml:
            for i in range(int(nvml.get("nvmlDeviceGetCount", default=0) or 0)):
                handle = nvml.get("nvmlDeviceGetHandleByIndex", i)
                mode = nvml.get("nvmlDeviceGetComputeMode", handle)
                modes.append(names.get(mode, "n/a") if mode is not None else "n/a")
    except Exception:
        pass
    running = bool(pipes or procs)
    advice = []
    if running:
        advice.append(
            "give each TensorFlow process a memory budget: tfaccel.configure("
            "memory='growth') or memory='limit', memory_limit_mib=..."
        )
        if any(gpu_mode == "default" for gpu_mode in modes):
            advice.append(
                "set the GPUs to EXCLUSIVE_PROCESS so only the MPS server holds "
                "them: nvidia-smi -c EXCLUSIVE_PROCESS (root)"
            )
    return MpsStatus(
        running,
        pipe,
        log,
        tuple(procs),
        shutil.which(CONTROL, path=env.get("PATH")),
        tuple(modes),
        tuple(advice),
    )


def start_commands(env: Mapping[str, str] | None = None) -> list[str]:
    pipe, log = _dirs(dict(os.environ if env is None else env))
    return [
        f"export CUDA_MPS_PIPE_DIRECTORY={pipe} CUDA_MPS_LOG_DIRECTORY={log}",
        f"mkdir -p {pipe} {log}",
        f"{CONTROL} -d",
    ]


def stop_commands(env: Mapping[str, str] | None = None) -> list[str]:
    pipe, _ = _dirs(dict(os.environ if env is None else env))
    return [f"echo quit | CUDA_MPS_PIPE_DIRECTORY={pipe} {CONTROL}"]


def _run_control(args: list[str], stdin: str | None, env: Mapping[str, str]) -> str:
    exe = shutil.which(CONTROL, path=env.get("PATH"))
    if exe is None:
        raise DependencyMissingError(
            f"{CONTROL} is not on PATH",
            expected="the NVIDIA driver's MPS control binary",
            received=env.get("PATH", ""),
        )
    proc = subprocess.run(
        [exe, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=30,
        check=False,
    )
    if proc.returncode != 0:
        raise GpuError(
            f"{CONTROL} failed",
            expected="exit code 0",
            received=f"{proc.returncode}: {proc.stderr.strip()[:300]}",
        )
    return proc.stdout


def start(execute: bool = False, env: Mapping[str, str] | None = None) -> list[str]:
    """The commands that start MPS; runs them only with execute=True."""
    env = dict(os.environ if env is None else env)
    cmds = start_commands(env)
    if not execute:
        return cmds
    if status(env).running:
        raise InputError(
            "MPS is already running", expected="tfaccel mps stop first", received=_dirs(env)[0]
        )
    pipe, log = _dirs(env)
    os.makedirs(pipe, exist_ok=True)
    os.makedirs(log, exist_ok=True)
    _run_control(
        ["-d"], None, {**env, "CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": log}
    )
    return cmds


def stop(execute: bool = False, env: Mapping[str, str] | None = None) -> list[str]:
    env = dict(os.environ if env is None else env)
    cmds = stop_commands(env)
    if execute:
        pipe, _ = _dirs(env)
        _run_control([], "quit\n", {**env, "CUDA_MPS_PIPE_DIRECTORY": pipe})
    return cmds
