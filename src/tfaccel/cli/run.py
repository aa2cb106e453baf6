"""`tfaccel run`: train an unmodified script with the settings tune found."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.text import Text

from tfaccel.cli._common import handle_errors, stderr_console
from tfaccel.errors import InputError
from tfaccel.script.command import check_script, parse_command
from tfaccel.script.run import run_script
from tfaccel.tune.output import for_this_machine, read_answer


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
    batch_offer: bool = typer.Option(
        False,
        "--batch-offer",
        help="Also apply the file's batch offer (a larger batch with its learning-rate "
        "rule and warm-up), which changes how the model trains; only an offer whose race "
        "passed. Without it, the script's own batch size is kept.",
    ),
) -> None:
    """Run a training script as it is, with tfaccel.json's settings applied inside it.

    The same-training answer only (the script's own batch size), unless --batch-offer.
    What was applied, and what could not be (with the reason), is said on stderr.
    The script's own output and exit code are its own.
    """
    if not config.exists():
        raise InputError(
            f"{config} does not exist",
            expected="a settings file written by tfaccel tune (--config PATH)",
            received=str(config),
            hint="tfaccel tune -- python train.py writes tfaccel.json",
        )
    answer = for_this_machine(read_answer(config, batch_offer), _gpus())
    script = parse_command(command or [])
    facts = check_script(script)
    err = stderr_console()
    for note in (*answer.notes, *facts.switches):
        err.print(Text(f"tfaccel: {note}", style="dim"), soft_wrap=True)
    raise typer.Exit(
        run_script(
            script,
            answer.settings,
            answer.lr,
            answer.from_batch,
            answer.xla_cache,
            answer.raced_fit,
        )
    )


def _gpus() -> int:
    """The GPUs the script will see (NVML's, none where CUDA_VISIBLE_DEVICES hides them)."""
    from tfaccel.hardware.nvml import driver_info

    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return 0
    return len(driver_info().gpus)
