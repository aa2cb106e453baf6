"""What a tune leaves behind: tfaccel.json (the best settings) and the result record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfaccel.results import SCHEMAS, to_jsonable, write_atomic
from tfaccel.tune.search import TuneResult

SETTINGS_SCHEMA = SCHEMAS["settings"]


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

    return json.dumps({"schema": SCHEMAS["tune"], "environment": environment(), **doc}, indent=2)
