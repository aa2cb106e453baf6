"""Rendering of `tfaccel.configure()`'s report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # the report renders itself through this module (its summary())
    from tfaccel.optimize.report import ConfigureReport

_STATUS_STYLE = {
    "applied": "green",
    "unchanged": "dim",
    "at-compile": "cyan",
    "at-build": "cyan",
    "skipped": "dim",
    "warning": "yellow",
}


# Below this many columns the table's "how" column is too narrow for its words (a
# `model.compile(jit_compile=False)` split inside): each knob gets lines of its own.
TABLE_MIN_WIDTH = 110


def configure_view(report: ConfigureReport, width: int) -> Any:
    """The report at a console `width`: the table, or knob by knob where it is narrow."""
    return configure_table(report) if width >= TABLE_MIN_WIDTH else configure_lines(report)


def configure_lines(report: ConfigureReport) -> Any:
    """One knob after another: its value and status on a line, how below it, wrapped
    at spaces."""
    from rich.console import Group

    gpus = f"{report.gpus} GPU(s)" + (
        f", compute capability {report.compute_capability}" if report.compute_capability else ""
    )
    parts: list[Any] = [Text(f"tfaccel.configure: {report.precision} on {gpus}", style="italic")]
    for row in report.rows:
        value = row.value
        if isinstance(value, dict):
            value = ", ".join(f"{knob}={setting}" for knob, setting in value.items())
        head = Text(f"{row.knob} = {value}  ")
        head.append(row.status, style=_STATUS_STYLE.get(row.status, ""))
        parts += [head, Text("    " + str(row.detail), style="dim")]
    return Group(*parts)


def configure_table(report: ConfigureReport) -> Table:
    """One row per knob: the value asked for, what happened, and how."""
    gpus = f"{report.gpus} GPU(s)" + (
        f", compute capability {report.compute_capability}" if report.compute_capability else ""
    )
    table = Table(
        title=f"tfaccel.configure: {report.precision} on {gpus}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        expand=True,
    )
    table.add_column("knob", no_wrap=True)
    table.add_column("value", max_width=20)
    table.add_column("status", no_wrap=True)
    table.add_column("how", ratio=1, overflow="fold")
    for row in report.rows:
        value = row.value
        if isinstance(value, dict):
            value = ", ".join(f"{knob}={setting}" for knob, setting in value.items())
        table.add_row(
            row.knob,
            str(value),
            Text(row.status, style=_STATUS_STYLE.get(row.status, "")),
            row.detail,
        )
    return table


def configure_brief(report: ConfigureReport) -> list[str]:
    """The report in a few lines, for `tfaccel run` (before the script's own output):
    the knobs that change something, and each warning with its reason. The batch size
    and tf.data settings are said at each fit, where they apply."""
    gpus = f"{report.gpus} GPU(s)" if report.gpus else "the CPU"
    changed = [
        f"{row.knob} {row.value}"
        for row in report.rows
        if row.status in ("applied", "at-compile", "at-build")
        and row.knob != "tf.data"
        and row.value not in ("none", False)
    ]
    lines = [f"{report.precision} on {gpus}: " + ", ".join(changed)]
    lines += [f"{row.knob}: {row.detail}" for row in report.rows if row.status == "warning"]
    return lines
