"""Rendering of `tfaccel.configure()`'s report."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

_STATUS_STYLE = {
    "applied": "green",
    "unchanged": "dim",
    "at-compile": "cyan",
    "at-build": "cyan",
    "skipped": "dim",
    "warning": "yellow",
}


def configure_table(report: Any) -> Table:
    """One row per knob: the value asked for, what happened, and how."""
    gpus = f"{report.gpus} GPU(s)" + (
        f", compute capability {report.compute_capability}" if report.compute_capability else ""
    )
    t = Table(
        title=f"tfaccel.configure: {report.precision} on {gpus}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        expand=True,
    )
    t.add_column("knob", no_wrap=True)
    t.add_column("value", max_width=20)
    t.add_column("status", no_wrap=True)
    t.add_column("how", ratio=1, overflow="fold")
    for row in report.rows:
        value = row.value
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        t.add_row(
            row.knob,
            str(value),
            Text(row.status, style=_STATUS_STYLE.get(row.status, "")),
            row.detail,
        )
    return t


def configure_brief(report: Any) -> list[str]:
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
