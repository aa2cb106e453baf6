"""The doctor's checks: each a small function of the context returning Check rows.

Order matters only for reading: installation, build, driver, libraries, platform, and
last "does TensorFlow see the GPU", which names the first real cause it finds above.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tfaccel import data
from tfaccel.doctor import probes
from tfaccel.doctor.context import DoctorContext, LibraryRow, version_tuple
from tfaccel.doctor.model import Check, Status
from tfaccel.hardware.capabilities import visible_indices

PIP_LIST = "pip list 2>/dev/null | grep -iE 'tensorflow|tf-nightly|keras|nvidia'"
TF_BUILD = 'python -c "import tensorflow as tf; print(tf.sysconfig.get_build_info())"'
TF_GPUS = "python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\""

CheckFn = Callable[[DoctorContext], list[Check]]


def _tf_pin(ctx: DoctorContext) -> str:
    return f"=={ctx.tf_version}" if ctx.tf_version else ""


# --- 1. installation ---------------------------------------------------------------------
def check_tf_install(ctx: DoctorContext) -> list[Check]:
    dists = ctx.tf_dists
    title = "TensorFlow installation"
    see = PIP_LIST
    if not dists:
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                "TensorFlow is not installed in this Python environment",
                fix="pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    primary = ctx.primary_tf_dists
    listing = ", ".join(f"{d.name} {d.version}" for d in dists)
    if len(primary) > 1:
        names = " ".join(d.name for d in dists)
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{len(primary)} TensorFlow distributions are installed side by side ({listing}). "
                "They all write the same `tensorflow` package, so the files on disk are a mix of "
                "builds and GPU support is unpredictable",
                fix=f"pip uninstall -y {names} && pip install 'tensorflow[and-cuda]'",
                see=see,
                details={"distributions": listing},
            )
        ]
    tf = primary[0]
    if ctx.tf_dir is None:
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{tf.name} {tf.version} is registered but the `tensorflow` package is "
                "missing on disk (a broken or interrupted install)",
                fix=f"pip install --force-reinstall '{tf.name}=={tf.version}'",
                see=see,
            )
        ]
    if tf.name == "tensorflow-gpu":
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                "tensorflow-gpu is deprecated since TF 2.12 and no longer ships GPU builds",
                fix="pip uninstall -y tensorflow-gpu && pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    if tf.name in ("tensorflow-cpu", "tf-nightly-cpu", "intel-tensorflow", "tensorflow-cpu-aws"):
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{tf.name} {tf.version} is a CPU-only distribution: it cannot use a GPU",
                fix=f"pip uninstall -y {tf.name} && pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    status = Status.OK
    finding = f"{tf.name} {tf.version} at {ctx.tf_dir}"
    if tf.name.startswith("tf-nightly"):
        status, finding = Status.WARN, finding + " (a nightly build: expect breakage)"
    return [
        Check(
            "tf.install",
            title,
            status,
            finding,
            see=see,
            details={"distributions": listing, "installer": tf.installer},
        )
    ]


def check_tfaccel_support(ctx: DoctorContext) -> list[Check]:
    """The TensorFlow / Keras pair against what tfaccel supports (not only against
    TensorFlow's own requirement), and which of tfaccel's features the pair loses."""
    from tfaccel import _compat

    title = "tfaccel supports this TensorFlow and Keras"
    tf = ctx.tf_version
    keras_dist = ctx.distributions.get("keras")
    keras = keras_dist.version if keras_dist else None
    if tf is None:
        return [Check("tfaccel.support", title, Status.SKIP, "TensorFlow is not installed")]
    lo, hi = _compat.TF_SUPPORTED
    have = version_tuple(tf)[:2]
    pair = f"TensorFlow {tf} with Keras {keras or '(none)'}"
    if have < version_tuple(lo):
        fix = f"pip install 'tensorflow>={lo}'"
        finding = f"{pair}: tfaccel needs TensorFlow {lo} or newer"
        return [Check("tfaccel.support", title, Status.FAIL, finding, fix, PIP_LIST)]
    if keras and version_tuple(keras)[:2] < version_tuple(_compat.KERAS_FLOOR):
        fix = f"pip install 'keras>={_compat.KERAS_FLOOR}'"
        finding = f"{pair}: tfaccel needs Keras {_compat.KERAS_FLOOR} or newer"
        return [Check("tfaccel.support", title, Status.FAIL, finding, fix, PIP_LIST)]
    lost = _compat.features_lost(tf, keras)
    newer = (
        f"; newer than {hi}, the newest tfaccel was tested with" if have > version_tuple(hi) else ""
    )
    if lost:
        finding = f"{pair}{newer}: tfaccel refuses " + "; ".join(lost)
        fix = "pip install --upgrade tensorflow keras  (only if the features matter to you)"
        return [Check("tfaccel.support", title, Status.WARN, finding, fix, PIP_LIST)]
    status = Status.WARN if newer else Status.OK
    return [Check("tfaccel.support", title, status, f"{pair}: every feature{newer}", see=PIP_LIST)]


# Packages beside TensorFlow whose own pins break it when they do not hold: KerasHub (the
# bert_hub and gpt2 workloads, the user's KerasHub models) and tensorflow-text, whose ops
# are built for one TensorFlow release.
COMPANIONS = ("keras-hub", "tensorflow-text")


def check_companions(ctx: DoctorContext) -> list[Check]:
    """KerasHub and tensorflow-text, where installed, against the TensorFlow and Keras
    here: each requirement they declare on those (or on each other) must hold."""
    from tfaccel.doctor.probes import requirement_for

    have = {"tensorflow": ctx.tf_version} | {
        n: d.version for n, d in ctx.distributions.items() if n in ("keras", *COMPANIONS)
    }
    out: list[Check] = []
    for name in COMPANIONS:
        dist = ctx.distributions.get(name)
        if dist is None:
            continue
        title = f"{name} matches TensorFlow and Keras"
        broken = [
            f"{name} {dist.version} requires {req}, and {dep} {have[dep]} is installed"
            for dep in ("tensorflow", "keras", *COMPANIONS)
            if have.get(dep)
            and (req := requirement_for(dist, dep)) is not None
            and not req.specifier.contains(have[dep], prereleases=True)  # type: ignore[arg-type]
        ]
        fix: str | None = None
        if broken:
            pins = " ".join(f"'{d}=={have[d]}'" for d in ("tensorflow", "keras") if have.get(d))
            status, finding = Status.FAIL, "; ".join(broken)
            fix = f"pip install '{name}' {pins}  (pip picks the {name} that fits them)"
        else:
            status, finding = Status.OK, f"{name} {dist.version}"
        out.append(Check(f"{name}.match", title, status, finding, fix, PIP_LIST))
    return out


def check_keras(ctx: DoctorContext) -> list[Check]:
    title = "Keras matches TensorFlow"
    tf = ctx.tf_dist
    if tf is None:
        return [Check("tf.keras", title, Status.SKIP, "TensorFlow is not installed")]
    keras = ctx.distributions.get("keras")
    out: list[Check] = []
    from tfaccel.doctor.probes import requirement_for

    req = requirement_for(tf, "keras")
    if req is not None:
        spec = str(req.specifier) or "(any version)"
        if keras is None:
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.FAIL,
                    f"{tf.name} {tf.version} requires keras{spec}, which is not installed",
                    fix=f"pip install 'keras{spec}'",
                    see=PIP_LIST,
                )
            )
        elif not req.specifier.contains(keras.version, prereleases=True):
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.FAIL,
                    f"keras {keras.version} does not match {tf.name} {tf.version}, "
                    f"which requires keras{spec}",
                    fix=f"pip install 'keras{spec}'",
                    see=PIP_LIST,
                )
            )
        else:
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.OK,
                    f"keras {keras.version} satisfies {tf.name}'s keras{spec}",
                    see=PIP_LIST,
                )
            )
    else:
        out.append(
            Check(
                "tf.keras",
                title,
                Status.OK if keras else Status.SKIP,
                f"{tf.name} declares no keras requirement"
                + (f"; keras {keras.version} installed" if keras else ""),
                see=PIP_LIST,
            )
        )
    if ctx.env.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes"):
        tfk = ctx.distributions.get("tf-keras")
        want = ".".join(tf.version.split(".")[:2])
        if tfk is None or not tfk.version.startswith(want + "."):
            have = f"tf-keras {tfk.version}" if tfk else "no tf-keras"
            out.append(
                Check(
                    "tf.keras_legacy",
                    "Legacy Keras (TF_USE_LEGACY_KERAS)",
                    Status.FAIL,
                    f"TF_USE_LEGACY_KERAS is set but {have} is installed; "
                    f"TensorFlow {tf.version} needs tf-keras {want}.x",
                    fix=f"pip install 'tf-keras~={want}.0'",
                    see=PIP_LIST,
                )
            )
    return out


def check_requirements(ctx: DoctorContext) -> list[Check]:
    """TensorFlow's requirements, and theirs, met by what is installed (as `pip check`
    would say, from the metadata alone): a numpy pin below what ml-dtypes needs breaks
    `import tensorflow` with an error that names neither."""
    title = "TensorFlow's requirements"
    tf = ctx.tf_dist
    if tf is None:
        return [Check("tf.requirements", title, Status.SKIP, "TensorFlow is not installed")]
    unmet = probes.unmet_requirements(ctx.distributions, tf.name)
    if not unmet:
        finding = f"every requirement of {tf.name} {tf.version}, and of those, is met"
        return [Check("tf.requirements", title, Status.OK, finding, see="pip check")]
    said = [
        f"{u.package} {u.installed or '(missing)'} does not meet {u.required_by}'s "
        f"{u.package}{u.spec or ' (any version)'}"
        for u in unmet
    ]
    return [
        Check(
            "tf.requirements",
            title,
            Status.FAIL,
            "; ".join(said),
            fix=requirements_fix(unmet),
            see="pip check",
        )
    ]


def requirements_fix(unmet: list[probes.Unmet]) -> str:
    """One pip command for every unmet requirement, each package's specifiers together."""
    specs: dict[str, list[str]] = {}
    for u in unmet:
        specs.setdefault(u.package, []).extend(filter(None, u.spec.split(",")))
    parts = [f"'{name}{','.join(dict.fromkeys(s))}'" for name, s in specs.items()]
    return "pip install " + " ".join(parts)


