"""Result files: plain-JSON conversion, atomic writes, output checks, schema names.

Every command that writes a file goes through here, so a file is either whole or
absent, and a path that cannot be written is refused before the work starts.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
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
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
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


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file so an interrupted write never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
