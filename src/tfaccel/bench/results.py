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


def report_json(r: BenchReport) -> str:
    rows = []
    for m in r.measurements:
        d = to_jsonable(m)
        d.update(
            median=m.median,
            spread=m.spread,
            percent_of_peak=m.percent_of_peak,
            warnings=list(m.warnings),
        )
        rows.append(d)
    return json.dumps(
        {
            "schema": SCHEMA,
            "suite": r.suite,
            "environment": r.environment,
            "seconds": r.seconds,
            "complete": r.complete,
            "measurements": rows,
            "skipped": [{"name": n, "why": why} for n, why in r.skipped],
        },
        indent=1,
    )


def load_report(path: str | Path) -> BenchReport:
    from tfaccel._deps import read_json

    p = Path(path)
    data = read_json(p, "a tfaccel bench JSON file")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigFileError(
            f"{p} is not a tfaccel bench result",
            expected=f"schema {SCHEMA!r}",
            received=repr(data.get("schema") if isinstance(data, dict) else type(data).__name__),
        )
    ms = []
    for row in data.get("measurements", []):
        ms.append(
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
        tuple(ms),
        float(data.get("seconds", 0.0)),
        bool(data.get("complete", True)),
        tuple(
            (str(s.get("name")), str(s.get("why")))
            for s in data.get("skipped") or ()
            if isinstance(s, dict)
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


def compare(a: BenchReport, b: BenchReport) -> list[CompareRow]:
    """Every benchmark of either file, matched by name; ratio = B / A where both have
    it (one measured in one file only has None on the other side)."""
    bm = {m.name: m for m in b.measurements}
    names_a = {m.name for m in a.measurements}
    rows = []
    for m in a.measurements:
        other = bm.get(m.name)
        if other is None:
            rows.append(CompareRow(m.name, m.unit, m.median, None, None, None, only="A"))
            continue
        va, vb = m.median, other.median
        ratio = vb / va if va and vb is not None else None
        threshold = noise_threshold(m.spread, other.spread)  # as tune decides
        better = (
            None
            if ratio is None or abs(ratio - 1) <= threshold
            else (ratio > 1 if m.higher_is_better else ratio < 1)
        )
        rows.append(CompareRow(m.name, m.unit, va, vb, ratio, better, threshold=threshold))
    rows += [
        CompareRow(m.name, m.unit, None, m.median, None, None, only="B")
        for m in b.measurements
        if m.name not in names_a
    ]
    return rows


# What makes two result files measure different things besides the code: compared and
# shown by `bench compare`.
ENVIRONMENT_KEYS = ("driver", "tensorflow", "keras", "keras-hub", "xla_flags")


def environment_differences(a: BenchReport, b: BenchReport) -> dict[str, tuple[Any, Any]]:
    """GPU model and the ENVIRONMENT_KEYS where the two files differ: key -> (A, B);
    "complete" too when either file is the partial one of an interrupted suite."""

    def gpu(r: BenchReport) -> str | None:
        names = [g.get("name") for g in r.environment.get("gpus") or []]
        return f"{len(names)} x {names[0]}" if names else None

    out: dict[str, tuple[Any, Any]] = {}
    if not (a.complete and b.complete):  # a file an interrupted suite left
        out["complete"] = (a.complete, b.complete)
    if gpu(a) != gpu(b):
        out["gpu"] = (gpu(a), gpu(b))
    for key in ENVIRONMENT_KEYS:
        va, vb = a.environment.get(key), b.environment.get(key)
        if va != vb:
            out[key] = (va, vb)
    return out
