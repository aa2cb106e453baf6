"""Rendering of `tfaccel doctor` reports."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tfaccel.doctor.model import DoctorReport, Status
from tfaccel.render import dumps
from tfaccel.results import SCHEMAS

_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}
_MARK = {Status.OK: "✔ ok", Status.WARN: "! warn", Status.FAIL: "✘ fail", Status.SKIP: "- skip"}


def doctor_text(report: DoctorReport, console: Console, verbose: bool = False) -> None:
    """Print the report: one row per check, the fix under its finding, then a verdict."""
    table = Table(show_header=True, header_style="bold", expand=True, box=None, padding=(0, 1))
    table.add_column("", no_wrap=True, width=6)
    # check names stay whole (CUDA_VISIBLE_DEVICES) unless the terminal is very narrow
    longest = max((len(check.title) for check in report.checks), default=5)
    table.add_column("check", overflow="fold", width=max(12, min(longest, 22, console.width // 4)))
    table.add_column("finding", ratio=1, overflow="fold")
    for check in report.checks:
        if check.status is Status.SKIP and not verbose:
            continue
        cell = Text(check.finding)
        if check.fix:
            cell.append("\nfix: ", style="bold cyan")
            cell.append(check.fix, style="cyan")
        if check.see and (verbose or check.status is not Status.OK):
            cell.append("\nsee: ", style="dim")
            cell.append(check.see, style="dim")
        table.add_row(
            Text(_MARK[check.status], style=_STYLE[check.status]), Text(check.title), cell
        )
        table.add_row("", "", "")
    counts = ", ".join(
        f"{report.count(status)} {status.value}" for status in Status if report.count(status)
    )
    style = "red" if report.failed else ("yellow" if report.count(Status.WARN) else "green")
    verdict = Text(f"{report.verdict}  ({counts}; {report.seconds:.1f} s)", style=f"bold {style}")
    env = report.environment
    head = Text(
        f"tfaccel {env.get('tfaccel')} · Python {env.get('python')} · "
        f"TensorFlow {env.get('tensorflow') or 'not installed'} · "
        f"driver {env.get('driver') or 'none'} · {env.get('platform')}\n",
        style="dim",
    )
    console.print(Panel(Group(head, table, verdict), title="tfaccel doctor", expand=True))
    if not verbose and report.count(Status.SKIP):
        console.print(
            Text(
                f"{report.count(Status.SKIP)} skipped check(s) hidden; --verbose shows them.",
                style="dim",
            )
        )


def doctor_json(report: DoctorReport) -> str:
    return dumps(report, schema=SCHEMAS["doctor"], failed=report.failed, verdict=report.verdict)


def _md_cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def doctor_markdown(report: DoctorReport) -> str:
    """A block to paste into a bug report."""
    env = report.environment
    lines = [
        "### tfaccel doctor",
        "",
        f"**{report.verdict}**",
        "",
        "| status | check | finding | fix |",
        "|---|---|---|---|",
    ]
    for check in report.checks:
        fix = f"`{_md_cell(check.fix)}`" if check.fix else ""
        lines.append(
            f"| {check.status.value} | {_md_cell(check.title)} | "
            f"{_md_cell(check.finding)} | {fix} |"
        )
    lines += ["", "<details><summary>environment</summary>", "", "```"]
    for key, value in env.items():
        lines.append(f"{key}: {value}")
    lines += ["```", "", "</details>", ""]
    return "\n".join(lines)
