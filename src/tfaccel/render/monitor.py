"""Rendering of `tfaccel monitor` and `tfaccel power`."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tfaccel.monitor.metrics import Snapshot
from tfaccel.monitor.power import PowerInfo, SweepResult

NA = "n/a"


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return NA if v is None else fmt.format(v)


def _bar(pct: float | None, width: int = 10) -> Text:
    if pct is None:
        return Text(NA, style="dim")
    n = max(0, min(width, round(pct / 100 * width)))
    style = "green" if pct < 70 else ("yellow" if pct < 90 else "red")
    t = Text("█" * n, style=style)
    t.append("░" * (width - n), style="dim")
    t.append(f" {pct:3.0f}%")
    return t


# Under this many columns the view drops the memory clock, PCIe and ECC columns (an
# uncorrected ECC error still raises an alert) and memory in GiB, and draws shorter bars.
COMPACT_BELOW = 140


def snapshot_view(snap: Snapshot, width: int | None = None) -> Group:
    compact = width is not None and width < COMPACT_BELOW
    bar = 5 if compact else 10
    columns = ["GPU", "util", "mem", "temp", "power", "SM clock"]
    columns += [] if compact else ["mem clock", "PCIe tx/rx", "ECC"]
    t = Table(box=None, padding=(0, 1), header_style="bold")
    for col in [*columns, "throttle"]:
        t.add_column(
            col,
            no_wrap=col != "throttle",
            overflow="fold" if col == "throttle" else "ellipsis",  # never a cut-off number
            min_width=12 if col == "throttle" else None,
        )
    for g in snap.gpus:
        if g.error:
            t.add_row(str(g.index), Text(f"LOST: {g.error}", style="bold red"))
            continue
        temp = Text(_f(g.temp_c, "{:.0f} C"))
        if g.temp_slowdown_c:
            temp.append(f" /{g.temp_slowdown_c:.0f}", style="dim")
        mem = _bar(g.mem_pct, bar)
        if not compact:
            mem.append(
                f" {(g.mem_used_mib or 0) / 1024:.1f}/{(g.mem_total_mib or 0) / 1024:.0f} G",
                style="dim",
            )
        cells: list[object] = [
            f"{g.index} {g.name or ''}".removesuffix(" ") if not compact else str(g.index),
            _bar(g.util_gpu_pct, bar),
            mem,
            temp,
            f"{_f(g.power_w)}/{_f(g.power_limit_w)} W",
            f"{_f(g.sm_clock_mhz)}/{_f(g.sm_clock_max_mhz)}",
        ]
        if not compact:
            cells += [
                f"{_f(g.mem_clock_mhz)}/{_f(g.mem_clock_max_mhz)}",
                f"{_f(g.pcie_tx_mbs)}/{_f(g.pcie_rx_mbs)} MB/s",
                f"{_f(g.ecc_corrected)}/{_f(g.ecc_uncorrected)}",
            ]
        cells.append(
            Text(
                ", ".join(g.throttle) or "-",
                style="yellow" if any(r not in ("gpu_idle",) for r in g.throttle) else "dim",
            )
        )
        t.add_row(*cells)  # type: ignore[arg-type]
    names = {g.name for g in snap.gpus if g.name and not g.error}
    head: list[object] = [Text(", ".join(sorted(names)), style="bold")] if compact and names else []
    parts: list[object] = [*head, t]
    procs = [(g.index, p) for g in snap.gpus for p in g.processes]
    if procs:
        pt = Table(title="processes", title_justify="left", box=None, padding=(0, 1))
        for col in ("GPU", "pid", "name", "memory"):
            pt.add_column(col)
        for gi, (pid, name, mib) in procs:
            pt.add_row(str(gi), str(pid), name, _f(mib, "{:,.0f} MiB"))
        parts.append(pt)
    for a in snap.alerts:
        parts.append(
            Text(f"! {a.message}", style="bold red" if a.severity == "critical" else "yellow")
        )
    return Group(*parts)  # type: ignore[arg-type]


def power_table(infos: Sequence[PowerInfo]) -> Table:
    t = Table(title="power", title_justify="left")
    for col in ("GPU", "limit", "default", "allowed range", "drawing", "energy since load"):
        t.add_column(col)
    for p in infos:
        t.add_row(
            f"{p.index} {p.name or ''}",
            _f(p.limit_w, "{:g} W"),
            _f(p.default_limit_w, "{:g} W"),
            f"{_f(p.min_limit_w, '{:g}')}-{_f(p.max_limit_w, '{:g}')} W",
            _f(p.draw_w, "{:g} W"),
            _f(p.energy_j, "{:,.0f} J"),
        )
    return t


def sweep_table(res: SweepResult) -> Group:
    t = Table(title=f"power sweep, GPU {res.index}", title_justify="left")
    for col in ("limit", "samples/s", "mean power", "samples/J", "max temp", "note"):
        t.add_column(col)
    for p in res.points:
        t.add_row(
            f"{p.limit_w:g} W",
            _f(p.samples_per_s, "{:,.0f}"),
            _f(p.power_mean_w, "{:.0f} W"),
            _f(p.samples_per_j, "{:.2f}"),
            _f(p.temp_max_c, "{:.0f} C"),
            p.error or "",
        )
    restore = Text(
        f"original limit {_f(res.original_limit_w, '{:g} W')} restored"
        if res.restored
        else f"RESTORE FAILED: {res.restore_error}",
        style="green" if res.restored else "bold red",
    )
    return Group(t, restore)
