"""`tfaccel doctor`: flags -> run_doctor() -> render -> exit code."""

from __future__ import annotations

import typer

from tfaccel.cli._common import (
    duration,
    handle_errors,
    seconds_of,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.doctor import DoctorContext, Status, run_doctor
from tfaccel.errors import ExitCode
from tfaccel.render import DoctorFormat
from tfaccel.render.doctor import doctor_json, doctor_markdown, doctor_text


@handle_errors
def doctor(
    fmt: DoctorFormat = typer.Option(
        DoctorFormat.text,
        "--format",
        "-f",
        help="Output format: text (rich), json, or markdown (for a bug report).",
        case_sensitive=False,
    ),
    no_import: bool = typer.Option(
        False, "--no-import", help="Do not import TensorFlow (skips 'TensorFlow sees the GPU')."
    ),
    timeout: str = typer.Option(
        "180",
        "--timeout",
        callback=duration(),
        help="Time allowed for importing TensorFlow in a child process: 180 (seconds), 5m.",
    ),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too, not only fails."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show skipped checks and the command behind every finding."
    ),
) -> None:
    """Is TensorFlow using the GPU? If not, exactly why, and the command that fixes it.

    Exit code 0 when no check fails, 1 when one does (or warns, with --strict).
    """
    ctx = DoctorContext(run_tf_probe=not no_import, tf_timeout_s=seconds_of(timeout) or 180.0)
    if fmt is DoctorFormat.text:
        err = stderr_console()
        with err.status("checking ...") as status:
            report = run_doctor(ctx, progress=lambda name: status.update(f"checking {name} ..."))
        doctor_text(report, stdout_console(), verbose=verbose)
    else:
        report = run_doctor(ctx)
        write_out(doctor_json(report) if fmt is DoctorFormat.json else doctor_markdown(report))
    if report.failed or (strict and report.count(Status.WARN)):
        raise typer.Exit(int(ExitCode.FINDINGS))
