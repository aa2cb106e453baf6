"""`tfaccel profile`: capture (-- COMMAND, the default verb), analyze LOGDIR, diff A B."""

from __future__ import annotations

from pathlib import Path

import typer

from tfaccel.cli._common import (
    FORMAT_OPTION,
    default_subcommand,
    handle_errors,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import ExitCode, InputError, WorkloadError
from tfaccel.profile.advice import Finding, advise, check_gates, diff, parse_gates
from tfaccel.profile.analyze import analyze
from tfaccel.profile.report import ProfileReport
from tfaccel.render import Format, dumps
from tfaccel.render.profile import diff_html, diff_text, profile_html, profile_text
from tfaccel.results import SCHEMAS, check_writable, probe_folder


def _cupti_finding(r: ProfileReport) -> Finding | None:
    """A GPU machine whose trace has no device activity: CUPTI is missing or not allowed."""
    if r.hardware != "CPU_ONLY":
        return None
    try:
        from tfaccel.hardware.nvml import driver_info

        if not driver_info().gpus:
            return None
    except Exception:
        return None
    fix = (
        "pip install 'nvidia-cuda-cupti-cu12' (CUPTI missing), or, if it is present, "
        "allow profiling for non-root users: options nvidia "
        "NVreg_RestrictProfilingToAdminUsers=0 (then reboot), or run as root"
    )
    try:
        from tfaccel.doctor.context import DoctorContext

        row = next((x for x in DoctorContext(dlopen=False).library_rows if x.key == "cupti"), None)
        if row is not None and row.resolution.path is None:
            fix = f"{row.soname} is not found: pip install 'nvidia-cuda-cupti-cu12'"
        elif row is not None:
            fix = (
                f"{row.soname} loads from {row.resolution.path}, so the driver refused it: "
                "run as root, or set options nvidia NVreg_RestrictProfilingToAdminUsers=0"
            )
    except Exception:
        pass
    return Finding(
        "cupti",
        "fail",
        "device trace",
        None,
        "device activity in the trace",
        "this machine has a GPU but the trace has no device activity: CUPTI, the "
        "GPU tracing library, is missing or not allowed",
        fix,
        None,
    )


def _report(
    r: ProfileReport, under: list[str], over: list[str], html: Path | None, fmt: Format
) -> None:
    findings = advise(r)
    cupti = _cupti_finding(r)
    if cupti is not None:
        findings.insert(0, cupti)
    gates = check_gates(r, parse_gates(under, over))
    if html is not None:
        profile_html(r, findings, html)
    if fmt is Format.json:
        write_out(
            dumps({"report": r, "findings": findings, "gates": gates}, schema=SCHEMAS["profile"])
        )
    else:
        profile_text(r, findings, gates, stdout_console())
        if html is not None:
            stderr_console().print(f"[dim]HTML report: {html}[/]")
    if any(not gate.passed for gate in gates):
        raise typer.Exit(int(ExitCode.FINDINGS))


profile_app = typer.Typer(
    cls=default_subcommand("capture"),
    help="Turn a training run's trace into numbers and concrete advice: capture "
    "(the verb taken when none is named: tfaccel profile -- python train.py), analyze, diff.",
)

HTML_OPTION = typer.Option(None, "--html", help="Also write an HTML report here.")
FORCE_OPTION = typer.Option(False, "--force", help="Replace an existing --html file.")
FAIL_UNDER_OPTION = typer.Option(
    [], "--fail-under", help="Gate, e.g. utilization=75 (exit 1 if below)."
)
FAIL_OVER_OPTION = typer.Option([], "--fail-over", help="Gate, e.g. input=5 (exit 1 if above).")
RUN_OPTION = typer.Option(None, "--run", help="Which run in LOGDIR (default: the newest).")


def _checked(html: Path | None, force: bool, under: list[str], over: list[str]) -> None:
    """Bad gates and an --html that cannot be written fail before any work."""
    parse_gates(under, over)
    if html is not None:
        check_writable(html, force, hint="tfaccel profile ... --html other.html, or --force")


@profile_app.command(
    "capture", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
@handle_errors
def capture(
    command: list[str] = typer.Argument(
        None, help="The command to profile, after --: tfaccel profile -- python train.py"
    ),
    logdir: Path = typer.Option(
        Path("tfaccel-profile"), "--logdir", help="Where the capture writes its trace."
    ),
    start: int = typer.Option(
        10, "--start", min=0, help="First training step to profile (skip warm-up and compilation)."
    ),
    steps: int = typer.Option(10, "--steps", min=1, help="How many steps to profile."),
    stop: bool = typer.Option(
        False,
        "--stop",
        help="End the script once the window is captured (the report then comes in "
        "seconds, not after the whole training; what the script does after it is not run).",
    ),
    fit: int = typer.Option(
        None,
        "--fit",
        min=1,
        help="Which of the script's model.fit calls to profile, counted as the script "
        "makes them (default: the first that runs past the window), as tune --fit.",
    ),
    html: Path = HTML_OPTION,
    force: bool = FORCE_OPTION,
    fail_under: list[str] = FAIL_UNDER_OPTION,
    fail_over: list[str] = FAIL_OVER_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Run an unmodified training script and profile a window of its steps."""
    command = list(command or [])
    if not command:
        raise InputError(
            "Nothing to profile",
            expected="tfaccel profile -- python train.py, "
            "tfaccel profile analyze LOGDIR, or tfaccel profile diff A B",
            received="no arguments",
        )
    _checked(html, force, fail_under, fail_over)
    command = _runnable(command)
    from tfaccel.profile.load import run_names
    from tfaccel.profile.run import run_profiled

    # a trace that cannot be written is said now (exit 2), not after the run
    probe_folder(_existing_parent(logdir))
    logdir.mkdir(parents=True, exist_ok=True)
    probe_folder(logdir)
    before = run_names(logdir)
    code, why = run_profiled(
        command, logdir, start, steps, stdout_to_stderr=fmt is not Format.text, stop=stop, fit=fit
    )
    new = sorted(run_names(logdir) - before)
    if not new:  # never analyse an earlier capture as if it were this one
        raise WorkloadError(
            "The command finished without writing a profile",
            expected="a Keras fit() (or a loop of train_on_batch calls, or of a tf.function "
            "step that applies a Keras optimizer's gradients) that runs past step "
            f"{start + steps}" + (f" as the script's fit call {fit}" if fit else ""),
            received=f"exit code {code}" + (f"; the capture failed: {why}" if why else ""),
            hint="lower --start, or use tfaccel.profile.trace() in the script"
            if code == 0 and not why
            else "the command failed: its own error is printed above"
            if code != 0
            else "the capture's error is printed above; the run itself finished",
        )
    _report(analyze(logdir, Path(new[-1]).name), fail_under, fail_over, html, fmt)
    if code != 0:
        raise typer.Exit(int(ExitCode.RUNTIME))


def _runnable(command: list[str]) -> list[str]:
    """The command to profile, checked before its trace folder is made: a Python script
    as tune and run take it (`train.py` alone runs under python; its file must exist
    and parse, on Keras 3's TensorFlow backend), else a program on PATH (a launcher
    whose Python processes the hook reaches too)."""
    import shutil

    from tfaccel.script.command import USAGE, check_script, is_command, is_inline, parse_command

    if is_inline(command):  # python -c CODE: no file to check before it runs
        return command
    if is_command(command):
        script = parse_command(command)
        check_script(script)
        return list(script.argv)
    if shutil.which(command[0]) is None:
        raise InputError(
            f"Cannot run {command[0]!r}",
            expected=f"{USAGE}, or a program on PATH",
            received=" ".join(command),
        )
    return command


@profile_app.command("analyze")
@handle_errors
def analyze_cmd(
    logdir: str = typer.Argument(
        ..., metavar="LOGDIR", help="A folder holding a trace (plugins/profile/RUN)."
    ),
    run: str = RUN_OPTION,
    html: Path = HTML_OPTION,
    force: bool = FORCE_OPTION,
    fail_under: list[str] = FAIL_UNDER_OPTION,
    fail_over: list[str] = FAIL_OVER_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Numbers and advice from a trace written earlier (by profile, TensorBoard or XProf)."""
    _checked(html, force, fail_under, fail_over)
    _report(analyze(logdir, run), fail_under, fail_over, html, fmt)


@profile_app.command("diff")
@handle_errors
def diff_cmd(
    logdir_a: str = typer.Argument(..., metavar="A", help="The trace before."),
    logdir_b: str = typer.Argument(..., metavar="B", help="The trace after."),
    html: Path = HTML_OPTION,
    force: bool = FORCE_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Every metric of two traces side by side; better or worse only beyond the noise."""
    _checked(html, force, [], [])
    before, after = analyze(logdir_a), analyze(logdir_b)
    rows = diff(before, after)
    if html is not None:
        diff_html(before, after, rows, html)
    if fmt is Format.json:
        write_out(
            dumps({"a": before.run, "b": after.run, "rows": rows}, schema=SCHEMAS["profile-diff"])
        )
    else:
        diff_text(before, after, rows, stdout_console())


def _existing_parent(path: Path) -> Path:
    """The nearest folder at or above `path` that exists (where it would be created)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
