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


def _notes(m: Measurement) -> Text:
    """Warnings (yellow; "noisy" alone, the spread column gives its figure), then the
    model's TFLOP/s for workload rows (dim)."""
    said = ("noisy" if w.startswith("noisy:") else w for w in m.warnings)
    text = Text("; ".join(said), style="yellow")
    tflops = m.params.get("model_tflops")
    if tflops:
        pct = m.params.get("model_tflops_pct_of_peak")
        share = f", {pct:.0f}% of peak" if pct else ""
        rate = f"{tflops:.0f}" if tflops >= 10 else f"{tflops:.2g}"
        text.append(("; " if m.warnings else "") + f"model {rate} TFLOP/s{share}", "dim")
    return text


def measurement_line(m: Measurement) -> Text:
    """One finished benchmark, as it finishes: name, median, spread, share of peak."""
    if m.error:
        return Text(f"{m.name}  failed: {m.error[:120]}", style="red")
    line = Text(f"{m.name}  ")
    line.append(f"{_v(m.median)} {m.unit}", style="bold")
    if m.spread is not None:
        line.append(f"  spread {m.spread:.0%}", style="dim")  # as the table shows it
    if m.percent_of_peak is not None:
        line.append(f"  {m.percent_of_peak:.0f}% of peak", style="dim")
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


def _empty_columns(ms: Sequence[Measurement]) -> set[str]:
    """Columns no row fills (no peak to compare with on a CPU, no notes): left out, so
    that the rest fit a narrow console; the JSON keeps every field."""
    empty = set()
    if all(m.percent_of_peak is None for m in ms):
        empty.add("% of peak")
    if not any(_notes(m).plain or m.error for m in ms):
        empty.add("notes")
    return empty


def bench_text(r: BenchReport, console: Console) -> None:
    env = r.environment
    gpus = ", ".join(g.get("name") or "?" for g in env.get("gpus", [])) or "no GPU"
    t = Table(
        title=f"tfaccel bench {r.suite}: {gpus} · TF {env.get('tensorflow') or 'none'} · "
        f"driver {env.get('driver') or 'none'}",
        title_justify="left",
    )
    columns = [c for c in _COLUMNS if c[0] not in _empty_columns(r.measurements)]
    for name, justify, _ in columns:
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for m in r.measurements:
        if m.error:
            t.add_row(m.name, *[""] * (len(columns) - 2), Text(m.error[:80], style="red"))
            continue
        t.add_row(*(cell(m) for _, _, cell in columns))
    console.print(t)
    console.print(Text(f"{len(r.measurements)} benchmarks in {r.seconds:.0f} s", style="dim"))
    for name, why in r.skipped:
        console.print(skipped_line(name, why))
    if not r.complete:
        console.print(Text("interrupted: the benchmarks that finished", style="yellow"))


def compare_text(
    rows: Sequence[CompareRow],
    a: str,
    b: str,
    console: Console,
    env: dict[str, tuple[Any, Any]] | None = None,
) -> None:
    console.print(f"bench compare: A = {a}, B = {b}")
    for key, (va, vb) in (env or {}).items():
        console.print(Text(f"  {key} differs: A {va}, B {vb}", style="yellow"))
    both = [r for r in rows if r.a is not None and r.b is not None]
    if not both:
        console.print(Text("no benchmark measured in both files", style="yellow"))
    t = Table(title_justify="left")
    for col in ("benchmark", "A", "B", "unit", "B / A", ""):
        t.add_column(col)
    for r in rows:
        if r.only:
            verdict = Text(f"only in {r.only}", style="dim")
        elif r.better is None and r.ratio is not None and r.threshold is not None:
            verdict = Text(f"within noise (±{r.threshold:.0%})", style="dim")
        else:
            verdict = Text(
                "" if r.better is None else ("better" if r.better else "worse"),
                style="green" if r.better else "red",
            )
        t.add_row(
            r.name,
            "-" if r.only == "B" else _v(r.a),
            "-" if r.only == "A" else _v(r.b),
            r.unit,
            _v(r.ratio, "{:.2f}x"),
            verdict,
        )
    console.print(t)