def check_keras_backend(ctx: DoctorContext) -> list[Check]:
    """Keras 3 runs on the backend KERAS_BACKEND or keras.json names: on JAX or PyTorch,
    a Keras model never reaches TensorFlow's GPU (nor tfaccel's settings)."""
    from tfaccel.environment import backend_fix, keras_backend

    backend, where = keras_backend(ctx.env)
    title = "Keras' backend"
    if backend == "tensorflow":
        return [Check("keras.backend", title, Status.OK, f"tensorflow ({where})")]
    return [
        Check(
            "keras.backend",
            title,
            Status.FAIL,
            f"Keras runs on its {backend} backend ({where}): Keras models train with "
            f"{backend}, not TensorFlow, so TensorFlow's GPU set-up and tfaccel's settings "
            "do not reach them",
            fix=backend_fix(where),
            see="python -c 'import keras; print(keras.backend.backend())'",
        )
    ]


# --- 2. build ----------------------------------------------------------------------------
def check_build(ctx: DoctorContext) -> list[Check]:
    title = "TensorFlow build (CUDA, cuDNN, compute capabilities)"
    if ctx.tf_dir is None:
        return [Check("tf.build", title, Status.SKIP, "TensorFlow is not installed")]
    info = ctx.build_info
    if info is None:
        return [
            Check(
                "tf.build",
                title,
                Status.WARN,
                "tensorflow/python/platform/build_info.py is missing or unreadable",
                see=TF_BUILD,
            )
        ]
    if not info.get("is_cuda_build"):
        extra = " (ROCm build)" if info.get("is_rocm_build") else ""
        return [
            Check(
                "tf.build",
                title,
                Status.FAIL,
                f"This TensorFlow was built without CUDA{extra}: it cannot use an NVIDIA GPU",
                fix="pip install 'tensorflow[and-cuda]'",
                see=TF_BUILD,
                details={"build_info": info},
            )
        ]
    caps = ", ".join(info.get("cuda_compute_capabilities") or []) or "unknown"
    return [
        Check(
            "tf.build",
            title,
            Status.OK,
            f"built with CUDA {info.get('cuda_version')} and cuDNN "
            f"{info.get('cudnn_version')}, for {caps}",
            see=TF_BUILD,
            details={"build_info": info},
        )
    ]


