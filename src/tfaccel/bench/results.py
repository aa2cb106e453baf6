"""Benchmark result files: JSON with the environment, loaded back for `compare`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfaccel.bench.timer import Measurement
from tfaccel.errors import ConfigFileError
from tfaccel.results import SCHEMAS, to_jsonable
from tfaccel.stats import noise_threshold

SCHEMA = SCHEMAS["bench"]


@dataclass(frozen=True)
class BenchReport:
    suite: str
    environment: dict[str, Any]
    measurements: tuple[Measurement, ...]
    seconds: float
    # False while a suite runs (the file is rewritten after each benchmark) or when it
    # was interrupted: the measurements are those that finished.
    complete: bool = True
    skipped: tuple[tuple[str, str], ...] = ()  # (benchmark, why) where it does not apply


def report_json(report: BenchReport) -> str:
    rows = []
    for measurement in report.measurements:
        row = to_jsonable(measurement)
        row.update(
            median=measurement.median,
            spread=measurement.spread,
            percent_of_peak=measurement.percent_of_peak,
            warnings=list(measurement.warnings),
        )
        rows.append(row)
    return json.dumps(
        {
            "schema": SCHEMA,
            "suite": report.suite,
            "environment": report.environment,
            "seconds": report.seconds,
            "complete": report.complete,
            "measurements": rows,
            "skipped": [{"name": name, "why": why} for name, why in report.skipped],
        },
        indent=1,
    )


def load_report(path: str | Path) -> BenchReport:
    from tfaccel._deps import read_json

    file = Path(path)
    data = read_json(file, "a tfaccel bench JSON file")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigFileError(
            f"{file} is not a tfaccel bench result",
            expected=f"schema {SCHEMA!r}",
            received=repr(data.get("schema") if isinstance(data, dict) else type(data).__name__),
        )
    measurements = []
    for row in data.get("measurements", []):
        measurements.append(
            Measurement(
                row["name"],
                row["unit"],
                tuple(row.get("samples") or ()),
                row.get("higher_is_better", True),
                row.get("warmup_s"),
                row.get("params") or {},
                row.get("peak"),
                row.get("telemetry") or {},
                row.get("error"),
            )
        )
    return BenchReport(
        data.get("suite", "?"),
        data.get("environment", {}),
        tuple(measurements),
        float(data.get("seconds", 0.0)),
        bool(data.get("complete", True)),
        tuple(
            (str(skip.get("name")), str(skip.get("why")))
            for skip in data.get("skipped") or ()
            if isinstance(skip, dict)
        ),
    )


@dataclass(frozen=True)
class CompareRow:
    name: str
    unit: str
    a: float | None
    b: float | None
    ratio: float | None  # b / a
    better: bool | None
    only: str | None = None  # "A" or "B": measured in that file alone
    threshold: float | None = None  # a ratio within 1 +- this is noise (better is None)


def compare(before: BenchReport, after: BenchReport) -> list[CompareRow]:
    """Every benchmark of either file, matched by name; ratio = B / A where both have
    it (one measured in one file only has None on the other side)."""
    after_by_name = {measurement.name: measurement for measurement in after.measurements}
    names_a = {measurement.name for measurement in before.measurements}
    rows = []
    for measurement in before.measurements:
        other = after_by_name.get(measurement.name)
        if other is None:
            rows.append(
                CompareRow(
                    measurement.name,
                    measurement.unit,
                    measurement.median,
                    None,
                    None,
                    None,
                    only="A",
                )
            )
            continue
        old, new = measurement.median, other.median
        ratio = new / old if old and new is not None else None
        threshold = noise_threshold(measurement.spread, other.spread)  # as tune decides
        better = (
            None
            if ratio is None or abs(ratio - 1) <= threshold
            else (ratio > 1 if measurement.higher_is_better else ratio < 1)
        )
        rows.append(
            CompareRow(
                measurement.name, measurement.unit, old, new, ratio, better, threshold=threshold
            )
        )
    rows += [
        CompareRow(
            measurement.name, measurement.unit, None, measurement.median, None, None, only="B"
        )
        for measurement in after.measurements
        if measurement.name not in names_a
    ]
    return rows


# What makes two result files measure different things besides the code: compared and
# shown by `bench compare`.
ENVIRONMENT_KEYS = ("driver", "tensorflow", "keras", "keras-hub", "xla_flags")


def environment_differences(before: BenchReport, after: BenchReport) -> dict[str, tuple[Any, Any]]:
    """GPU model and the ENVIRONMENT_KEYS where the two files differ: key -> (A, B);
    "complete" too when either file is the partial one of an interrupted suite."""

    def gpu(report: BenchReport) -> str | None:
        names = [entry.get("name") for entry in report.environment.get("gpus") or []]
        return f"{len(names)} x {names[0]}" if names else None

    out: dict[str, tuple[Any, Any]] = {}
    if not (before.complete and after.complete):  # a file an interrupted suite left
        out["complete"] = (before.complete, after.complete)
    if gpu(before) != gpu(after):
        out["gpu"] = (gpu(before), gpu(after))
    for key in ENVIRONMENT_KEYS:
        old, new = before.environment.get(key), after.environment.get(key)
        if old != new:
            out[key] = (old, new)
    return out
