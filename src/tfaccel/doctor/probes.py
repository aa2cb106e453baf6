"""Facts about the installation, gathered without importing TensorFlow in-process.

Each probe returns plain data and never raises for a broken environment: the checks
in `tfaccel.doctor.checks` turn the data into findings.
"""

from __future__ import annotations

import ast
import contextlib
import glob
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tfaccel._child import run_child
from tfaccel.hardware.capabilities import mps_state
from tfaccel.hardware.pci import nvidia_pci_devices
from tfaccel.hardware.pci import read_or_empty as _read


@dataclass(frozen=True)
class Distribution:
    """An installed Python distribution."""

    name: str  # canonical name
    version: str
    location: str | None
    requires: tuple[str, ...] = ()
    installer: str | None = None


def installed_distributions(paths: Sequence[str] | None = None) -> dict[str, Distribution]:
    """Installed distributions by canonical name (first on sys.path wins, as for imports)."""
    found: dict[str, Distribution] = {}
    dists: Iterable[md.Distribution] = (
        md.distributions(path=list(paths)) if paths is not None else md.distributions()
    )
    for dist in dists:
        try:
            name = canonicalize_name(dist.metadata["Name"] or "")
        except Exception:
            continue
        if not name or name in found:
            continue
        location = None
        with contextlib.suppress(Exception):
            location = str(dist.locate_file(""))
        installer = None
        with contextlib.suppress(Exception):
            installer = (dist.read_text("INSTALLER") or "").strip() or None
        found[name] = Distribution(
            name=name,
            version=dist.version,
            location=location,
            requires=tuple(dist.requires or ()),
            installer=installer,
        )
    return found


def requirements_of(dist: Distribution, extra: str | None = None) -> list[Requirement]:
    """The requirements `dist` declares for this platform (those of `extra` too, where
    given); a line that does not parse is left out."""
    env = {"extra": extra or ""}
    reqs = []
    for text in dist.requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(env):
            reqs.append(req)
    return reqs


def requirement_for(dist: Distribution, name: str, extra: str | None = None) -> Requirement | None:
    """The requirement `dist` declares on `name` (for this platform, optionally an extra)."""
    target = canonicalize_name(name)
    return next(
        (
            requirement
            for requirement in requirements_of(dist, extra)
            if canonicalize_name(requirement.name) == target
        ),
        None,
    )


@dataclass(frozen=True)
class Unmet:
    """A requirement an installed distribution declares that the environment does not
    meet: `package` (installed at `installed`, None: missing) against `spec`, which
    `required_by` declares."""

    package: str
    spec: str
    required_by: str
    installed: str | None


def unmet_requirements(dists: dict[str, Distribution], root: str, depth: int = 2) -> list[Unmet]:
    """What `pip check` would say of `root` and of what it requires, `depth` levels
    down (TensorFlow 2.21 accepts numpy 1.26, but its ml-dtypes needs numpy 2: only the
    second level names the real conflict), read from the installed metadata alone."""
    out: list[Unmet] = []
    seen: set[str] = set()
    level = [root]
    for _ in range(depth):
        below: list[str] = []
        for name in level:
            dist = dists.get(name)
            if dist is None or name in seen:
                continue
            seen.add(name)
            for req in requirements_of(dist):
                target = canonicalize_name(req.name)
                have = dists.get(target)
                if have is None or not req.specifier.contains(have.version, prereleases=True):
                    spec = str(req.specifier)
                    out.append(Unmet(target, spec, dist.name, have.version if have else None))
                below.append(target)
        level = below
    return out


def read_build_info(tf_dir: Path | None) -> dict[str, Any] | None:
    """TensorFlow's build_info dict, read from its source file (parsed, never executed)."""
    if tf_dir is None:
        return None
    path = tf_dir / "python" / "platform" / "build_info.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(
                isinstance(target, ast.Name) and target.id == "build_info"
                for target in node.targets
            )
            and isinstance(node.value, ast.Call)
            and node.value.args
        ):
            try:
                return dict(ast.literal_eval(node.value.args[0]))
            except (ValueError, TypeError, SyntaxError):
                return None
    return None


@dataclass(frozen=True)
class TfRuntime:
    """What a fresh `import tensorflow` reports in a child process."""

    ran: bool
    error: str | None = None
    version: str | None = None
    built_with_cuda: bool | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    log_lines: tuple[str, ...] = ()
    seconds: float = 0.0