def _compat_row(tf_version: str) -> tuple[dict[str, str] | None, bool]:
    """The tested-build row for this TF version (exact minor, else nearest older)."""
    rows = data.load("tf_cuda_compat")["rows"]
    want = version_tuple(tf_version)[:2]
    best = None
    for row in rows:
        have = version_tuple(row["tensorflow"])[:2]
        if have == want:
            return row, True
        if have < want and (best is None or have > version_tuple(best["tensorflow"])[:2]):
            best = row
    return best, False


def check_compat(ctx: DoctorContext) -> list[Check]:
    title = "CUDA and cuDNN in use vs TensorFlow's tested build"
    see = "https://www.tensorflow.org/install/source#gpu"
    if ctx.tf_version is None or not (ctx.build_info or {}).get("is_cuda_build"):
        return [Check("tf.compat", title, Status.SKIP, "no CUDA build of TensorFlow installed")]
    row, exact = _compat_row(ctx.tf_version)
    if row is None:
        return [
            Check(
                "tf.compat",
                title,
                Status.WARN,
                f"TensorFlow {ctx.tf_version} is older than every row of the tested-build "
                "table (2.4+)",
                fix="pip install -U 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    problems: list[tuple[Status, str]] = []
    rows = {r.key: r for r in ctx.library_rows}
    for key, want in (("cudart", row["cuda"]), ("cudnn", row["cudnn"])):
        lib = rows.get(key)
        if lib is None or lib.resolution.path is None or not lib.version:
            continue
        have, need = version_tuple(lib.version), version_tuple(want)
        label = "CUDA runtime" if key == "cudart" else "cuDNN"
        if have[:1] != need[:1]:
            problems.append(
                (
                    Status.FAIL,
                    f"{label} {lib.version} is loaded but TensorFlow "
                    f"{ctx.tf_version} was built and tested with {want}",
                )
            )
        elif have[:2] < need[:2]:
            problems.append(
                (
                    Status.WARN,
                    f"{label} {lib.version} is older than the {want} "
                    f"TensorFlow {ctx.tf_version} was tested with",
                )
            )
    note = "" if exact else f" (nearest row: TF {row['tensorflow']})"
    tested = f"tested with CUDA {row['cuda']}, cuDNN {row['cudnn']}{note}"
    compared = [k for k in ("cudart", "cudnn") if k in rows and rows[k].version]
    if not problems:
        found = (
            "the libraries found match"
            if compared
            else "no CUDA runtime or cuDNN found to compare (see the lib.* rows)"
        )
        status = Status.OK if compared else Status.SKIP
        return [
            Check(
                "tf.compat",
                title,
                status,
                f"TensorFlow {ctx.tf_version}: {tested}; {found}",
                see=see,
                details={"row": row},
            )
        ]
    worst = Status.FAIL if any(s is Status.FAIL for s, _ in problems) else Status.WARN
    return [
        Check(
            "tf.compat",
            title,
            worst,
            "; ".join(m for _, m in problems) + f" ({tested})",
            fix=f"pip install 'tensorflow[and-cuda]{_tf_pin(ctx)}'",
            see=see,
            details={"row": row},
        )
    ]


NO_GPU = "this machine has no NVIDIA GPU (none on its PCI bus)"


def no_gpu_here(ctx: DoctorContext) -> bool:
    """A Linux machine (not WSL, whose GPU is Windows') with no NVIDIA device on its PCI
    bus: no driver, CUDA library or container flag would give TensorFlow a GPU, so the
    rows that would fix one say so instead of a fix."""
    return ctx.platform.system == "Linux" and ctx.platform.nvidia_pci_devices == 0


# --- 3. driver ---------------------------------------------------------------------------
def check_driver(ctx: DoctorContext) -> list[Check]:
    title = "NVIDIA driver"
    see = "nvidia-smi"
    if ctx.platform.system == "Darwin":
        return [Check("driver", title, Status.SKIP, "macOS has no NVIDIA CUDA driver")]
    drv = ctx.driver
    if not drv.available and no_gpu_here(ctx):
        return [
            Check(
                "driver",
                title,
                Status.SKIP,
                f"{NO_GPU}, so there is no driver to fix: TensorFlow runs on the CPU here",
                see="lspci | grep -i nvidia",
            )
        ]
    nvml_lib = ctx.loader.resolve("libnvidia-ml.so.1") if not drv.available else None
    if nvml_lib is not None and nvml_lib.error:
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"NVML cannot start: libnvidia-ml.so.1 resolves first to {nvml_lib.path} "
                f"(via {nvml_lib.origin}), which is {nvml_lib.error}",
                fix=f"move {nvml_lib.path} out of the way, or reinstall the NVIDIA driver",
                see=f"file {nvml_lib.path}",
            )
        ]
    if not drv.available:
        fix = (
            "install the NVIDIA driver (Ubuntu: sudo ubuntu-drivers install; others: the "
            "distribution's nvidia-driver package), then reboot"
        )
        if ctx.platform.container:
            fix = (
                "start the container with GPU access: docker run --gpus all ... "
                "(needs the NVIDIA Container Toolkit on the host)"
            )
        if ctx.platform.wsl:
            fix = "install or update the NVIDIA driver on Windows (not inside WSL)"
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"No usable NVIDIA driver: NVML cannot start ({drv.error})",
                fix=fix,
                see=see,
            )
        ]
    finding = f"driver {drv.driver_version}, supports CUDA up to {drv.cuda_version}"
    need = (ctx.build_info or {}).get("cuda_version")
    if not need or not drv.cuda_version:
        return [Check("driver", title, Status.OK, finding, see=see)]
    have_v, need_v = version_tuple(drv.cuda_version), version_tuple(str(need))
    minimum = data.load("cuda_drivers")["minimum"].get(str(need_v[0]), {})
    key = "windows" if ctx.platform.system == "Windows" else "linux"
    if have_v[:1] < need_v[:1]:
        return [
            Check(
                "driver",
                title,
                Status.FAIL,
                f"{finding}; TensorFlow {ctx.tf_version} needs CUDA {need_v[0]}.x, "
                f"which needs driver >= {minimum.get(key) or 'the CUDA release notes say'}",
                fix=f"upgrade the NVIDIA driver to >= {minimum.get(key)}",
                see=see,
            )
        ]
    if have_v[:2] < need_v[:2]:
        return [
            Check(
                "driver",
                title,
                Status.WARN,
                f"{finding}; TensorFlow was built with CUDA {need}. CUDA minor version "
                "compatibility lets it run, but PTX from the newer toolkit cannot be "
                "JIT-compiled by this driver",
                fix=f"upgrade the NVIDIA driver to one that supports CUDA {need_v[0]}.{need_v[1]}",
                see=see,
            )
        ]
    return [Check("driver", title, Status.OK, f"{finding}; TensorFlow needs CUDA {need}", see=see)]


