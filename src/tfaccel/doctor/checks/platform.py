"""The platform: container and WSL traps, visible devices, TensorFlow's memory variables,
shadowing files, XLA flags, MPS, the GPUs' state and compute capability."""

from __future__ import annotations

from pathlib import Path

from tfaccel.doctor import probes
from tfaccel.doctor.checks.base import NO_GPU, TF_BUILD, no_gpu_here
from tfaccel.doctor.context import DoctorContext, version_tuple
from tfaccel.doctor.model import Check, Status
from tfaccel.hardware.capabilities import visible_indices


def check_platform(ctx: DoctorContext) -> list[Check]:
    title = "Platform"
    plat = ctx.platform
    if plat.system == "Windows":
        if ctx.tf_version and version_tuple(ctx.tf_version)[:2] > (2, 10):
            return [
                Check(
                    "platform",
                    title,
                    Status.FAIL,
                    f"native Windows: TensorFlow {ctx.tf_version} has no GPU support "
                    "there (the last was 2.10)",
                    fix="use WSL2: https://www.tensorflow.org/install/pip#windows-wsl2",
                    see='python -c "import platform; print(platform.platform())"',
                )
            ]
        return [Check("platform", title, Status.OK, f"native Windows {plat.release}")]
    if plat.system == "Darwin":
        return [
            Check(
                "platform",
                title,
                Status.WARN,
                "macOS: no CUDA; Apple GPUs are reached through tensorflow-metal",
                fix="pip install tensorflow-metal",
            )
        ]
    if plat.wsl:
        if not plat.wsl_libcuda:
            return [
                Check(
                    "platform",
                    title,
                    Status.FAIL,
                    "WSL2 without /usr/lib/wsl/lib/libcuda.so.1: the Windows NVIDIA driver "
                    "does not expose CUDA to WSL",
                    fix="update the NVIDIA driver on Windows and run `wsl --update`",
                    see="ls -l /usr/lib/wsl/lib",
                )
            ]
        return [
            Check(
                "platform",
                title,
                Status.OK,
                "WSL2: the driver lives on Windows; CUDA comes from /usr/lib/wsl/lib. "
                "Do not install a Linux NVIDIA driver inside WSL",
                see="ls -l /usr/lib/wsl/lib",
            )
        ]
    if plat.container and not plat.nvidia_device_nodes and no_gpu_here(ctx):
        return [
            Check(
                "platform",
                title,
                Status.OK,
                f"Linux {plat.release} ({plat.machine}), a {plat.container} container; {NO_GPU}, "
                "so there is none to pass into it",
                see="uname -a",
            )
        ]
    if plat.container and not plat.nvidia_device_nodes:
        return [
            Check(
                "platform",
                title,
                Status.FAIL,
                f"running in a {plat.container} container with no /dev/nvidia* device: the "
                "container was started without GPU access",
                fix="docker run --gpus all ...  (Kubernetes: request nvidia.com/gpu)",
                see="ls -l /dev/nvidia*",
            )
        ]
    where = f"{plat.container} container" if plat.container else "no container"
    return [
        Check(
            "platform",
            title,
            Status.OK,
            f"Linux {plat.release} ({plat.machine}), {where}",
            see="uname -a",
        )
    ]


SHADOWED = ("tensorflow", "keras", "keras_hub", "numpy")


def check_shadowing(ctx: DoctorContext) -> list[Check]:
    """A tensorflow.py or keras.py (or such a folder) in the current directory is what
    `import keras` finds first in a script run from here: the real package never loads."""
    found = [
        str(path)
        for name in SHADOWED
        for path in (Path(ctx.cwd) / f"{name}.py", Path(ctx.cwd) / name)
        if path.is_file() or (path / "__init__.py").is_file()
    ]
    title = "shadowing modules"
    if not found:
        return [Check("env.shadowing", title, Status.OK, "no file here hides a package", see="ls")]
    return [
        Check(
            "env.shadowing",
            title,
            Status.FAIL,
            f"{', '.join(found)} hide(s) the package of the same name from scripts run here "
            "(the current directory comes first on sys.path)",
            fix="rename " + " ".join(found) + " (and delete __pycache__ beside it)",
            see="python -c 'import keras; print(keras.__file__)'",
        )
    ]


