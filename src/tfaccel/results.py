"""Result files: plain-JSON conversion, atomic writes, output checks, schema names.

Every command that writes a file goes through here, so a file is either whole or
absent, and a path that cannot be written is refused before the work starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError

# The schema name each result document carries in its "schema" field.
SCHEMAS = {
    "bench": "tfaccel.bench/1",
    "doctor": "tfaccel.doctor/1",
    "hw": "tfaccel.hw/1",
    "monitor": "tfaccel.monitor/1",
    "plan": "tfaccel.plan/1",
    "profile": "tfaccel.profile/1",
    "profile-diff": "tfaccel.profile-diff/1",
    "scale": "tfaccel.scale/1",
    "settings": "tfaccel.settings/1",
    "tune": "tfaccel.tune/1",
    "tune-journal": "tfaccel.tune-journal/2",
}


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, paths, tuples and sets -> plain JSON values (NaN -> None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            declared.name: to_jsonable(getattr(obj, declared.name))
            for declared in dataclasses.fields(obj)
        }
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(key): to_jsonable(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(value) for value in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def dumps(obj: Any, **extra: Any) -> str:
    """JSON text for any result object; `extra` keys are merged at the top level."""
    payload = to_jsonable(obj)
    if extra and isinstance(payload, dict):
        payload = {**extra, **payload}
    return json.dumps(payload, indent=2, sort_keys=False)


def check_writable(path: Path, force: bool, hint: str | None = None) -> None:
    """Refuse to overwrite a file the user has, unless told to, or to start work whose
    result could not be written (checked before the work)."""
    folder = path.parent
    if not folder.is_dir():
        raise InputError(
            f"Cannot write {path}: the folder {folder} does not exist",
            expected="a path in an existing folder",
            received=str(path),
        )
    probe_folder(folder)  # first: without permission, even looking at `path` fails
    if path.is_dir():
        raise InputError(
            f"Cannot write {path}: it is a folder", expected="a file path", received=str(path)
        )
    if path.exists() and not force:
        raise InputError(
            f"{path} already exists",
            expected="a new output path, or --force to replace it",
            received=str(path),
            hint=hint or "give another path, or --force to replace the file",
        )


# Less free space than this and a result file may not fit: refused before the work.
MIN_FREE_BYTES = 1 << 20


def probe_folder(folder: Path) -> None:
    """Create, write and remove a small file in `folder`, so that a read-only folder, a
    missing permission or a full disk shows now, before the work, not after it."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".tfaccel-probe.")
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
            os.unlink(probe)
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise InputError(
            f"Cannot write in {folder}: {exc.strerror or exc}",
            expected="a folder you can write to, with free space",
            received=str(folder),
        ) from None
    if free < MIN_FREE_BYTES:
        raise InputError(
            f"Cannot write in {folder}: only {free // 1024} KiB free",
            expected=f"at least {MIN_FREE_BYTES >> 20} MiB free",
            received=str(folder),
        )


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file so an interrupted or failed write never leaves half
    a file, nor the temporary one. The file gets the mode the user's umask gives."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """A matplotlib figure as a PNG at `path`, whole or not at all."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    write_atomic(path, buf.getvalue())
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
