"""What a tune leaves behind: tfaccel.json (the best settings) and the result record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfaccel.results import SCHEMAS, to_jsonable, write_atomic
from tfaccel.tune.result import TuneResult

SETTINGS_SCHEMA = SCHEMAS["settings"]


def settings_document(result: TuneResult, plot: Path | None = None) -> dict[str, Any]:
    best = result.best
    return {
        "schema": SETTINGS_SCHEMA,
        "workload": result.workload,
        **({"plot": str(plot)} if plot is not None else {}),
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


def write_settings(path: Path, result: TuneResult, plot: Path | None = None) -> None:
    write_atomic(path, json.dumps(settings_document(result, plot), indent=2) + "\n")


def own_outputs(path: Path, workload: str) -> set[Path]:
    """The files an earlier tune of `workload` wrote, which running the same command
    again may replace: `path` when it is that tune's settings file, and the plot it
    names. Empty for any other file (the user's own, or another workload's tune)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return set()
    if not isinstance(doc, dict) or doc.get("schema") != SETTINGS_SCHEMA:
        return set()
    if doc.get("workload") != workload:
        return set()
    plot = doc.get("plot")
    return {p.resolve() for p in (path, Path(plot) if isinstance(plot, str) else None) if p}


def result_json(result: TuneResult) -> str:
    doc = to_jsonable(result)
    doc["speedup_over_baseline"] = result.speedup(result.baseline)
    doc["speedup_over_keras_defaults"] = result.speedup(result.keras_defaults)
    doc["confirmed_speedup_over_keras_defaults"] = result.confirmed_speedup
    doc["compile_s_total"] = result.compile_s_total
    doc["setup_s_total"] = result.setup_s_total
    doc["seconds_to_1_5x_keras_defaults"] = result.time_to(1.5)
    doc["largest_fitting_batch"] = result.largest_fitting_batch
    from tfaccel.environment import environment

    return json.dumps({"schema": SCHEMAS["tune"], "environment": environment(), **doc}, indent=2)