def check_visible_devices(ctx: DoctorContext) -> list[Check]:
    title = "CUDA_VISIBLE_DEVICES"
    value = ctx.env.get("CUDA_VISIBLE_DEVICES")
    see = "echo $CUDA_VISIBLE_DEVICES"
    if value is None:
        return [
            Check(
                "env.cuda_visible_devices",
                title,
                Status.OK,
                "not set: every GPU is visible",
                see=see,
            )
        ]
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    if not entries or entries[0] in ("-1", "NoDevFiles", "none", "void"):
        return [
            Check(
                "env.cuda_visible_devices",
                title,
                Status.FAIL,
                f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA",
                fix="unset CUDA_VISIBLE_DEVICES",
                see=see,
            )
        ]
    gpus = ctx.driver.gpus
    usable = (
        len(visible_indices([gpu.uuid for gpu in gpus], value)) if gpus else _well_formed(entries)
    )
    if usable < len(entries):
        count = len(gpus)
        exist = f"; {count} GPU(s) exist (0..{count - 1})" if count else ""
        return [
            Check(
                "env.cuda_visible_devices",
                title,
                Status.FAIL if usable == 0 else Status.WARN,
                f"CUDA_VISIBLE_DEVICES={value!r}: CUDA stops at the first entry that names no "
                f"GPU, or names one twice ({entries[usable]!r}), so {usable} GPU(s) are "
                f"visible{exist}",
                fix=f"export CUDA_VISIBLE_DEVICES={','.join(entries[:usable])}"
                if usable
                else "unset CUDA_VISIBLE_DEVICES  (or list GPU indices: nvidia-smi -L)",
                see="nvidia-smi -L",
            )
        ]
    said = (
        f"{len(entries)} GPU(s) visible"
        if gpus
        else f"{len(entries)} well-formed entr{'y' if len(entries) == 1 else 'ies'}, not "
        "matched against a GPU (the NVIDIA driver lists none)"
    )
    return [Check("env.cuda_visible_devices", title, Status.OK, f"{value!r}: {said}", see=see)]


# TF_GPU_ALLOCATOR's values that TensorFlow knows (tensorflow/core/common_runtime/gpu/
# gpu_process_state.cc): the default (unset), cudaMallocAsync's pool, and two allocators
# for debugging that pass every allocation to CUDA.
_ALLOCATORS = {
    "cuda_malloc_async": None,
    "cuda_malloc": "every allocation goes to cudaMalloc, unpooled (a debugging allocator)",
    "memory_guard": "every allocation is guarded and checked (a debugging allocator)",
}


def check_tf_memory_env(ctx: DoctorContext) -> list[Check]:
    """TensorFlow's GPU memory variables, which it reads with no error that stops
    anything: TF_FORCE_GPU_ALLOW_GROWTH other than exactly "true" or "false" (`1`,
    `True`, `yes`) is ignored with one log line, so memory growth stays off; a
    TF_GPU_ALLOCATOR left from a debugging session makes every step slow."""
    growth = ctx.env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    allocator = ctx.env.get("TF_GPU_ALLOCATOR", "")
    see = "echo $TF_FORCE_GPU_ALLOW_GROWTH $TF_GPU_ALLOCATOR"
    rows = []
    if growth is not None and growth not in ("true", "false"):
        rows.append(
            Check(
                "env.tf_memory.growth",
                "TensorFlow memory variables",
                Status.WARN,
                f"TF_FORCE_GPU_ALLOW_GROWTH={growth!r} is ignored: TensorFlow reads only "
                "'true' or 'false' (lower case), so memory growth stays as the program "
                "sets it (off by default: the first process takes nearly all GPU memory)",
                fix="export TF_FORCE_GPU_ALLOW_GROWTH=true",
                see=see,
            )
        )
    if allocator and allocator not in _ALLOCATORS:
        why = "TensorFlow does not know it ('Invalid allocator type') and keeps its default"
    else:
        why = _ALLOCATORS.get(allocator) or ""
    if why:
        rows.append(
            Check(
                "env.tf_memory.allocator",
                "TensorFlow memory variables",
                Status.WARN,
                f"TF_GPU_ALLOCATOR={allocator!r}: {why}",
                fix="unset TF_GPU_ALLOCATOR  (or export TF_GPU_ALLOCATOR=cuda_malloc_async)",
                see=see,
            )
        )
    if rows:
        return rows
    said = ", ".join(
        f"{name}={ctx.env[name]}"
        for name in ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR")
        if ctx.env.get(name)
    )
    finding = (
        f"{said}: understood" if said else "TF_FORCE_GPU_ALLOW_GROWTH, TF_GPU_ALLOCATOR not set"
    )
    if growth == "false":
        finding += " (memory growth asked for in code, tfaccel's memory='growth' too, is off)"
    return [Check("env.tf_memory", "TensorFlow memory variables", Status.OK, finding, see=see)]