# --- 4. libraries ------------------------------------------------------------------------
SEARCHED = (
    "LD_LIBRARY_PATH, TensorFlow's RUNPATH (its pip nvidia-* wheels), the ld.so cache "
    "and the default directories"
)


def check_libraries(ctx: DoctorContext) -> list[Check]:
    """One row for the libraries that load, one per library that does not.

    When three or more are simply absent (no CUDA wheels installed at all), they are
    grouped into one row whose fix installs them all.
    """
    if ctx.tf_dir is None or ctx.cuda_major is None:
        why = (
            "TensorFlow is not installed"
            if ctx.tf_dir is None
            else "this TensorFlow build names no CUDA version"
        )
        return [Check("lib", "CUDA libraries TensorFlow loads", Status.SKIP, why)]
    if no_gpu_here(ctx):
        return [
            Check(
                "lib",
                "CUDA libraries TensorFlow loads",
                Status.SKIP,
                f"{NO_GPU}: TensorFlow would load no CUDA library (nothing to install)",
            )
        ]
    all_fix = f"pip install 'tensorflow[and-cuda]{_tf_pin(ctx)}'"
    rows = ctx.library_rows
    details = {r.soname: _library_details(r) for r in rows}
    absent = [r for r in rows if r.resolution.path is None]
    group = len(absent) >= 3
    loaded = [_loaded_line(r) for r in rows if _loads(r)]
    out: list[Check] = []
    if loaded:
        out.append(
            Check(
                "lib.loaded",
                "CUDA libraries that load",
                Status.OK,
                f"{len(loaded)} of {len(rows)} resolve and load: " + "; ".join(loaded),
                see="TF_CPP_VMODULE=dso_loader=1 python -c 'import tensorflow'",
                details={"libraries": details},
            )
        )
    if group:
        out.append(_absent_row(ctx, absent, details, all_fix))
    for r in rows:
        if not (group and r.resolution.path is None) and not _loads(r):
            out.append(_library_failure(ctx, r, details[r.soname], all_fix))
    out.extend(_renamed_rows(ctx, all_fix))
    out.extend(_libcuda_rows(ctx))
    return out


def _library_details(row: LibraryRow) -> dict[str, object]:
    res = row.resolution
    return {
        "path": res.path,
        "realpath": res.realpath,
        "origin": res.origin,
        "version": row.version,
        "provider": row.provider,
        "shadowed": list(res.shadowed),
        "wrong_arch": list(res.wrong_arch),
        "missing": [f"{m.soname} (needed by {m.needed_by})" for m in res.missing],
        "dlopen_error": row.dlopen_error,
    }


def _loads(row: LibraryRow) -> bool:
    res = row.resolution
    return res.path is not None and not res.missing and not res.error and not row.dlopen_error


def _loaded_line(row: LibraryRow) -> str:
    by = (
        f" [{row.provider}]"
        if row.provider
        else (f" [version {row.version}]" if row.version else "")
    )
    return f"{row.soname} <- {row.resolution.path}{by} via {row.resolution.origin}"


def _library_failure(
    ctx: DoctorContext, row: LibraryRow, details: dict[str, object], all_fix: str
) -> Check:
    """Why one library does not load: not found, a dependency missing, or dlopen's error."""
    from tfaccel.doctor.probes import requirement_for

    res, tf = row.resolution, ctx.tf_dist
    req = requirement_for(tf, row.wheel or "", extra="and-cuda") if tf and row.wheel else None
    pip_fix = f"pip install '{req.name}{req.specifier}'" if req is not None else all_fix
    key = f"lib.{row.key}"
    if res.path is None:
        skipped = (
            f"; skipped (wrong architecture): {', '.join(res.wrong_arch)}" if res.wrong_arch else ""
        )
        finding = f"{row.soname} is not found in {SEARCHED}{skipped}"
        see = f"ldconfig -p | grep {row.soname}"
        return Check(key, row.soname, Status.FAIL, finding, pip_fix, see, details)
    if res.missing:
        miss = "; ".join(f"{m.soname} (needed by {m.needed_by})" for m in res.missing)
        return Check(
            key,
            row.soname,
            Status.FAIL,
            f"{row.soname} exists at {res.path} but cannot load: its dependency {miss} is missing",
            fix=f"install the library that provides {res.missing[0].soname} "
            f"(or reinstall: {pip_fix})",
            see=f"ldd {res.path} | grep 'not found'",
            details=details,
        )
    if res.error and res.path:
        return _unloadable_file(row, key, details)
    finding = f"{row.soname} at {res.path} fails to load: {row.dlopen_error}"
    return Check(key, row.soname, Status.FAIL, finding, pip_fix, f"ldd {res.path}", details)


