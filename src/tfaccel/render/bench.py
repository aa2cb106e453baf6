"""Rendering of `tfaccel bench`: tables, comparisons, and an HTML report with plots."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.bench.results import BenchReport, CompareRow
from tfaccel.bench.timer import Measurement
from tfaccel.render import Change, before_after_page, change_img, png_base64, pyplot
from tfaccel.results import write_atomic


def _v(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _notes(measurement: Measurement) -> Text:
    """Warnings (yellow; "noisy" alone, the spread column gives its figure), then the
    model's TFLOP/s for workload rows (dim)."""
    said = (
        "noisy" if warning.startswith("noisy:") else warning for warning in measurement.warnings
    )
    text = Text("; ".join(said), style="yellow")
    tflops = measurement.params.get("model_tflops")
    if tflops:
        pct = measurement.params.get("model_tflops_pct_of_peak")
        share = f", {pct:.0f}% of peak" if pct else ""
        rate = f"{tflops:.0f}" if tflops >= 10 else f"{tflops:.2g}"
        text.append(("; " if measurement.warnings else "") + f"model {rate} TFLOP/s{share}", "dim")
    return text


def measurement_line(measurement: Measurement) -> Text:
    """One finished benchmark, as it finishes: name, median, spread, share of peak."""
    if measurement.error:
        return Text(f"{measurement.name}  failed: {measurement.error[:120]}", style="red")
    line = Text(f"{measurement.name}  ")
    line.append(f"{_v(measurement.median)} {measurement.unit}", style="bold")
    if measurement.spread is not None:
        line.append(f"  spread {measurement.spread:.0%}", style="dim")  # as the table shows it
    if measurement.percent_of_peak is not None:
        line.append(f"  {measurement.percent_of_peak:.0f}% of peak", style="dim")
    return line


# The table's columns: (header, justify, cell of a measurement).
_COLUMNS: tuple[tuple[str, str, Callable[[Measurement], str | Text]], ...] = (
    ("benchmark", "left", lambda m: m.name),
    ("median", "right", lambda m: _v(m.median)),
    ("unit", "left", lambda m: m.unit),
    ("% of peak", "right", lambda m: _v(m.percent_of_peak, "{:.0f}%")),
    ("spread", "right", lambda m: _v(m.spread, "{:.0%}")),
    ("warm-up s", "right", lambda m: _v(m.warmup_s, "{:.1f}")),
    ("notes", "left", _notes),
)


def _empty_columns(measurements: Sequence[Measurement]) -> set[str]:
    """Columns no row fills (no peak to compare with on a CPU, no notes): left out, so
    that the rest fit a narrow console; the JSON keeps every field."""
    empty = set()
    if all(measurement.percent_of_peak is None for measurement in measurements):
        empty.add("% of peak")
    if not any(_notes(measurement).plain or measurement.error for measurement in measurements):
        empty.add("notes")
    return empty


def bench_text(report: BenchReport, console: Console) -> None:
    env = report.environment
    gpus = ", ".join(gpu.get("name") or "?" for gpu in env.get("gpus", [])) or "no GPU"
    table = Table(
        title=f"tfaccel bench {report.suite}: {gpus} · TF {env.get('tensorflow') or 'none'} · "
        f"driver {env.get('driver') or 'none'}",
        title_justify="left",
    )
    columns = [
        column for column in _COLUMNS if column[0] not in _empty_columns(report.measurements)
    ]
    for name, justify, _ in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for measurement in report.measurements:
        if measurement.error:
            table.add_row(
                measurement.name,
                *[""] * (len(columns) - 2),
                Text(measurement.error[:80], style="red"),
            )
            continue
        table.add_row(*(cell(measurement) for _, _, cell in columns))
    console.print(table)
    console.print(
        Text(f"{len(report.measurements)} benchmarks in {report.seconds:.0f} s", style="dim")
    )
    for name, why in report.skipped:
        console.print(skipped_line(name, why))
    if not report.complete:
        console.print(Text("interrupted: the benchmarks that finished", style="yellow"))


def compare_text(
    rows: Sequence[CompareRow],
    a: str,
    b: str,
    console: Console,
    env: dict[str, tuple[Any, Any]] | None = None,
) -> None:
    console.print(f"bench compare: A = {a}, B = {b}")
    for key, (value_a, value_b) in (env or {}).items():
        console.print(Text(f"  {key} differs: A {value_a}, B {value_b}", style="yellow"))
    both = [row for row in rows if row.a is not None and row.b is not None]
    if not both:
        console.print(Text("no benchmark measured in both files", style="yellow"))
    table = Table(title_justify="left")
    for col in ("benchmark", "A", "B", "unit", "B / A", ""):
        table.add_column(col)
    for row in rows:
        if row.only:
            verdict = Text(f"only in {row.only}", style="dim")
        elif row.better is None and row.ratio is not None and row.threshold is not None:
            verdict = Text(f"within noise (±{row.threshold:.0%})", style="dim")
        else:
            verdict = Text(
                "" if row.better is None else ("better" if row.better else "worse"),
                style="green" if row.better else "red",
            )
        table.add_row(
            row.name,
            "-" if row.only == "B" else _v(row.a),
            "-" if row.only == "A" else _v(row.b),
            row.unit,
            _v(row.ratio, "{:.2f}x"),
            verdict,
        )
    console.print(table)