def _well_formed(entries: list[str]) -> int:
    """Without NVML to match against: how many leading entries could name a GPU (an
    index not seen before, or a GPU-/MIG- UUID prefix)."""
    seen: set[str] = set()
    for position, entry in enumerate(entries):
        ok = entry.isdigit() or (entry.startswith(("GPU-", "MIG-")) and len(entry) > 4)
        if not ok or entry in seen:
            return position
        seen.add(entry)
    return len(entries)


def check_xla_flags(ctx: DoctorContext) -> list[Check]:
    """XLA aborts the whole process ("Unknown flag in XLA_FLAGS") at its first
    compilation when a flag it does not know is set: flags copied from an older guide
    (e.g. --xla_gpu_enable_cuda_graphs, since replaced) crash every jit_compile model."""
    title = "XLA flags"
    set_vars = {
        variable: ctx.env[variable]
        for variable in probes.XLA_FLAG_VARIABLES
        if ctx.env.get(variable, "").strip()
    }
    see = "echo $XLA_FLAGS $TF_XLA_FLAGS"
    if not set_vars:
        return [Check("env.xla_flags", title, Status.OK, "XLA_FLAGS and TF_XLA_FLAGS not set")]
    probe = ctx.xla_flags
    shown = "; ".join(f"{name}={variable}" for name, variable in set_vars.items())
    if not probe.ran:
        return [
            Check(
                "env.xla_flags",
                title,
                Status.SKIP,
                f"{shown} (not tried: TensorFlow is not importable here)",
                see=see,
            )
        ]
    if probe.ok:
        return [Check("env.xla_flags", title, Status.OK, f"XLA accepts {shown}", see=see)]
    if probe.unknown and probe.variable:
        bad = set(probe.unknown)
        kept = " ".join(
            flag for flag in set_vars.get(probe.variable, "").split() if flag not in bad
        )
        return [
            Check(
                "env.xla_flags",
                title,
                Status.FAIL,
                f"{probe.variable} holds flags this TensorFlow's XLA does not know: "
                f"{' '.join(probe.unknown)}. XLA aborts the process at its first "
                "compilation (every jit_compile model, Keras' default on a GPU)",
                fix=f'export {probe.variable}="{kept}"' if kept else f"unset {probe.variable}",
                see=see,
            )
        ]
    return [
        Check(
            "env.xla_flags",
            title,
            Status.WARN,
            f"a small XLA compilation with {shown} failed: {probe.error}",
            see=see,
        )
    ]


def check_mps(ctx: DoctorContext) -> list[Check]:
    title = "NVIDIA MPS"
    plat = ctx.platform
    if plat.system != "Linux":
        return [Check("gpu.mps", title, Status.SKIP, "MPS exists on Linux only")]
    if plat.mps_pipe_dirs or plat.mps_processes:
        found = ", ".join(
            list(plat.mps_processes) + [f"pipe {directory}" for directory in plat.mps_pipe_dirs]
        )
        return [
            Check(
                "gpu.mps",
                title,
                Status.WARN,
                f"the MPS control daemon is running ({found}): TensorFlow processes share "
                "each GPU, and each one grabs most of the memory unless limited",
                fix="give each process a memory limit (TF_FORCE_GPU_ALLOW_GROWTH=true or "
                "tf.config.set_logical_device_configuration), or stop MPS: "
                "echo quit | nvidia-cuda-mps-control",
                see="ps -ef | grep nvidia-cuda-mps",
            )
        ]
    return [
        Check(
            "gpu.mps", title, Status.OK, "MPS is not running", see="ps -ef | grep nvidia-cuda-mps"
        )
    ]


