"""Finding and checking the profile files in a log directory.

TensorFlow writes `LOGDIR/plugins/profile/<run>/<host>.xplane.pb`. LOGDIR may also be
a run directory or one .xplane.pb file. Several runs: the newest is used and the report
says so (or `run=` picks one). Missing, empty, truncated or foreign files are errors
that name the file and what was expected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError


@dataclass(frozen=True)
class ProfileRun:
    name: str
    files: tuple[Path, ...]
    other_runs: tuple[str, ...] = ()
    note: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # tfaccel.json beside the files


def _runs(root: Path) -> dict[str, list[Path]]:
    """The runs under a log directory: folder (relative to it) -> its *.xplane.pb files."""
    runs: dict[str, list[Path]] = {}
    for path in root.rglob("*.xplane.pb"):
        runs.setdefault(str(path.parent.relative_to(root)), []).append(path)
    return runs


def _check_name(path: Path) -> None:
    """XProf's converters take UTF-8 paths: a name that is not (bytes the file system
    holds but no UTF-8 text spells) is said here, not as their traceback."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = str(path).encode("utf-8", "backslashreplace").decode()
        raise InputError(
            f"The path {shown} is not UTF-8 text",
            expected="a log directory whose path is UTF-8 (XProf reads no other)",
            received=shown,
            hint="rename the folder, or move the run to another",
        ) from exc


def run_names(logdir: str | Path) -> set[str]:
    """The runs (folders holding *.xplane.pb files) under LOGDIR; empty if none."""
    root = Path(logdir)
    return set(_runs(root)) if root.is_dir() else set()


def find_run(logdir: str | Path, run: str | None = None) -> ProfileRun:
    root = Path(logdir)
    if not root.exists():
        raise InputError(
            f"{root} does not exist",
            expected="a log directory written by tfaccel profile or TensorFlow's profiler",
            received=str(root),
        )
    _check_name(root)
    if root.is_file():
        _check_file(root)
        return ProfileRun(root.parent.name, (root,))
    try:
        os.listdir(root)
    except OSError as exc:
        raise InputError(
            f"Cannot read the folder {root}",
            expected="a log directory this user can list and read",
            received=f"{type(exc).__name__}: {exc.strerror or exc}",
        ) from exc
    runs = _runs(root)
    if not runs:
        found = sorted(path.name for path in root.rglob("*") if path.is_file())[:5]
        raise InputError(
            f"No profile in {root}",
            expected="LOGDIR/plugins/profile/<run>/<host>.xplane.pb",
            received=", ".join(found) if found else "an empty directory",
            hint="capture one with: tfaccel profile -- python train.py",
        )
    names = sorted(
        runs, key=lambda name: max(file_path.stat().st_mtime for file_path in runs[name])
    )
    note = None
    if run is not None:
        match = [
            candidate
            for candidate in names
            if candidate == run or candidate.endswith("/" + run) or Path(candidate).name == run
        ]
        if not match:
            raise InputError(
                f"No run {run!r} in {root}",
                expected="one of " + ", ".join(Path(candidate).name for candidate in names),
                received=run,
            )
        chosen = match[0]
    else:
        chosen = names[-1]
        if len(names) > 1:
            note = (
                f"{len(names)} runs in {root}; analysing the newest, {Path(chosen).name} "
                "(choose another with --run)"
            )
    files = tuple(sorted(runs[chosen]))
    for file_path in files:
        _check_name(file_path)
        _check_file(file_path)
    return ProfileRun(
        Path(chosen).name,
        files,
        tuple(Path(candidate).name for candidate in names if candidate != chosen),
        note,
        _read_meta(files[0].parent),
    )


def _read_meta(run_dir: Path) -> dict[str, Any]:
    """The run's tfaccel.json (parsed, never executed); a bad one is ignored."""
    import json

    path = run_dir / "tfaccel.json"
    try:
        meta = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(meta, dict):
        return {}
    per_step = meta.get("samples_per_step")
    return {"samples_per_step": per_step} if isinstance(per_step, int) and per_step > 0 else {}


def _check_file(path: Path) -> None:
    if not path.name.endswith(".xplane.pb"):
        raise InputError(
            f"{path} is not a profile file", expected="a *.xplane.pb file", received=path.name
        )
    size = path.stat().st_size
    if size == 0:
        raise InputError(
            f"{path} is empty",
            expected="an XSpace protobuf written by TensorFlow's profiler",
            received="0 bytes",
            hint="the capture was probably interrupted; profile again",
        )
