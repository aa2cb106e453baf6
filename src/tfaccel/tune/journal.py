"""The tuning journal: one JSON line per finished trial, written as it finishes.

An interrupted tune reads it back and skips every trial already done, so no finished
trial is lost or run twice. Each line keeps the fingerprint of the user's entry-point
file (`tfaccel.workloads.source_fingerprint`): trials measured on another version of
that file are not replayed but counted in `stale` and measured again. Trials that
failed with an error are run again too (counted in `retried`): they fail fast, and the
cause may have been fixed where no fingerprint sees it (another module, the
environment). Out-of-memory and timed-out trials are data, and are replayed; a trial
killed at a shorter `--timeout` than the tune's runs again (the tuner decides, from its
`wall_s`).

A line an interruption cut short is skipped, and cut off before the next line is
written, so it never poisons a later resume. A journal of another schema (an earlier
tfaccel) or of another kind of file is refused before any trial, with the way out.

With `machine` (`tfaccel.environment.machine_id`), each line also says where it was
measured (`machine_of`). The trials of another machine, or of this one before a
reboot, are replayed as they were; but before a new trial is compared with one of them,
that one is measured again here (`append_again`: a line of its own, so that a later
resume here replays the same comparison and the other machine's figure is kept). A
trial measured once more on the same machine, in a process of its own, weighs how far
figures drift between processes (`append_repeat`, `repeats`).
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tfaccel.errors import ConfigFileError
from tfaccel.results import SCHEMAS
from tfaccel.trial.runner import TrialResult

SCHEMA = SCHEMAS["tune-journal"]


class Journal:
    """The trials of a tune, one JSON line each, appended (and fsync'd) as they end, so
    that the same command resumes: keyed by the target's fingerprint and the machine
    that measured them."""

    def __init__(
        self, path: str | Path, fingerprint: str | None = None, machine: str | None = None
    ) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.machine = machine
        self.results: dict[str, TrialResult] = {}
        self.machine_of: dict[str, str | None] = {}  # where each trial was measured
        # (key, machine): a trial of another machine measured again on this one, to be
        # compared with the trials of this one; its own figure stays in `results`.
        self.again: dict[tuple[str, str | None], TrialResult] = {}
        # (key, machine): the trial measured once more there, each in a process of its own.
        self.repeats: dict[tuple[str, str | None], list[TrialResult]] = {}
        self.stale = 0  # trials of this workload measured on another version of its file
        self.retried = 0  # trials that failed with an error, to be run again
        self._lock: Any = None  # the lock file while this tune holds the journal

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def hold(self) -> None:
        """Before any trial: the journal writable, and this tune its only user (an
        exclusive lock on `lock_path`, which holds this process's pid; the lock goes
        with the process). ConfigFileError otherwise: a second tune on the same journal
        would measure the same trials twice, and a journal that cannot be written would
        lose the first trial's result."""
        lock = self._writable()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock.seek(0)
            pid = lock.read().strip() or "?"
            lock.close()
            raise ConfigFileError(
                f"The journal {self.path} is in use by pid {pid}",
                expected="one tune at a time per journal",
                received=f"{self.lock_path} locked",
                hint="wait for that tune to end, or give this one --journal another path",
            ) from exc
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def _writable(self) -> Any:
        """The lock file, open; the journal checked writable (created and removed
        again where it did not exist)."""
        existed = self.path.exists()
        try:
            with self.path.open("a", encoding="utf-8"):
                pass
            return self.lock_path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise ConfigFileError(
                f"Cannot write the journal {self.path}",
                expected="a file this user can write: tune appends each trial as it ends",
                received=f"{type(exc).__name__}: {exc.strerror or exc}",
                hint="--journal another path",
            ) from exc
        finally:
            if not existed and self.path.is_file() and self.path.stat().st_size == 0:
                self.path.unlink()

    def release(self) -> None:
        """The lock given back (`hold`), its file removed."""
        lock, self._lock = self._lock, None
        if lock is not None:
            self.lock_path.unlink(missing_ok=True)
            lock.close()

    def here(self, key: str) -> bool:
        """Was this trial measured on this machine (always so without `machine`)?"""
        return self.machine is None or self.machine_of.get(key) == self.machine

    def machines(self, key: str) -> list[str]:
        """The machines with a figure of this trial: its own first, then those where it
        was measured again."""
        own = self.machine_of.get(key)
        again = [
            machine
            for (trial_key, machine) in self.again
            if trial_key == key and machine is not None and machine != own
        ]
        return ([own] if own is not None else []) + again

    def one_machine(self, a: str, b: str) -> tuple[TrialResult, TrialResult] | None:
        """Figures of trials `a` and `b` measured on one machine, both finished: this
        machine's if it has both, else those of the first of `a`'s machines that does;
        None if no machine has both."""
        for machine in dict.fromkeys((self.machine, *self.machines(a))):
            first, second = self.on(a, machine), self.on(b, machine)
            if first is not None and second is not None and first.ok and second.ok:
                return first, second
        return None

    def on(self, key: str, machine: str | None) -> TrialResult | None:
        """The trial's figure measured on `machine`: its own, or a measurement again
        (`append_again`); None if it has none there."""
        if machine is None:
            return None
        if key in self.results and self.machine_of.get(key) == machine:
            return self.results[key]
        return self.again.get((key, machine))

    def machine_of_figure(self, trial: TrialResult) -> str | None:
        """Where this figure was measured: the machine of the journal line it is (its own
        or one measured again), or this machine for a figure the journal does not hold
        (one measured in this session and not journaled, as a confirmation)."""
        if self.results.get(trial.key) is trial:
            return self.machine_of.get(trial.key)
        for (key, machine), again in self.again.items():
            if key == trial.key and again is trial:
                return machine
        return self.machine

    def load(self, workload: str) -> int:
        """Read earlier trials of `workload`; returns how many were found."""
        if not self.path.exists():
            return 0
        lines = self._lines()
        for line_no, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = self._row(line_no, line, last=line_no == len(lines))
            if row is None:
                continue
            if row.get("workload") != workload:
                continue
            if row.get("fingerprint") != self.fingerprint:
                self.stale += 1
                continue
            result = self._result(line_no, row["result"])
            if result.status == "error":
                self.retried += 1
                continue
            if row.get("again"):
                self.again[(result.key, row.get("machine"))] = result
                continue
            if row.get("repeat"):
                self.repeats.setdefault((result.key, row.get("machine")), []).append(result)
                continue
            self.results[result.key] = result
            self.machine_of[result.key] = row.get("machine")
        return len(self.results)

    def _lines(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigFileError(
                f"Cannot read the journal {self.path}",
                expected="a tfaccel tune journal (JSON lines)",
                received=str(exc),
                hint="--journal another path, or --fresh --force to start it again",
            ) from exc

    def _row(self, line_no: int, line: str, last: bool) -> dict[str, Any] | None:
        """Line `n` as a journal row; None for a last line an interruption cut short
        (the next append starts on a line of its own)."""
        try:
            row = json.loads(line)
        except RecursionError:
            raise ConfigFileError(
                f"{self.path} line {line_no} is nested too deeply to be a journal line",
                expected="one JSON object per line (a tfaccel tune journal)",
                received="deep nesting",
                hint="--journal another path, or --fresh --force to start it again",
            ) from None
        except json.JSONDecodeError as exc:
            if last:
                return None
            raise ConfigFileError(
                f"{self.path} line {line_no} is not JSON",
                expected="one JSON object per line (a tfaccel tune journal)",
                received=exc.msg,
                hint="--journal another path, or --fresh --force to start it again",
            ) from exc
        schema = row.get("schema") if isinstance(row, dict) else None
        if schema == SCHEMA and isinstance(row.get("result"), dict):
            return row
        earlier = isinstance(schema, str) and schema.startswith("tfaccel.tune-journal/")
        raise ConfigFileError(
            f"{self.path} was written by another version of tfaccel"
            if earlier
            else f"{self.path} is not a tfaccel tune journal",
            expected=f"lines with schema {SCHEMA!r} and a result",
            received=repr(schema) if schema else f"line {line_no}: {line[:80]!r}",
            hint="--fresh --force starts it again, or --journal another path",
        )

    def _result(self, line_no: int, data: dict[str, Any]) -> TrialResult:
        known = {declared.name for declared in fields(TrialResult)}
        try:
            result = TrialResult(**{key: value for key, value in data.items() if key in known})
        except TypeError as exc:
            raise ConfigFileError(
                f"{self.path} line {line_no} is not a trial's result",
                expected="a tfaccel tune journal line",
                received=str(exc),
                hint="--fresh --force starts it again, or --journal another path",
            ) from exc
        windows, losses = tuple(result.windows or ()), tuple(result.losses or ())
        return TrialResult(**{**result.__dict__, "windows": windows, "losses": losses})

    def _cut_torn_line(self) -> None:
        """Cut off a last line that an interrupted write left without its end (load
        skipped it), so that the next line does not continue it."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self.path.open("r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def append(self, workload: str, result: TrialResult) -> None:
        self.results[result.key] = result
        self.machine_of[result.key] = self.machine
        self._write(workload, result)

    def append_again(self, workload: str, result: TrialResult) -> None:
        """A journaled trial measured again on this machine (see `on`)."""
        self.again[(result.key, self.machine)] = result
        self._write(workload, result, flag="again")

    def append_repeat(self, workload: str, result: TrialResult) -> None:
        """A trial of this machine measured once more, in a process of its own."""
        self.repeats.setdefault((result.key, self.machine), []).append(result)
        self._write(workload, result, flag="repeat")

    def _write(self, workload: str, result: TrialResult, flag: str | None = None) -> None:
        row: dict[str, object] = {"schema": SCHEMA, "workload": workload, "result": asdict(result)}
        if self.fingerprint is not None:
            row["fingerprint"] = self.fingerprint
        if self.machine is not None:
            row["machine"] = self.machine
        if flag:
            row[flag] = True
        line = json.dumps(row)
        self._cut_torn_line()
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