def check_gpu_state(ctx: DoctorContext) -> list[Check]:
    title = "GPU state (NVML)"
    drv = ctx.driver
    if not drv.available:
        return [Check("gpu.state", title, Status.SKIP, "NVML is not available")]
    if drv.error:
        return [
            Check(
                "gpu.state",
                title,
                Status.FAIL,
                f"NVML cannot list GPUs: {drv.error}",
                fix="check `nvidia-smi` and the kernel log (dmesg | grep -i xid)",
                see="nvidia-smi",
            )
        ]
    if not drv.gpus:
        return [
            Check(
                "gpu.state",
                title,
                Status.FAIL,
                "the driver is loaded but reports no GPU",
                see="nvidia-smi -L",
            )
        ]
    broken = [gpu for gpu in drv.gpus if gpu.error]
    listing = "; ".join(
        f"GPU {gpu.index}: {gpu.name}, compute capability {gpu.compute_capability}, "
        f"{(gpu.memory_total_mib or 0) / 1024:.0f} GiB"
        for gpu in drv.gpus
        if not gpu.error
    )
    if broken:
        bad = "; ".join(f"GPU {gpu.index}: {gpu.error}" for gpu in broken)
        return [
            Check(
                "gpu.state",
                title,
                Status.FAIL,
                f"GPU(s) in an unusable state: {bad}",
                fix="look for Xid errors (dmesg | grep -i xid); a reset or reboot may be needed",
                see="nvidia-smi -q",
            )
        ]
    return [Check("gpu.state", title, Status.OK, listing, see="nvidia-smi -L")]


def _capability_verdict(capability: str, compiled: list[str]) -> tuple[Status, str]:
    """Judge a GPU's compute capability against TF's compiled sm_/compute_ list."""
    major, minor = (int(x) for x in capability.split("."))
    want = major * 10 + minor
    sass = sorted(
        int("".join(char for char in entry[3:] if char.isdigit()))
        for entry in compiled
        if entry.startswith("sm_")
    )
    ptx = sorted(
        int("".join(char for char in entry[8:] if char.isdigit()))
        for entry in compiled
        if entry.startswith("compute_")
    )
    if want in sass:
        return Status.OK, f"sm_{want} machine code is compiled in"
    same_major = [sm for sm in sass if sm // 10 == major and sm <= want]
    if same_major:
        return Status.OK, (
            f"sm_{max(same_major)} machine code runs on {capability} (binary compatible "
            "within a major version)"
        )
    usable_ptx = [ptx_cc for ptx_cc in ptx if ptx_cc <= want]
    if usable_ptx:
        return Status.WARN, (
            f"no sm_{want} machine code: kernels are JIT-compiled from "
            f"compute_{max(usable_ptx)} PTX on first use (can take many minutes "
            "the first time; cached afterwards)"
        )
    return Status.FAIL, (
        f"no machine code or PTX for compute capability {capability}: TensorFlow "
        "cannot run kernels on this GPU"
    )


def check_capability(ctx: DoctorContext) -> list[Check]:
    title = "GPU compute capability vs TensorFlow's compiled list"
    compiled = list((ctx.build_info or {}).get("cuda_compute_capabilities") or [])
    gpus: list[tuple[int, object, object]] = [
        (gpu.index, gpu.name, gpu.compute_capability)
        for gpu in ctx.driver.gpus
        if gpu.compute_capability
    ]
    if not gpus:
        gpus = [
            (i, gpu.get("name"), gpu.get("compute_capability"))
            for i, gpu in enumerate(ctx.tf_runtime.gpus)
            if gpu.get("compute_capability")
        ]
    if not compiled or not gpus:
        why = "no compiled capability list" if not compiled else "no GPU to compare"
        return [Check("gpu.compute_capability", title, Status.SKIP, why, see=TF_BUILD)]
    out: list[Check] = []
    for index, name, capability in gpus:
        status, text = _capability_verdict(str(capability), compiled)
        fix = None
        if status is Status.WARN:
            # PTX from a newer toolkit than the driver supports cannot be JIT-compiled.
            built = version_tuple(str((ctx.build_info or {}).get("cuda_version")))
            have = version_tuple(ctx.driver.cuda_version)
            if have and built and have[:2] < built[:2]:
                status = Status.FAIL
                text += (
                    f"; and the driver (CUDA {ctx.driver.cuda_version}) is older than the "
                    f"CUDA {'.'.join(map(str, built[:2]))} PTX, so the JIT fails"
                )
                fix = "upgrade the NVIDIA driver"
            else:
                fix = (
                    "export CUDA_CACHE_MAXSIZE=4294967296  (keep the JIT-compiled kernels "
                    "between runs), or use a TensorFlow build with sm_"
                    + str(capability).replace(".", "")
                    + " (NVIDIA's NGC container)"
                )
        elif status is Status.FAIL:
            fix = "use a TensorFlow release or build that targets this GPU"
        out.append(
            Check(
                f"gpu.compute_capability.{index}",
                f"GPU {index} compute capability",
                status,
                f"{name} is {capability}; TensorFlow was compiled for "
                f"{', '.join(compiled)}: {text}",
                fix=fix,
                see=TF_BUILD,
                details={"compute_capability": capability, "compiled": compiled},
            )
        )
    return out
