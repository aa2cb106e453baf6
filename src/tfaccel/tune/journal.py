"""The tuning journal: one JSON line per finished trial, written as it finishes.

An interrupted tune reads it back and skips every trial already done, so no finished
trial is lost or run twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from tfaccel.errors import ConfigFileError
from tfaccel.tune.runner import TrialResult

SCHEMA = "tfaccel.tune-journal/1"


class Journal:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.results: dict[str, TrialResult] = {}

    def load(self, workload: str) -> int:
        """Read earlier trials of `workload`; returns how many were found."""
        if not self.path.exists():
            return 0
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                if n == len(self.path.read_text(encoding="utf-8").splitlines()):
                    continue  # a line cut short by an interruption
                raise ConfigFileError(
                    f"{self.path} line {n} is not JSON",
                    expected="one JSON object per line (a tfaccel tune journal)",
                    received=exc.msg,
                ) from exc
            if row.get("schema") != SCHEMA:
                raise ConfigFileError(
                    f"{self.path} is not a tfaccel tune journal",
                    expected=f"lines with schema {SCHEMA!r}",
                    received=repr(row.get("schema")),
                )
            if row.get("workload") != workload:
                continue
            fields = row["result"]
            fields["windows"] = tuple(fields.get("windows") or ())
            fields["losses"] = tuple(fields.get("losses") or ())
            result = TrialResult(**fields)
            self.results[result.key] = result
        return len(self.results)

    def append(self, workload: str, result: TrialResult) -> None:
        self.results[result.key] = result
        line = json.dumps({"schema": SCHEMA, "workload": workload, "result": asdict(result)})
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
