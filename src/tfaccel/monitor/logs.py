"""Writing samples to CSV or JSON lines, one row per GPU per snapshot."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from tfaccel.errors import InputError
from tfaccel.monitor.metrics import METRICS, Snapshot

CSV_FIELDS = ["time", "gpu", "name", *[m.attr for m in METRICS], "throttle", "alerts", "error"]


class SampleLog:
    """Appends snapshots to `path` (.csv or .jsonl); never truncates an existing file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".json"):
            raise InputError(
                "Unknown log format",
                expected="a path ending in .csv or .jsonl",
                received=str(self.path),
            )
        self.kind = "csv" if suffix == ".csv" else "jsonl"
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh: IO[str] = self.path.open("a", encoding="utf-8", newline="")
        self._csv: Any = None
        if self.kind == "csv":
            self._csv = csv.DictWriter(self._fh, fieldnames=CSV_FIELDS)
            if new:
                self._csv.writeheader()

    def write(self, snap: Snapshot) -> None:
        for gpu in snap.gpus:
            alerts = [alert.message for alert in snap.alerts if alert.gpu == gpu.index]
            if self.kind == "csv":
                row: dict[str, Any] = {
                    "time": f"{gpu.time:.3f}",
                    "gpu": gpu.index,
                    "name": gpu.name,
                    "throttle": "|".join(gpu.throttle),
                    "alerts": " | ".join(alerts),
                    "error": gpu.error or "",
                }
                for metric in METRICS:
                    row[metric.attr] = getattr(gpu, metric.attr)
                self._csv.writerow(row)
            else:
                fields = asdict(gpu)
                fields["alerts"] = alerts
                self._fh.write(json.dumps(fields) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
