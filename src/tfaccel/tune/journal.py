"""The tuning journal: one JSON line per finished trial, written as it finishes.

An interrupted tune reads it back and skips every trial already done, so no finished
trial is lost or run twice. Each line keeps the fingerprint of the user's entry-point
file (`tfaccel.workloads.source_fingerprint`): trials measured on another version of
that file are not replayed but counted in `stale` and measured again. Trials that
failed with an error are run again too (counted in `retried`): they fail fast, and the
cause may have been fixed where no fingerprint sees it (another module, the
environment). Out-of-memory and timed-out trials are data, and are replayed.
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
    def __init__(self, path: str | Path, fingerprint: str | None = None) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.results: dict[str, TrialResult] = {}
        self.stale = 0  # trials of this workload measured on another version of its file
        self.retried = 0  # trials that failed with an error, to be run again

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
            if row.get("fingerprint") != self.fingerprint:
                self.stale += 1
                continue
            fields = row["result"]
            if fields.get("status") == "error":
                self.retried += 1
                continue
            fields["windows"] = tuple(fields.get("windows") or ())
            fields["losses"] = tuple(fields.get("losses") or ())
            result = TrialResult(**fields)
            self.results[result.key] = result
        return len(self.results)

    def append(self, workload: str, result: TrialResult) -> None:
        self.results[result.key] = result
        row = {"schema": SCHEMA, "workload": workload, "result": asdict(result)}
        if self.fingerprint is not None:
            row["fingerprint"] = self.fingerprint
        line = json.dumps(row)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
