"""What a tune leaves behind: tfaccel.json (the best settings) and the result record."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError
from tfaccel.render import to_jsonable
from tfaccel.tune.search import TuneResult

SETTINGS_SCHEMA = "tfaccel.settings/1"


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


def settings_document(result: TuneResult) -> dict[str, Any]:
    best = result.best
    return {
        "schema": SETTINGS_SCHEMA,
        "workload": result.workload,
        "settings": result.best_settings.to_dict() if result.best_settings else None,
        "measured": {
            "samples_per_s": best.samples_per_s if best else None,
            "spread": best.spread if best else None,
            "speedup_over_baseline": result.speedup(result.baseline),
            "speedup_over_keras_defaults": result.speedup(result.keras_defaults),
            "confirmed_speedup_over_keras_defaults": result.confirmed_speedup,
            "speedups_across_machines": result.other_machine,
            "device": best.device if best else None,
        },
        "load_with": "tfaccel.configure.from_file('tfaccel.json')",
    }


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file so an interrupted write never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_settings(path: Path, result: TuneResult) -> None:
    write_atomic(path, json.dumps(settings_document(result), indent=2) + "\n")


def result_json(result: TuneResult) -> str:
    doc = to_jsonable(result)
    doc["speedup_over_baseline"] = result.speedup(result.baseline)
    doc["speedup_over_keras_defaults"] = result.speedup(result.keras_defaults)
    doc["confirmed_speedup_over_keras_defaults"] = result.confirmed_speedup
    doc["compile_s_total"] = result.compile_s_total
    doc["largest_fitting_batch"] = result.largest_fitting_batch
    from tfaccel.environment import environment

    return json.dumps({"schema": "tfaccel.tune/1", "environment": environment(), **doc}, indent=2)