def _unloadable_file(row: LibraryRow, key: str, details: dict[str, object]) -> Check:
    """The first file the loader meets is no library (or a dependency's is): ld.so stops
    there, so a good copy later in the search order is never reached."""
    res = row.resolution
    path = res.path or ""
    bad = res.unloadable or path
    if bad != path:  # a dependency's
        finding = f"{row.soname} at {path} cannot load: {res.error}"
    else:
        later = f"; the copy at {res.shadowed[0]} is never reached" if res.shadowed else ""
        finding = (
            f"{row.soname} resolves first to {path} (via {res.origin}), which is "
            f"{res.error}: the loader stops there{later}"
        )
    fix = f"move {bad} out of the way (or take {os.path.dirname(bad)} off LD_LIBRARY_PATH)"
    return Check(key, row.soname, Status.FAIL, finding, fix, f"file {bad}", details)


def _absent_row(
    ctx: DoctorContext,
    absent: list[LibraryRow],
    details: dict[str, dict[str, object]],
    all_fix: str,
) -> Check:
    names = ", ".join(r.soname for r in absent)
    return Check(
        "lib.missing",
        f"{len(absent)} CUDA libraries",
        Status.FAIL,
        f"{len(absent)} of the {len(ctx.library_rows)} CUDA libraries "
        f"TensorFlow {ctx.tf_version} loads are not found in {SEARCHED}: "
        f"{names}. The CUDA {ctx.cuda_major} pip wheels are not installed",
        fix=all_fix,
        see="pip list | grep -i nvidia",
        details={"libraries": {r.soname: details[r.soname] for r in absent}},
    )


def _renamed_rows(ctx: DoctorContext, all_fix: str) -> list[Check]:
    renamed = [
        r
        for r in ctx.library_rows
        if r.resolution.realpath and _renamed(r.soname, r.resolution.realpath)
    ]
    if not renamed:
        return []
    listing = "; ".join(
        f"{r.soname} -> {r.resolution.realpath}" + (f" [{r.provider}]" if r.provider else "")
        for r in renamed
    )
    return [
        Check(
            "lib.renamed",
            "CUDA libraries under another version's name",
            Status.WARN,
            f"{listing}. A library of another major version is linked in under the name "
            f"TensorFlow asks for: it loads, but its ABI is not the one TensorFlow "
            f"{ctx.tf_version} was built against, so some calls may fail or misbehave",
            fix=all_fix,
            see="ls -l " + " ".join(r.resolution.path or "" for r in renamed),
        )
    ]


def _libcuda_rows(ctx: DoctorContext) -> list[Check]:
    """libcuda.so.1, the driver's library (Linux)."""
    drv = ctx.driver_library
    title = "libcuda.so.1 (driver API)"
    if ctx.platform.system != "Linux" or no_gpu_here(ctx):
        return []
    if drv.path is None:
        fix = (
            "update the NVIDIA driver on Windows"
            if ctx.platform.wsl
            else "install the NVIDIA driver (it provides libcuda.so.1)"
        )
        finding = "libcuda.so.1, which the NVIDIA driver installs, is not found"
        return [
            Check("lib.libcuda", title, Status.FAIL, finding, fix, "ldconfig -p | grep libcuda")
        ]
    if drv.error:
        finding = f"libcuda.so.1 resolves first to {drv.path} (via {drv.origin}): {drv.error}"
        fix = f"move {drv.path} out of the way, or reinstall the NVIDIA driver"
        return [Check("lib.libcuda", title, Status.FAIL, finding, fix, f"file {drv.path}")]
    if drv.missing:
        finding = f"libcuda.so.1 at {drv.path} lacks {drv.missing[0].soname}"
        return [Check("lib.libcuda", title, Status.FAIL, finding, see=f"ldd {drv.path}")]
    finding = f"{drv.path} (found through {drv.origin})"
    return [Check("lib.libcuda", title, Status.OK, finding, see="ldconfig -p | grep libcuda")]


def _renamed(soname: str, realpath: str) -> bool:
    """True when `soname` (libcublas.so.12) is a link to another major (libcublas.so.13.1)."""
    want = soname.split(".so.", 1)
    name = os.path.basename(realpath)
    if len(want) != 2 or ".so." not in name:
        return False
    stem, major = want[0], want[1].split(".")[0]
    have_stem, have_ver = name.split(".so.", 1)
    return have_stem == stem and have_ver.split(".")[0] != major


def check_duplicates(ctx: DoctorContext) -> list[Check]:
    title = "Duplicate CUDA library copies"
    if not ctx.library_rows:
        return [Check("lib.duplicates", title, Status.SKIP, "no CUDA libraries to compare")]
    conflicts: list[str] = []
    details: dict[str, list[dict[str, str | None]]] = {}
    for row in ctx.library_rows:
        copies = ctx.copies_of(row.soname)
        versions = {c.version for c in copies if c.version}
        if len(versions) <= 1:
            continue
        used = row.resolution.realpath
        mark = " (loaded)" if _loads(row) else " (taken first; does not load)"
        listing = ", ".join(
            f"{c.version} at {c.path}{mark if c.realpath == used else ''}" for c in copies
        )
        conflicts.append(f"{row.soname}: {listing}")
        details[row.soname] = [
            {"path": c.path, "version": c.version, "provider": c.provider} for c in copies
        ]
    if not conflicts:
        return [
            Check(
                "lib.duplicates",
                title,
                Status.OK,
                "no library has copies of different versions",
                details=details,
            )
        ]
    return [
        Check(
            "lib.duplicates",
            title,
            Status.WARN,
            "copies of different versions: " + " | ".join(conflicts) + ". Another "
            "framework's wheels or a system CUDA can win the search and break TensorFlow",
            fix="keep one copy: remove the other package, or unset LD_LIBRARY_PATH",
            see="pip list | grep -i nvidia; ldconfig -p | grep -E 'cudnn|cublas'",
            details=details,
        )
    ]