_TF_PROBE = r"""
import json, time
t = time.time()
out = {}
try:
    import tensorflow as tf
    out["version"] = tf.__version__
    out["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
    gpus = []
    for g in tf.config.list_physical_devices("GPU"):
        d = tf.config.experimental.get_device_details(g)
        cc = d.get("compute_capability")
        gpus.append({"device": g.name, "name": d.get("device_name"),
                     "compute_capability": "%d.%d" % tuple(cc) if cc else None})
    out["gpus"] = gpus
except BaseException as e:
    # the whole chain: a failed import's last error often names neither the package nor
    # the version at fault (numpy < 2 under ml-dtypes: "SystemError: ... returned a
    # result with an exception set"), the one it was raised from does
    chain, x = [], e
    while x is not None and len(chain) < 6:
        first = (str(x).strip().splitlines() or [""])[0]
        chain.append("%s: %s" % (type(x).__name__, first[:300]))
        x = x.__cause__ or x.__context__
    out["error"] = chain[0] + "".join("; raised from " + c for c in chain[1:])
out["seconds"] = time.time() - t
print("TFACCEL_PROBE " + json.dumps(out), flush=True)
"""

_TF_LOG_KEYS = re.compile(
    r"dlopen|dynamic library|cuInit|CUDA_ERROR|cudart|cudnn|Skipping registering GPU|"
    r"GPU will not be used|compute capability|ptxas|libdevice",
    re.IGNORECASE,
)


def tf_runtime_probe(timeout_s: float = 180.0, env: Mapping[str, str] | None = None) -> TfRuntime:
    """Import TensorFlow in a child process and list the GPUs it sees.

    A child keeps TensorFlow's GPU initialisation (and any crash) out of this process.
    TF's own log is kept for reference: it is not trusted to name the right library.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    child_env["PYTHONSAFEPATH"] = "1"  # a keras.py here is named by check_shadowing
    proc = run_child(["-c", _TF_PROBE], "TFACCEL_PROBE ", child_env, timeout_s)
    if proc.timed_out:
        return TfRuntime(True, f"importing TensorFlow took longer than {timeout_s:.0f} s")
    elapsed = proc.wall_s
    logs = tuple(line.strip() for line in proc.stderr.splitlines() if _TF_LOG_KEYS.search(line))
    payload = proc.payload
    if payload is None:
        return TfRuntime(
            True,
            f"the TensorFlow probe {proc.exit_text()}: " + proc.tail(3, " | "),
            log_lines=logs[-20:],
            seconds=elapsed,
        )
    return TfRuntime(
        ran=True,
        error=payload.get("error"),
        version=payload.get("version"),
        built_with_cuda=payload.get("built_with_cuda"),
        gpus=tuple(payload.get("gpus") or ()),
        log_lines=logs[-20:],
        seconds=float(payload.get("seconds", elapsed)),
    )


XLA_FLAG_VARIABLES = ("XLA_FLAGS", "TF_XLA_FLAGS")
_UNKNOWN_FLAG = re.compile(r"Unknown flags? in (XLA_FLAGS|TF_XLA_FLAGS): (.+)")
_XLA_PROBE = r"""
import tensorflow as tf
f = tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)
print("TFACCEL_XLA_OK", float(f(tf.ones(2))[0]), flush=True)
"""


@dataclass(frozen=True)
class XlaFlagsProbe:
    """Whether XLA accepts the flags in XLA_FLAGS / TF_XLA_FLAGS: XLA parses them at its
    first compilation and aborts the process on one it does not know."""

    ran: bool
    ok: bool = True
    variable: str | None = None  # which variable held the unknown flags
    unknown: tuple[str, ...] = ()
    error: str | None = None


def xla_flags_probe(env: Mapping[str, str], timeout_s: float = 120.0) -> XlaFlagsProbe:
    """Compile one small function with XLA, on the CPU, with `env`'s XLA flags."""
    if not any(env.get(variable, "").strip() for variable in XLA_FLAG_VARIABLES):
        return XlaFlagsProbe(ran=False)
    child_env = {**env, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "0"}
    child_env["PYTHONSAFEPATH"] = "1"
    proc = run_child(["-c", _XLA_PROBE], "TFACCEL_XLA_OK", child_env, timeout_s)
    if proc.timed_out:
        return XlaFlagsProbe(True, False, error=f"no answer within {timeout_s:.0f} s")
    found = _UNKNOWN_FLAG.search(proc.stderr)
    if found:
        return XlaFlagsProbe(True, False, found.group(1), tuple(found.group(2).split()))
    if "TFACCEL_XLA_OK" in proc.stdout:
        return XlaFlagsProbe(True)
    return XlaFlagsProbe(True, False, error=f"{proc.exit_text()}: {proc.tail(2, ' | ')}"[:500])


def site_directories() -> list[str]:
    """Directories on sys.path that hold installed packages."""
    out: list[str] = []
    for entry in sys.path:
        if (
            entry
            and os.path.isdir(entry)
            and entry not in out
            and ("site-packages" in entry or "dist-packages" in entry)
        ):
            out.append(entry)
    return out


@dataclass(frozen=True)
class WheelFile:
    """The pip distribution that installed a file."""

    distribution: str
    version: str


