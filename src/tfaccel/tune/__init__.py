"""`tfaccel tune`: measure which combination of settings makes a model fastest.

`run(...)` is the library entry point the command line wires: a built-in workload, a
`module:function` entry point or a training script's command, tuned with a journal
that resumes, and the answer written to tfaccel.json with a plot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError
from tfaccel.results import check_writable
from tfaccel.trial.runner import TrialResult, TrialTarget, run_trial
from tfaccel.tune.result import Decision, Hardware, TuneOptions, TuneResult

__all__ = [
    "Outputs",
    "Target",
    "TuneOptions",
    "TuneResult",
    "found",
    "hardware",
    "prepare",
    "run",
    "start_batch",
]


@dataclass(frozen=True)
class Outputs:
    """Where a tune writes: the settings, the plot and the journal it resumes from."""

    settings: Path = Path("tfaccel.json")
    plot: Path | None = None  # default: the settings' name with -tune.png
    journal: Path | None = None  # default: the settings' name with -tune.jsonl

    @property
    def plot_path(self) -> Path:
        return self.plot or self.settings.with_name(f"{self.settings.stem}-tune.png")

    @property
    def journal_path(self) -> Path:
        """The journal: given, else named after the settings file (tfaccel.json:
        tfaccel-tune.jsonl), so that two targets tuned in one folder do not share one."""
        return self.journal or self.settings.with_name(f"{self.settings.stem}-tune.jsonl")


@dataclass(frozen=True)
class Target:
    """What is tuned: a workload's name, or a script (`script.run.ScriptTrial`), as
    `trial.runner.run_trial` takes it, with what was read of it before any trial.
    `runner` runs one trial of it (`run_trial`; tests pass a fake)."""

    subject: str | TrialTarget
    fingerprint: str | None
    notes: tuple[str, ...] = field(default=())
    batch_size: int | None = None  # what the user's own training runs at, where known
    batch_from: str = "the script's own"  # where batch_size was read, for a note
    # A script's batch size is read by its baseline trial: the batches its fit gets.
    batch_in_trial: bool = False
    runner: Callable[..., TrialResult] = run_trial

    @property
    def name(self) -> str:
        return self.subject if isinstance(self.subject, str) else self.subject.name


def hardware() -> Hardware:
    """The GPUs the trials will see: NVML's, narrowed by CUDA_VISIBLE_DEVICES."""
    from tfaccel.hardware.nvml import driver_info

    return hardware_of(driver_info())


def hardware_of(info: Any) -> Hardware:
    """`hardware()` from NVML's DriverInfo."""
    from tfaccel.hardware.capabilities import visible_indices

    by_index = {gpu.index: gpu for gpu in info.gpus}
    visible = visible_indices([gpu.uuid for gpu in info.gpus])
    gpus = [by_index[i] for i in visible if i in by_index and not by_index[i].error]
    return Hardware(len(gpus), gpus[0].compute_capability if gpus else None)


def prepare(target: str | Sequence[str], fit: int = 1) -> Target:
    """Check what is to be tuned before any trial (InputError: exit 2, in seconds): a
    workload name or `module:function`, or the command of a training script, of whose
    `model.fit` calls the `fit`-th is timed."""
    if fit < 1:
        raise InputError("fit calls count from 1", expected="1 or more", received=fit)
    if isinstance(target, str) and fit != 1:
        raise InputError(
            "--fit chooses which of a script's model.fit calls is timed",
            expected="a script's command after -- (tfaccel tune --fit 2 -- python train.py)",
            received=target,
        )
    if isinstance(target, str):
        from tfaccel.workloads import source_fingerprint
        from tfaccel.workloads.check import check_entry_point

        batch = check_entry_point(target)
        return Target(target, source_fingerprint(target), batch_size=batch, batch_from="its data's")
    from tfaccel.script.command import check_script, parse_command
    from tfaccel.script.run import ScriptTrial

    script = dataclasses.replace(parse_command(target), fit=fit)
    facts = check_script(script)
    fingerprint = _file_fingerprint(script.path)
    subject = ScriptTrial(script, facts.own)
    return Target(subject, fingerprint, facts.notes, batch_in_trial=True)