def _bars(measurements: Sequence[Measurement], title: str, percent: bool = False) -> str | None:
    plt = pyplot()

    rows = [
        measurement
        for measurement in measurements
        if (measurement.percent_of_peak if percent else measurement.median) is not None
    ]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.2))
    vals = [
        (measurement.percent_of_peak if percent else measurement.median) or 0.0
        for measurement in rows
    ]
    ax.barh(range(len(rows)), vals, xerr=_ranges(rows, vals), color="#1f77b4",
            error_kw={"ecolor": "#444444", "capsize": 2, "lw": 0.8})  # fmt: skip
    ax.set_yticks(
        range(len(rows)),
        labels=[f"{measurement.name} ({measurement.unit})" for measurement in rows],
        fontsize=7,
    )
    ax.invert_yaxis()
    ax.set_title(title)
    fig.tight_layout()
    return png_base64(fig)


def _ranges(rows: Sequence[Measurement], vals: Sequence[float]) -> list[list[float]]:
    """Error bars: each bar's samples from lowest to highest, at the bar's scale."""
    low, high = [], []
    for measurement, value in zip(rows, vals, strict=True):
        scale = value / measurement.median if measurement.median else 0.0
        low.append(
            max(
                0.0,
                (measurement.median or 0.0)
                - min(measurement.samples, default=measurement.median or 0.0),
            )
            * scale
        )
        high.append(
            max(
                0.0,
                max(measurement.samples, default=measurement.median or 0.0)
                - (measurement.median or 0.0),
            )
            * scale
        )
    return [low, high]


def compare_html(rows: Sequence[CompareRow], a: str, b: str, path: Path) -> Path:
    """B against A as a chart (B / A per benchmark, the noise band around 1) and a table."""
    changes = [
        Change(row.name, row.ratio, row.threshold or 0.0, row.better)
        for row in rows
        if row.ratio is not None
    ]
    img = change_img(changes, 1.0, "B / A", f"{Path(b).name} against {Path(a).name}")
    table = [("benchmark", "A", "B", "B / A", "unit")]
    table += [(row.name, _v(row.a), _v(row.b), _v(row.ratio, "{:.3f}"), row.unit) for row in rows]
    write_atomic(path, before_after_page("tfaccel bench compare", a, b, img, table))
    return path


def bench_html(report: BenchReport, path: Path) -> Path:
    ok = [item for item in report.measurements if not item.error]
    groups: dict[str, list[Measurement]] = {}
    for item in ok:
        groups.setdefault(item.unit, []).append(item)
    imgs = []
    for unit, measurements in groups.items():
        png = _bars(measurements, f"{unit} (median)")
        if png:
            imgs.append(f"<img alt='{html.escape(unit)}' src='data:image/png;base64,{png}'>")
    pct = _bars(ok, "percent of the GPU's peak", percent=True)
    if pct:
        imgs.append(f"<img alt='percent of peak' src='data:image/png;base64,{pct}'>")
    rows = "".join(
        f"<tr><td>{html.escape(item.name)}</td><td>{_v(item.median)}</td><td>{html.escape(item.unit)}"
        f"</td><td>{_v(item.percent_of_peak, '{:.0f}%')}</td><td>{_v(item.spread, '{:.0%}')}</td>"
        f"<td>{html.escape('; '.join(item.warnings) or (item.error or ''))}</td></tr>"
        for item in report.measurements
    )
    env = html.escape(", ".join(f"{key}: {value}" for key, value in report.environment.items()))
    write_atomic(
        path,
        f"""<!doctype html><html><head><meta charset="utf-8">
<title>tfaccel bench {html.escape(report.suite)}</title><style>body{{font-family:system-ui,
sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:3px 8px}}table{{border-collapse:
collapse}}</style></head><body><h1>tfaccel bench: {html.escape(report.suite)}</h1><p>{env}</p>
<table><tr><th>benchmark</th><th>median</th><th>unit</th><th>% of peak</th><th>spread</th>
<th>notes</th></tr>{rows}</table>{"".join(imgs)}</body></html>""",
    )
    return path


def skipped_line(name: str, why: str) -> Text:
    """A benchmark that does not apply here, and why."""
    return Text(f"skipped: {name}: {why}", style="dim")