def check_ld_library_path(ctx: DoctorContext) -> list[Check]:
    title = "LD_LIBRARY_PATH"
    value = ctx.env.get("LD_LIBRARY_PATH")
    if not value:
        return [
            Check(
                "env.ld_library_path",
                title,
                Status.OK,
                "not set: TensorFlow loads the CUDA libraries from its own wheels and the system",
            )
        ]
    runpath_dirs = {c.directory for c in ctx.tf_caller[1]}
    shadows: list[str] = []
    for row in ctx.library_rows:
        res = row.resolution
        if res.origin == "LD_LIBRARY_PATH" and any(
            os.path.dirname(p) in runpath_dirs for p in res.shadowed
        ):
            shadows.append(f"{row.soname} from {os.path.dirname(res.path or '')}")
    missing = [p for p in value.split(":") if p and not os.path.isdir(p)]
    note = f"; entries that do not exist: {', '.join(missing)}" if missing else ""
    closed = [f"{p} ({why})" for p in value.split(":") if p and (why := _unlistable(p))]
    if closed and not shadows:
        return [
            Check(
                "env.ld_library_path",
                title,
                Status.WARN,
                "the loader cannot read "
                + ", ".join(closed)
                + ": it skips such a directory without a word, so no library there is "
                f"ever loaded{note}",
                fix="give read and search rights (chmod a+rx DIR) or drop it from LD_LIBRARY_PATH",
                see="ls -ld " + " ".join(c.split(" (")[0] for c in closed),
            )
        ]
    if shadows:
        return [
            Check(
                "env.ld_library_path",
                title,
                Status.WARN,
                "LD_LIBRARY_PATH comes before TensorFlow's own pip wheels and shadows "
                f"them for: {'; '.join(shadows)}{note}"
                + (f"; the loader cannot read {', '.join(closed)}" if closed else ""),
                fix="unset LD_LIBRARY_PATH  (or drop the CUDA entries from it)",
                see="echo $LD_LIBRARY_PATH",
            )
        ]
    return [
        Check(
            "env.ld_library_path",
            title,
            Status.OK,
            f"set ({value}); it shadows none of TensorFlow's pip wheel libraries{note}",
            see="echo $LD_LIBRARY_PATH",
        )
    ]