def start_batch(options: TuneOptions, target: Target) -> tuple[TuneOptions, str | None]:
    """The batch size the search keeps, decided here alone for the command line and the
    Python API: the one asked for (`options.batch_size`), else the user's own: what an
    entry point's data says, else what the baseline trial of a script reads (None
    here), else Keras' default 32 (within `max_batch`). Also a note of where it came
    from, where it is the user's own."""
    if options.batch_size is not None:
        return options, None
    if target.batch_size:
        start = target.batch_size
        grown = dataclasses.replace(
            options, batch_size=start, max_batch=max(options.max_batch, start)
        )
        return grown, f"starting at {target.batch_from} batch size, {start}"
    if target.batch_in_trial:  # the search says which, after the baseline
        return options, None
    return dataclasses.replace(options, batch_size=min(32, options.max_batch)), None


def _file_fingerprint(path: Path | None) -> str | None:
    import hashlib

    if path is None:
        return None
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16] + f" {path.name}"


def target_name(target: str | Sequence[str] | Target) -> str:
    """The name a tune of `target` goes by (its workload in the files it writes), read
    without importing anything of the target: the outputs are checked before it is."""
    if isinstance(target, Target):
        return target.name
    if isinstance(target, str):
        return target
    from tfaccel.script.command import parse_command

    return parse_command(list(target)).name


def check_outputs(name: str, out: Outputs, force: bool, fresh: bool) -> None:
    """Refuse outputs that cannot be written or that hold the user's files, before any
    work. The files this same tune (of the target called `name`) wrote before are
    replaced."""
    from tfaccel.tune.output import own_outputs

    own = own_outputs(out.settings, name)
    for path, flag in ((out.settings, "--output other.json"), (out.plot_path, "--plot other.png")):
        ours = path.resolve() in own
        check_writable(path, force or ours, hint=f"tfaccel tune ... {flag}, or --force")
    check_writable(out.journal_path, force=True)  # appended to: only its folder must exist
    if fresh and out.journal_path.exists() and not force:
        raise InputError(
            f"--fresh would discard {out.journal_path}",
            expected="--fresh --force, or another --journal path",
            received=str(out.journal_path),
        )


def run(
    target: str | Sequence[str] | Target,
    options: TuneOptions | None = None,
    outputs: Outputs | None = None,
    *,
    fresh: bool = False,
    force: bool = False,
    on_trial: Callable[[str, TrialResult | None, Any], None] | None = None,
    on_journal: Callable[[Any], None] | None = None,
    hw: Hardware | None = None,
) -> TuneResult:
    """Tune `target` and write its settings file when a trial ran (the plot, at
    `outputs.plot_path`, is the caller's: `tfaccel.render.tune.tune_plot`).

    Args:
        target: a built-in workload, 'module:function', or a script's command as a
            list (["python", "train.py", "--epochs", "3"]); or a prepared Target.
        options: the search's options (TuneOptions()).
        outputs: where the settings, plot and journal go (Outputs()).
        fresh: discard the journal's earlier trials (needs force when it exists).
        force: replace output files that are not this tune's own.
        on_trial: called before (result None) and after each trial.
        on_journal: called with the loaded Journal (to report stale or retried trials).
        hw: the hardware the trials see (default: read through NVML).
    """
    from tfaccel.environment import machine_id
    from tfaccel.tune.journal import Journal
    from tfaccel.tune.output import write_settings
    from tfaccel.tune.search import Tuner

    out = outputs or Outputs()
    check_outputs(target_name(target), out, force, fresh)  # before the target's check
    tgt = target if isinstance(target, Target) else prepare(target)
    options, _ = start_batch(options or TuneOptions(), tgt)
    journal = Journal(out.journal_path, fingerprint=tgt.fingerprint, machine=machine_id())
    journal.hold()  # before --fresh discards it: another tune may be using it
    try:
        if fresh and out.journal_path.exists():
            out.journal_path.unlink()
        journal.load(tgt.name)
        if on_journal is not None:
            on_journal(journal)
        hw = hw or hardware()
        if hw.gpus and options.xla_cache_dir is None:
            cache = str(out.journal_path.with_name(out.journal_path.name + ".xla-cache"))
            options = dataclasses.replace(options, xla_cache_dir=cache)
        tuner = Tuner(tgt.subject, hw, options, journal, on_trial=on_trial, runner=tgt.runner)
        result = tuner.run()
        # what was read of the script before the trials (which fit is timed, what each
        # trial replaces) heads the decisions: the report and its JSON say it too
        result.decisions[:0] = [Decision("script", note) for note in tgt.notes]
    finally:
        journal.release()
    if found(result):
        write_settings(out.settings, result, out.plot_path, options.xla_cache_dir)
    return result


def found(result: TuneResult) -> bool:
    """Did the tune find settings that ran (and so wrote tfaccel.json)?"""
    return result.best_settings is not None and result.best is not None and result.best.ok
