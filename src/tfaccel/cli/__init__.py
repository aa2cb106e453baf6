"""The `tfaccel` command line: one module per command, each a thin shell over the library."""

from __future__ import annotations

import logging
import sys

import typer

from tfaccel import __version__
from tfaccel._tf import QUIET_IMPORT
from tfaccel.cli import bench as bench_cmd
from tfaccel.cli import doctor as doctor_cmd
from tfaccel.cli import hw as hw_cmd
from tfaccel.cli import monitor as monitor_cmd
from tfaccel.cli import plan as plan_cmd
from tfaccel.cli import profile as profile_cmd
from tfaccel.cli import run as run_cmd
from tfaccel.cli import scale as scale_cmd
from tfaccel.cli import tune as tune_cmd
from tfaccel.cli._common import QUIET, Commands

app = typer.Typer(
    name="tfaccel",
    cls=Commands,
    help="Make TensorFlow fast and trouble-free on NVIDIA GPUs.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


_LOG_HANDLER = logging.StreamHandler()
_LOG_HANDLER.setFormatter(logging.Formatter("tfaccel %(levelname)s: %(message)s"))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tfaccel {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress, status or notes on stderr (errors stay)."
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Debug log on stderr: each child process (trials, probes) with its exit and "
        "the end of its log, TensorFlow's C++ lines included.",
    ),
) -> None:
    """Make TensorFlow fast and trouble-free on NVIDIA GPUs."""
    QUIET["on"] = quiet
    QUIET_IMPORT["on"] = not verbose  # TensorFlow's C++ chatter at import, unless -v
    log = logging.getLogger("tfaccel")
    log.removeHandler(_LOG_HANDLER)
    log.setLevel(logging.DEBUG if verbose else logging.NOTSET)
    if verbose:
        _LOG_HANDLER.setStream(sys.stderr)
        log.addHandler(_LOG_HANDLER)


app.command("doctor")(doctor_cmd.doctor)
app.command("hw")(hw_cmd.hw)
app.command("plan")(plan_cmd.plan)
app.command("tune")(tune_cmd.tune)
app.command("run")(run_cmd.run)
app.command("monitor")(monitor_cmd.monitor)
app.add_typer(bench_cmd.bench_app, name="bench")
app.command("scale")(scale_cmd.scale)
app.add_typer(scale_cmd.mps_app, name="mps")
app.add_typer(monitor_cmd.power_app, name="power")
app.add_typer(profile_cmd.profile_app, name="profile")


def main() -> None:
    """Console entry point."""
    app()
