"""The CUDA libraries TensorFlow loads: found, loadable, one version each, and what the
search path and toolchain do to them."""

from __future__ import annotations

import os

from tfaccel.doctor.checks.base import NO_GPU, no_gpu_here, tf_pin
from tfaccel.doctor.context import DoctorContext, LibraryRow, version_tuple
from tfaccel.doctor.model import Check, Status

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
    all_fix = f"pip install 'tensorflow[and-cuda]{tf_pin(ctx)}'"
    rows = ctx.library_rows
    details = {row.soname: _library_details(row) for row in rows}
    absent = [row for row in rows if row.resolution.path is None]
    group = len(absent) >= 3
    loaded = [_loaded_line(row) for row in rows if _loads(row)]
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
    for row in rows:
        if not (group and row.resolution.path is None) and not _loads(row):
            out.append(_library_failure(ctx, row, details[row.soname], all_fix))
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
        "missing": [f"{missing.soname} (needed by {missing.needed_by})" for missing in res.missing],
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
        miss = "; ".join(
            f"{missing.soname} (needed by {missing.needed_by})" for missing in res.missing
        )
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
    names = ", ".join(row.soname for row in absent)
    return Check(
        "lib.missing",
        f"{len(absent)} CUDA libraries",
        Status.FAIL,
        f"{len(absent)} of the {len(ctx.library_rows)} CUDA libraries "
        f"TensorFlow {ctx.tf_version} loads are not found in {SEARCHED}: "
        f"{names}. The CUDA {ctx.cuda_major} pip wheels are not installed",
        fix=all_fix,
        see="pip list | grep -i nvidia",
        details={"libraries": {row.soname: details[row.soname] for row in absent}},
    )


def _renamed_rows(ctx: DoctorContext, all_fix: str) -> list[Check]:
    renamed = [
        row
        for row in ctx.library_rows
        if row.resolution.realpath and _renamed(row.soname, row.resolution.realpath)
    ]
    if not renamed:
        return []
    listing = "; ".join(
        f"{row.soname} -> {row.resolution.realpath}"
        + (f" [{row.provider}]" if row.provider else "")
        for row in renamed
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
            see="ls -l " + " ".join(row.resolution.path or "" for row in renamed),
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
        versions = {copy.version for copy in copies if copy.version}
        if len(versions) <= 1:
            continue
        used = row.resolution.realpath
        mark = " (loaded)" if _loads(row) else " (taken first; does not load)"
        listing = ", ".join(
            f"{copy.version} at {copy.path}{mark if copy.realpath == used else ''}"
            for copy in copies
        )
        conflicts.append(f"{row.soname}: {listing}")
        details[row.soname] = [
            {"path": copy.path, "version": copy.version, "provider": copy.provider}
            for copy in copies
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
    runpath_dirs = {candidate.directory for candidate in ctx.tf_caller[1]}
    shadows: list[str] = []
    for row in ctx.library_rows:
        res = row.resolution
        if res.origin == "LD_LIBRARY_PATH" and any(
            os.path.dirname(path) in runpath_dirs for path in res.shadowed
        ):
            shadows.append(f"{row.soname} from {os.path.dirname(res.path or '')}")
    missing = [path for path in value.split(":") if path and not os.path.isdir(path)]
    note = f"; entries that do not exist: {', '.join(missing)}" if missing else ""
    closed = [f"{path} ({why})" for path in value.split(":") if path and (why := _unlistable(path))]
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
                see="ls -ld " + " ".join(candidate.split(" (")[0] for candidate in closed),
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
    if not any(row.key == "cudart" and _loads(row) for row in ctx.library_rows):
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
    cuda_pkgs = {
        name: version for name, version in pkgs.items() if not name.startswith("tensorflow")
    }
    tf_by_pip = ctx.tf_dist is not None and (ctx.tf_dist.installer or "") == "pip"
    if cuda_pkgs and tf_by_pip:
        listing = ", ".join(f"{name} {version}" for name, version in sorted(cuda_pkgs.items()))
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