def _bars(ms: Sequence[Measurement], title: str, percent: bool = False) -> str | None:
    plt = pyplot()

    rows = [m for m in ms if (m.percent_of_peak if percent else m.median) is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.2))
    vals = [(m.percent_of_peak if percent else m.median) or 0.0 for m in rows]
    ax.barh(range(len(rows)), vals, xerr=_ranges(rows, vals), color="#1f77b4",
            error_kw={"ecolor": "#444444", "capsize": 2, "lw": 0.8})  # fmt: skip
    ax.set_yticks(range(len(rows)), labels=[f"{m.name} ({m.unit})" for m in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title)
    fig.tight_layout()
    return png_base64(fig)


def _ranges(rows: Sequence[Measurement], vals: Sequence[float]) -> list[list[float]]:
    """Error bars: each bar's samples from lowest to highest, at the bar's scale."""
    low, high = [], []
    for m, v in zip(rows, vals, strict=True):
        scale = v / m.median if m.median else 0.0
        low.append(max(0.0, (m.median or 0.0) - min(m.samples, default=m.median or 0.0)) * scale)
        high.append(max(0.0, max(m.samples, default=m.median or 0.0) - (m.median or 0.0)) * scale)
    return [low, high]


def compare_html(rows: Sequence[CompareRow], a: str, b: str, path: Path) -> Path:
    """B against A as a chart (B / A per benchmark, the noise band around 1) and a table."""
    changes = [
        Change(r.name, r.ratio, r.threshold or 0.0, r.better) for r in rows if r.ratio is not None
    ]
    img = change_img(changes, 1.0, "B / A", f"{Path(b).name} against {Path(a).name}")
    table = [("benchmark", "A", "B", "B / A", "unit")]
    table += [(r.name, _v(r.a), _v(r.b), _v(r.ratio, "{:.3f}"), r.unit) for r in rows]
    write_atomic(path, before_after_page("tfaccel bench compare", a, b, img, table))
    return path


def bench_html(r: BenchReport, path: Path) -> Path:
    ok = [m for m in r.measurements if not m.error]
    groups: dict[str, list[Measurement]] = {}
    for m in ok:
        groups.setdefault(m.unit, []).append(m)
    imgs = []
    for unit, ms in groups.items():
        png = _bars(ms, f"{unit} (median)")
        if png:
            imgs.append(f"<img alt='{html.escape(unit)}' src='data:image/png;base64,{png}'>")
    pct = _bars(ok, "percent of the GPU's peak", percent=True)
    if pct:
        imgs.append(f"<img alt='percent of peak' src='data:image/png;base64,{pct}'>")
    rows = "".join(
        f"<tr><td>{html.escape(m.name)}</td><td>{_v(m.median)}</td><td>{html.escape(m.unit)}"
        f"</td><td>{_v(m.percent_of_peak, '{:.0f}%')}</td><td>{_v(m.spread, '{:.0%}')}</td>"
        f"<td>{html.escape('; '.join(m.warnings) or (m.error or ''))}</td></tr>"
        for m in r.measurements
    )
    env = html.escape(", ".join(f"{k}: {v}" for k, v in r.environment.items()))
    write_atomic(
        path,
        f"""<!doctype html><html><head><meta charset="utf-8">
<title>tfaccel bench {html.escape(r.suite)}</title><style>body{{font-family:system-ui,
sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:3px 8px}}table{{border-collapse:
collapse}}</style></head><body><h1>tfaccel bench: {html.escape(r.suite)}</h1><p>{env}</p>
<table><tr><th>benchmark</th><th>median</th><th>unit</th><th>% of peak</th><th>spread</th>
<th>notes</th></tr>{rows}</table>{"".join(imgs)}</body></html>""",
    )
    return path


def skipped_line(name: str, why: str) -> Text:
    """A benchmark that does not apply here, and why."""
    return Text(f"skipped: {name}: {why}", style="dim")
