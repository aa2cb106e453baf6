"""The build: what TensorFlow was compiled for, and the CUDA and cuDNN it was tested with."""

from __future__ import annotations

from tfaccel import data
from tfaccel.doctor.checks.base import TF_BUILD, tf_pin
from tfaccel.doctor.context import DoctorContext, version_tuple
from tfaccel.doctor.model import Check, Status


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


def _tested_libraries(row: dict[str, str]) -> list[tuple[str, str, str]]:
    """(library, how a finding names it, the version tested) for each library of
    cuda_libraries.json compared with a column of TensorFlow's tested-build row (its
    `tested_as`): the rule lives in the data, one row a library."""
    table = data.load("cuda_libraries")["libraries"]
    return [
        (key, spec["tested_as"]["label"], row[spec["tested_as"]["column"]])
        for key, spec in table.items()
        if "tested_as" in spec and row.get(spec["tested_as"]["column"])
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
    rows = {lib_row.key: lib_row for lib_row in ctx.library_rows}
    tested_libraries = _tested_libraries(row)
    for key, label, want in tested_libraries:
        lib = rows.get(key)
        if lib is None or lib.resolution.path is None or not lib.version:
            continue
        have, need = version_tuple(lib.version), version_tuple(want)
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
    compared = [
        lib_key for lib_key, *_ in tested_libraries if lib_key in rows and rows[lib_key].version
    ]
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
    worst = Status.FAIL if any(severity is Status.FAIL for severity, _ in problems) else Status.WARN
    return [
        Check(
            "tf.compat",
            title,
            worst,
            "; ".join(message for _, message in problems) + f" ({tested})",
            fix=f"pip install 'tensorflow[and-cuda]{tf_pin(ctx)}'",
            see=see,
            details={"row": row},
        )
    ]
