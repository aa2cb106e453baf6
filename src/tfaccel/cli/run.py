"""`tfaccel run`: train an unmodified script with the settings tune found."""

from __future__ import annotations

from pathlib import Path

import typer

from tfaccel.cli._common import handle_errors
from tfaccel.errors import InputError
from tfaccel.optimize.settings import read_settings_file
from tfaccel.trial.script import check_script, parse_command, run_script


@handle_errors
def run(
    command: list[str] = typer.Argument(
        None,
        help="The training script's command, after --: tfaccel run -- python train.py ARGS",
        show_default=False,
    ),
    config: Path = typer.Option(
        Path("tfaccel.json"), "--config", "-c", help="The settings file `tfaccel tune` wrote."
    ),
) -> None:
    """Run a training script as it is, with tfaccel.json's settings applied inside it.

    What was applied, and what could not be (with the reason), is said on stderr; the
    script's own output and exit code are its own.
    """
    if not config.exists():
        raise InputError(
            f"{config} does not exist",
            expected="a settings file written by tfaccel tune (--config PATH)",
            received=str(config),
            hint="tfaccel tune -- python train.py writes tfaccel.json",
        )
    settings = read_settings_file(config)
    script = parse_command(command or [])
    check_script(script)
    raise typer.Exit(run_script(script, settings))
