"""`tfaccel profile`: capture (-- COMMAND), analyze LOGDIR, diff A B."""

from __future__ import annotations

from pathlib import Path

import typer

from tfaccel.cli._common import (
    FORMAT_OPTION,
    handle_errors,
    operands,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import ExitCode, InputError, WorkloadError
from tfaccel.profile.advice import Finding, advise, check_gates, diff, parse_gates
from tfaccel.profile.analyze import ProfileReport, analyze
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
    if any(not g.passed for g in gates):
        raise typer.Exit(int(ExitCode.FINDINGS))


@handle_errors
def profile(
    args: list[str] = typer.Argument(
        None,
        help="'-- COMMAND ...' to profile a script, 'analyze LOGDIR', or 'diff LOGDIR_A LOGDIR_B'.",
    ),
    logdir: Path = typer.Option(
        Path("tfaccel-profile"), "--logdir", help="Where a capture writes its trace."
    ),
    start: int = typer.Option(
        10, "--start", min=0, help="First training step to profile (skip warm-up and compilation)."
    ),
    steps: int = typer.Option(10, "--steps", min=1, help="How many steps to profile."),
    run: str = typer.Option(None, "--run", help="Which run in LOGDIR (default: newest)."),
    html: Path = typer.Option(None, "--html", help="Also write an HTML report here."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --html file."),
    fail_under: list[str] = typer.Option(
        [], "--fail-under", help="Gate, e.g. utilization=75 (exit 1 if below)."
    ),
    fail_over: list[str] = typer.Option(
        [], "--fail-over", help="Gate, e.g. input=5 (exit 1 if above)."
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Turn a training run's trace into numbers and concrete advice."""
    args = list(args or [])
    if not args:
        raise InputError(
            "Nothing to profile",
            expected="tfaccel profile -- python train.py, "
            "tfaccel profile analyze LOGDIR, or tfaccel profile diff A B",
            received="no arguments",
        )
    parse_gates(fail_under, fail_over)  # bad gates fail before any work
    if html is not None:
        check_writable(html, force, hint="tfaccel profile ... --html other.html, or --force")
    if args[0] == "analyze":
        (logdir_a,) = operands(
            args, 1, "analyze takes one LOGDIR", "tfaccel profile analyze LOGDIR"
        )
        _report(analyze(logdir_a, run), fail_under, fail_over, html, fmt)
        return
    if args[0] == "diff":
        logdir_a, logdir_b = operands(args, 2, "diff takes two LOGDIRs", "tfaccel profile diff A B")
        if fail_under or fail_over or run:
            raise InputError(
                "profile diff takes no --fail-under, --fail-over or --run",
                expected="tfaccel profile diff A B [--html C.html] [--format json]",
                received=" ".join(["--fail-under"] * bool(fail_under)
                                  + ["--fail-over"] * bool(fail_over) + ["--run"] * bool(run)),
            )  # fmt: skip
        a, b = analyze(logdir_a), analyze(logdir_b)
        rows = diff(a, b)
        if html is not None:
            diff_html(a, b, rows, html)
        if fmt is Format.json:
            write_out(dumps({"a": a.run, "b": b.run, "rows": rows}, schema=SCHEMAS["profile-diff"]))
        else:
            diff_text(a, b, rows, stdout_console())
        return
    from tfaccel.profile.load import run_names
    from tfaccel.profile.run import run_profiled

    logdir.mkdir(parents=True, exist_ok=True)
    probe_folder(logdir)  # a trace that cannot be written is said now, not after the run
    before = run_names(logdir)
    code, why = run_profiled(args, logdir, start, steps, stdout_to_stderr=fmt is not Format.text)
    new = sorted(run_names(logdir) - before)
    if not new:  # never analyse an earlier capture as if it were this one
        raise WorkloadError(
            "The command finished without writing a profile",
            expected=f"a Keras fit() that runs past step {start + steps}",
            received=f"exit code {code}" + (f"; the capture failed: {why}" if why else ""),
            hint="lower --start, or use tfaccel.profile.trace() in the script"
            if code == 0 and not why
            else "the command failed: its own error is printed above"
            if code != 0
            else "the capture's error is printed above; the run itself finished",
        )
    _report(analyze(logdir, run or Path(new[-1]).name), fail_under, fail_over, html, fmt)
    if code != 0:
        raise typer.Exit(int(ExitCode.RUNTIME))