def wheel_file_index(site_dirs: Iterable[str]) -> dict[str, WheelFile]:
    """{realpath of each file: owning nvidia-*/torch distribution}, from RECORD files."""
    index: dict[str, WheelFile] = {}
    for site in site_dirs:
        for info in glob.glob(os.path.join(site, "nvidia_*.dist-info")):
            base = os.path.basename(info)[: -len(".dist-info")]
            name, _, version = base.partition("-")
            try:
                record = Path(info, "RECORD").read_text(encoding="utf-8")
            except OSError:
                continue
            for line in record.splitlines():
                rel = line.split(",", 1)[0]
                if ".so" in rel:
                    index[os.path.realpath(os.path.join(site, rel))] = WheelFile(
                        canonicalize_name(name), version
                    )
    return index


def library_directories(site_dirs: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """Every place a CUDA library copy may hide: wheels, torch, conda, system CUDA."""
    dirs: list[str] = []
    for site in site_dirs:
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
        dirs += sorted(glob.glob(os.path.join(site, "torch", "lib")))
        dirs += sorted(glob.glob(os.path.join(site, "tensorrt_libs")))
    if env.get("CONDA_PREFIX"):
        dirs.append(os.path.join(env["CONDA_PREFIX"], "lib"))
    dirs += sorted(glob.glob("/usr/local/cuda*/lib64")) + sorted(
        glob.glob("/usr/local/cuda*/targets/*/lib")
    )
    dirs += ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"]
    seen: list[str] = []
    for directory in dirs:
        if os.path.isdir(directory) and os.path.realpath(directory) not in [
            os.path.realpath(kept) for kept in seen
        ]:
            seen.append(directory)
    return seen


def nvcc_version(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(path of nvcc on PATH, its CUDA release "12.4") or (None, None)."""
    exe = shutil.which("nvcc", path=env.get("PATH"))
    if exe is None:
        return None, None
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return exe, None
    match = re.search(r"release (\d+\.\d+)", out)
    return exe, match.group(1) if match else None


def find_ptxas(env: Mapping[str, str], site_dirs: Iterable[str]) -> str | None:
    """The ptxas XLA would use: pip's nvidia-cuda-nvcc wheel first, then PATH, then CUDA."""
    for site in site_dirs:
        for cand in glob.glob(os.path.join(site, "nvidia", "cuda_nvcc", "bin", "ptxas")):
            return cand
    exe = shutil.which("ptxas", path=env.get("PATH"))
    if exe:
        return exe
    for cand in sorted(glob.glob("/usr/local/cuda*/bin/ptxas")):
        return cand
    return None


@dataclass(frozen=True)
class PlatformFacts:
    """Operating system and sandbox facts that decide whether a GPU can be used at all."""

    system: str  # "Linux", "Windows", "Darwin"
    machine: str
    release: str
    wsl: bool
    container: str | None  # "docker", "podman", "kubernetes", ... or None
    nvidia_device_nodes: tuple[str, ...] = ()
    wsl_libcuda: bool = False
    mps_pipe_dirs: tuple[str, ...] = ()
    mps_processes: tuple[str, ...] = ()
    # NVIDIA display/3D controllers on the PCI bus (sysfs shows the host's even inside a
    # container); None where sysfs cannot be read.
    nvidia_pci_devices: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def detect_container(root: str = "/") -> str | None:
    """Name the container runtime this process runs in, if any."""
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    cgroup = _read(os.path.join(root, "proc/1/cgroup"))
    for key in ("kubepods", "docker", "containerd", "lxc"):
        if key in cgroup:
            return "kubernetes" if key == "kubepods" else key
    return None


def platform_facts(env: Mapping[str, str]) -> PlatformFacts:
    """Gather the OS, WSL, container and MPS facts of this machine."""
    system = platform.system()
    release = platform.release()
    wsl = system == "Linux" and (
        "microsoft" in release.lower() or "microsoft" in _read("/proc/version").lower()
    )
    nodes = tuple(
        sorted(glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/nvidiactl") + glob.glob("/dev/dxg"))
    )
    pipes, procs = mps_state(env) if system == "Linux" else ([], [])
    return PlatformFacts(
        system=system,
        machine=platform.machine(),
        release=release,
        wsl=wsl,
        container=detect_container() if system == "Linux" else None,
        nvidia_device_nodes=nodes,
        wsl_libcuda=os.path.exists("/usr/lib/wsl/lib/libcuda.so.1"),
        mps_pipe_dirs=tuple(pipes),
        mps_processes=tuple(procs),
        nvidia_pci_devices=nvidia_pci_devices() if system == "Linux" and not wsl else None,
    )


def conda_packages(prefix: str | None) -> dict[str, str]:
    """CUDA-related conda packages in the environment at `prefix` ({name: version})."""
    if not prefix:
        return {}
    out: dict[str, str] = {}
    for meta in glob.glob(os.path.join(prefix, "conda-meta", "*.json")):
        try:
            data = json.loads(Path(meta).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = str(data.get("name", ""))
        if re.match(r"^(cudatoolkit|cuda-.*|cudnn|nccl|libcublas|libcudnn.*|tensorflow.*)$", name):
            out[name] = str(data.get("version", ""))
    return out