def _unlistable(path: str) -> str | None:
    """Why the dynamic loader cannot search an existing directory, or None."""
    if not os.path.isdir(path):
        return None
    try:
        os.listdir(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_nvcc(ctx: DoctorContext) -> list[Check]:
    title = "nvcc and ptxas vs the CUDA TensorFlow uses"
    exe, release = ctx.nvcc
    cuda = (ctx.build_info or {}).get("cuda_version")
    ptx = f"; XLA's ptxas: {ctx.ptxas}" if ctx.ptxas else ""
    if exe is None:
        if ctx.ptxas is None and cuda:
            return [
                Check(
                    "cuda.nvcc",
                    title,
                    Status.WARN,
                    "no nvcc on PATH and no ptxas found: XLA falls back to the driver's "
                    "PTX compiler (slower compiles, and some kernels may be missing)",
                    fix=f"pip install 'nvidia-cuda-nvcc-cu{ctx.cuda_major}'",
                    see="which nvcc ptxas",
                )
            ]
        return [
            Check(
                "cuda.nvcc",
                title,
                Status.OK,
                "no nvcc on PATH; TensorFlow does not need it" + ptx,
                see="which nvcc",
            )
        ]
    if not cuda:
        return [
            Check(
                "cuda.nvcc",
                title,
                Status.OK,
                f"nvcc {release} ({exe}); this TensorFlow is built without CUDA, so nvcc "
                "plays no part in it" + ptx,
                see="nvcc --version",
            )
        ]
    if not any(r.key == "cudart" and _loads(r) for r in ctx.library_rows):
        return [
            Check(
                "cuda.nvcc",
                title,
                Status.OK,
                f"nvcc {release} ({exe}); TensorFlow is built for CUDA {cuda} but no CUDA "
                "runtime loads (the library rows say why); nvcc does not change that" + ptx,
                see="nvcc --version",
            )
        ]
    if release and version_tuple(release)[:2] != version_tuple(str(cuda))[:2]:
        return [
            Check(
                "cuda.nvcc",
                title,
                Status.OK,
                f"nvcc {release} ({exe}) differs from the CUDA {cuda} runtime TensorFlow "
                "loads. This is normal: pip's TensorFlow brings its own CUDA libraries and "
                "never uses nvcc; it matters only for code you compile yourself" + ptx,
                see="nvcc --version",
            )
        ]
    return [
        Check(
            "cuda.nvcc",
            title,
            Status.OK,
            f"nvcc {release} ({exe}); TensorFlow's runtime is CUDA {cuda}" + ptx,
            see="nvcc --version",
        )
    ]


def check_conda(ctx: DoctorContext) -> list[Check]:
    title = "conda and pip mix"
    prefix = ctx.env.get("CONDA_PREFIX")
    if not prefix:
        return [Check("env.conda", title, Status.SKIP, "not a conda environment")]
    pkgs = ctx.conda
    cuda_pkgs = {k: v for k, v in pkgs.items() if not k.startswith("tensorflow")}
    tf_by_pip = ctx.tf_dist is not None and (ctx.tf_dist.installer or "") == "pip"
    if cuda_pkgs and tf_by_pip:
        listing = ", ".join(f"{k} {v}" for k, v in sorted(cuda_pkgs.items()))
        return [
            Check(
                "env.conda",
                title,
                Status.WARN,
                f"TensorFlow came from pip, but conda also installed {listing} in "
                f"{prefix}/lib; whichever the loader finds first wins",
                fix="conda remove cudatoolkit cudnn  (let pip's nvidia-* wheels provide "
                "CUDA), or install TensorFlow from conda-forge only",
                see="conda list | grep -iE 'cuda|cudnn|tensorflow'",
            )
        ]
    return [
        Check(
            "env.conda",
            title,
            Status.OK,
            f"conda environment {prefix}; no conflicting CUDA packages",
            see="conda list | grep -iE 'cuda|cudnn|tensorflow'",
        )
    ]


# --- 5. platform -------------------------------------------------------------------------
def check_platform(ctx: DoctorContext) -> list[Check]:
    title = "Platform"
    p = ctx.platform
    if p.system == "Windows":
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
        return [Check("platform", title, Status.OK, f"native Windows {p.release}")]
    if p.system == "Darwin":
        return [
            Check(
                "platform",
                title,
                Status.WARN,
                "macOS: no CUDA; Apple GPUs are reached through tensorflow-metal",
                fix="pip install tensorflow-metal",
            )
        ]
    if p.wsl:
        if not p.wsl_libcuda:
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
    if p.container and not p.nvidia_device_nodes and no_gpu_here(ctx):
        return [
            Check(
                "platform",
                title,
                Status.OK,
                f"Linux {p.release} ({p.machine}), a {p.container} container; {NO_GPU}, "
                "so there is none to pass into it",
                see="uname -a",
            )
        ]
    if p.container and not p.nvidia_device_nodes:
        return [
            Check(
                "platform",
                title,
                Status.FAIL,
                f"running in a {p.container} container with no /dev/nvidia* device: the "
                "container was started without GPU access",
                fix="docker run --gpus all ...  (Kubernetes: request nvidia.com/gpu)",
                see="ls -l /dev/nvidia*",
            )
        ]
    where = f"{p.container} container" if p.container else "no container"
    return [
        Check(
            "platform",
            title,
            Status.OK,
            f"Linux {p.release} ({p.machine}), {where}",
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
    entries = [e.strip() for e in value.split(",") if e.strip()]
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
    usable = len(visible_indices([g.uuid for g in gpus], value)) if gpus else _well_formed(entries)
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
    return [
        Check(
            "env.cuda_visible_devices",
            title,
            Status.OK,
            f"{value!r}: {len(entries)} GPU(s) visible",
            see=see,
        )
    ]


def _well_formed(entries: list[str]) -> int:
    """Without NVML to match against: how many leading entries could name a GPU (an
    index not seen before, or a GPU-/MIG- UUID prefix)."""
    seen: set[str] = set()
    for n, e in enumerate(entries):
        ok = e.isdigit() or (e.startswith(("GPU-", "MIG-")) and len(e) > 4)
        if not ok or e in seen:
            return n
        seen.add(e)
    return len(entries)


def check_xla_flags(ctx: DoctorContext) -> list[Check]:
    """XLA aborts the whole process ("Unknown flag in XLA_FLAGS") at its first
    compilation when a flag it does not know is set: flags copied from an older guide
    (e.g. --xla_gpu_enable_cuda_graphs, since replaced) crash every jit_compile model."""
    title = "XLA flags"
    set_vars = {v: ctx.env[v] for v in probes.XLA_FLAG_VARIABLES if ctx.env.get(v, "").strip()}
    see = "echo $XLA_FLAGS $TF_XLA_FLAGS"
    if not set_vars:
        return [Check("env.xla_flags", title, Status.OK, "XLA_FLAGS and TF_XLA_FLAGS not set")]
    probe = ctx.xla_flags
    shown = "; ".join(f"{k}={v}" for k, v in set_vars.items())
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
        kept = " ".join(t for t in set_vars.get(probe.variable, "").split() if t not in bad)
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
    p = ctx.platform
    if p.system != "Linux":
        return [Check("gpu.mps", title, Status.SKIP, "MPS exists on Linux only")]
    if p.mps_pipe_dirs or p.mps_processes:
        found = ", ".join(list(p.mps_processes) + [f"pipe {d}" for d in p.mps_pipe_dirs])
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
    broken = [g for g in drv.gpus if g.error]
    listing = "; ".join(
        f"GPU {g.index}: {g.name}, compute capability {g.compute_capability}, "
        f"{(g.memory_total_mib or 0) / 1024:.0f} GiB"
        for g in drv.gpus
        if not g.error
    )
    if broken:
        bad = "; ".join(f"GPU {g.index}: {g.error}" for g in broken)
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


def _capability_verdict(cc: str, compiled: list[str]) -> tuple[Status, str]:
    """Judge a GPU's compute capability against TF's compiled sm_/compute_ list."""
    major, minor = (int(x) for x in cc.split("."))
    want = major * 10 + minor
    sass = sorted(
        int("".join(c for c in e[3:] if c.isdigit())) for e in compiled if e.startswith("sm_")
    )
    ptx = sorted(
        int("".join(c for c in e[8:] if c.isdigit())) for e in compiled if e.startswith("compute_")
    )
    if want in sass:
        return Status.OK, f"sm_{want} machine code is compiled in"
    same_major = [s for s in sass if s // 10 == major and s <= want]
    if same_major:
        return Status.OK, (
            f"sm_{max(same_major)} machine code runs on {cc} (binary compatible "
            "within a major version)"
        )
    usable_ptx = [p for p in ptx if p <= want]
    if usable_ptx:
        return Status.WARN, (
            f"no sm_{want} machine code: kernels are JIT-compiled from "
            f"compute_{max(usable_ptx)} PTX on first use (can take many minutes "
            "the first time; cached afterwards)"
        )
    return Status.FAIL, (
        f"no machine code or PTX for compute capability {cc}: TensorFlow "
        "cannot run kernels on this GPU"
    )


def check_capability(ctx: DoctorContext) -> list[Check]:
    title = "GPU compute capability vs TensorFlow's compiled list"
    compiled = list((ctx.build_info or {}).get("cuda_compute_capabilities") or [])
    gpus: list[tuple[int, object, object]] = [
        (g.index, g.name, g.compute_capability) for g in ctx.driver.gpus if g.compute_capability
    ]
    if not gpus:
        gpus = [
            (i, g.get("name"), g.get("compute_capability"))
            for i, g in enumerate(ctx.tf_runtime.gpus)
            if g.get("compute_capability")
        ]
    if not compiled or not gpus:
        why = "no compiled capability list" if not compiled else "no GPU to compare"
        return [Check("gpu.compute_capability", title, Status.SKIP, why, see=TF_BUILD)]
    out: list[Check] = []
    for index, name, cc in gpus:
        status, text = _capability_verdict(str(cc), compiled)
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
                    + str(cc).replace(".", "")
                    + " (NVIDIA's NGC container)"
                )
        elif status is Status.FAIL:
            fix = "use a TensorFlow release or build that targets this GPU"
        out.append(
            Check(
                f"gpu.compute_capability.{index}",
                f"GPU {index} compute capability",
                status,
                f"{name} is {cc}; TensorFlow was compiled for {', '.join(compiled)}: {text}",
                fix=fix,
                see=TF_BUILD,
                details={"compute_capability": cc, "compiled": compiled},
            )
        )
    return out


# --- 6. the question itself --------------------------------------------------------------
_CAUSE_ORDER = (
    "tf.install",
    "tf.requirements",
    "tf.build",
    "platform",
    "env.cuda_visible_devices",
    "driver",
    "lib.libcuda",
    "gpu.state",
    "lib.",
    "gpu.compute_capability",
)


def _reinstall(ctx: DoctorContext) -> str:
    """TensorFlow installed again: with its CUDA wheels where there is a GPU to use."""
    extra = "" if no_gpu_here(ctx) else "[and-cuda]"
    return f"pip install --force-reinstall 'tensorflow{extra}{_tf_pin(ctx)}'"


def check_tf_sees_gpu(ctx: DoctorContext, earlier: list[Check]) -> list[Check]:
    title = "TensorFlow sees the GPU"
    if ctx.tf_dir is None:
        return [Check("tf.gpus", title, Status.SKIP, "TensorFlow is not installed")]
    rt = ctx.tf_runtime
    if not rt.ran:
        return [Check("tf.gpus", title, Status.SKIP, "not run (--no-import)", see=TF_GPUS)]
    if not rt.error and not rt.gpus and no_gpu_here(ctx):
        finding = f"{NO_GPU}: TensorFlow {rt.version} runs on the CPU, as it should here"
        return [Check("tf.gpus", title, Status.SKIP, finding, see=TF_GPUS)]
    details = {"tf_log": list(rt.log_lines), "import_seconds": round(rt.seconds, 1)}
    if rt.error:
        unmet = next((c for c in earlier if c.id == "tf.requirements" and c.fix), None)
        why = f" (check tf.requirements: {unmet.finding})" if unmet else ""
        return [
            Check(
                "tf.gpus",
                title,
                Status.FAIL,
                f"importing TensorFlow failed: {rt.error}{why}",
                # the package at fault, where a requirement names it; a reinstall
                # (which also pulls the CUDA wheels) only where none does
                fix=unmet.fix if unmet else _reinstall(ctx),
                see="python -c 'import tensorflow'",
                details=details,
            )
        ]
    if rt.gpus:
        names = ", ".join(
            f"{g.get('device')}: {g.get('name')} (compute capability {g.get('compute_capability')})"
            for g in rt.gpus
        )
        return [
            Check(
                "tf.gpus",
                title,
                Status.OK,
                f"TensorFlow {rt.version} sees {len(rt.gpus)} GPU(s): {names}",
                see=TF_GPUS,
                details=details,
            )
        ]
    cause = None
    for prefix in _CAUSE_ORDER:
        for c in earlier:
            if c.status is Status.FAIL and (
                c.id == prefix
                or (prefix.endswith(".") and c.id.startswith(prefix))
                or c.id.startswith(prefix + ".")
            ):
                cause = c
                break
        if cause:
            break
    if cause is not None:
        finding = f"TensorFlow sees no GPU. Cause: {cause.finding} (check {cause.id})"
        return [
            Check(
                "tf.gpus", title, Status.FAIL, finding, fix=cause.fix, see=TF_GPUS, details=details
            )
        ]
    hint = " TensorFlow's log says: " + rt.log_lines[-1] if rt.log_lines else ""
    return [
        Check(
            "tf.gpus",
            title,
            Status.FAIL,
            "TensorFlow sees no GPU, and no check above found why." + hint,
            fix="run with TF_CPP_MIN_LOG_LEVEL=0 and TF_CPP_VMODULE=dso_loader=1 to see "
            "each library TensorFlow tries to open",
            see=TF_GPUS,
            details=details,
        )
    ]


CHECKS: tuple[CheckFn, ...] = (
    check_tf_install,
    check_keras,
    check_requirements,
    check_keras_backend,
    check_companions,
    check_tfaccel_support,
    check_build,
    check_driver,
    check_gpu_state,
    check_libraries,
    check_compat,
    check_duplicates,
    check_ld_library_path,
    check_nvcc,
    check_conda,
    check_platform,
    check_visible_devices,
    check_shadowing,
    check_xla_flags,
    check_mps,
    check_capability,
)

__all__ = ["CHECKS", "check_tf_sees_gpu"]
