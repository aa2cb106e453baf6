"""Rendering of `tfaccel profile`: text, an HTML report with charts, diffs and gates."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.profile.advice import DiffRow, Finding, Gate
from tfaccel.profile.report import ProfileReport, TopItem
from tfaccel.render import Change, before_after_page, change_img, png_base64, pyplot
from tfaccel.results import write_atomic

_SEV = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def _f(value: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def open_elsewhere(report: ProfileReport) -> str:
    """How to open the same trace in TensorBoard's profiler or XProf."""
    return (
        f"the same trace, op by op: tensorboard --logdir {report.logdir} (Profile tab), "
        f"or xprof --logdir {report.logdir}"
    )


def profile_text(
    r: ProfileReport, findings: Sequence[Finding], gates: Sequence[Gate], console: Console
) -> None:
    console.print(Text(f"profile {r.run} ({r.hardware}) in {r.logdir}", style="bold"))
    if r.note:
        console.print(Text(r.note, style="dim"))
    head = Table(box=None, show_header=False, padding=(0, 1))
    head.add_column(style="dim")
    head.add_column()
    head.add_row(
        "steps",
        # a capture's first and last steps are cut by its edges: whole ones are counted
        f"{len(r.steps)} whole in the trace, {_f(r.step_ms_avg, '{:.2f}')} ms average "
        f"(sd {_f(r.step_ms_std, '{:.2f}')})",
    )
    if r.samples_per_s is not None:
        head.add_row("throughput", f"{r.samples_per_s:,.0f} samples/s ({r.samples_per_step}/step)")
    if _on_gpu(r):
        _gpu_rows(head, r)
    else:
        head.add_row("GPU", "no GPU activity in this trace: its GPU figures are left out")
    if r.peak_memory_bytes:
        head.add_row("peak memory", f"{r.peak_memory_bytes / 2**30:.2f} GiB")
    console.print(head)
    _breakdown_table(r, console)
    for title, items in (
        ("top kernels", r.top_kernels),
        ("top ops (self time)", r.top_ops),
        ("by op type (self time)", r.top_op_types),
    ):
        if items:
            console.print(_top_table(title, items[:8], console.width))
    _findings(findings, gates, r, console)


def _on_gpu(report: ProfileReport) -> bool:
    """Does the trace hold GPU work (its GPU rows then mean something)?"""
    return report.gpu_utilization_pct is not None or bool(
        report.kernel_launches or report.top_kernels
    )


def _gpu_rows(head: Table, report: ProfileReport) -> None:
    head.add_row("GPU compute utilization", _f(report.gpu_utilization_pct, "{:.1f}%"))
    timeline = report.extra.get("timeline") or {}
    if timeline.get("rows"):
        busy = ", ".join(
            f"{row['name'].split('(')[0].strip()} "
            f"{sum(end - start for start, end in row['spans']):.1f} ms"
            for row in timeline["rows"]
        )
        head.add_row(
            "one step on the GPU", f"{timeline['step_ms']:.1f} ms: busy {busy} (--html draws it)"
        )
    head.add_row(
        "memory copies", _f(report.memcpy_pct, "{:.1f}% of step time with no kernel beside")
    )
    head.add_row(
        "kernel launch latency",
        f"median {_f(report.launch_latency_us_median)} us, "
        f"p90 {_f(report.launch_latency_us_p90)} us; {report.kernel_launches or 'n/a'} launches",
    )
    head.add_row("16-bit compute", _f(report.pct_16bit, "{:.0f}%"))
    head.add_row(
        "tensor cores",
        f"used {_f(report.tensor_core_used_pct, '{:.0f}%')} / eligible "
        f"{_f(report.tensor_core_eligible_pct, '{:.0f}%')} of kernel time",
    )


def _breakdown_table(report: ProfileReport, console: Console) -> None:
    if report.breakdown_pct:
        table = Table(title="step time breakdown", title_justify="left", box=None, padding=(0, 1))
        table.add_column("part")
        table.add_column("share", justify="right")
        for category, percent in sorted(report.breakdown_pct.items(), key=lambda item: -item[1]):
            if percent > 0.05:
                table.add_row(category, f"{percent:.1f}%")
        console.print(table)


def _top_table(title: str, items: Sequence[TopItem], width: int) -> Table:
    """Top kernels or ops in `width` columns: each name on one line, its end kept (an
    op's own name ends its scope path) behind an ellipsis; whole names are in the JSON.
    The tensor-core column only where some item has a tensor-core verdict."""
    tensor_cores = any(item.tensor_core for item in items)
    kind_w = min(width // 5, max(len("type/op"), *(len(item.kind) for item in items)))
    fixed = kind_w + 8 + 6 + 6 + (8 if tensor_cores else 0)  # type/op, total ms, share, count, tc
    name_w = max(12, width - fixed - 2 * (5 + tensor_cores))
    table = Table(title=title, title_justify="left", box=None, padding=(0, 1))
    table.add_column("name", no_wrap=True, max_width=name_w)
    table.add_column("type/op", no_wrap=True, overflow="ellipsis", max_width=kind_w)
    for col in ("total ms", "share", "count"):
        table.add_column(col, justify="right", no_wrap=True)
    if tensor_cores:
        table.add_column("tensor cores", overflow="fold", max_width=8)
    for item in items:
        row = [
            short_name(item.name, name_w),
            item.kind,
            f"{item.total_us / 1e3:.2f}",
            _f(item.share_pct, "{:.1f}%"),
            str(item.count),
        ]
        table.add_row(*row, *([item.tensor_core or ""] if tensor_cores else []))
    return table


def short_name(name: str, width: int) -> str:
    """`name` in `width` characters: its end kept, after "...", cut at a "/" or "::"
    ("StatefulPartitionedCall/.../dense_1/MatMul" -> ".../dense_1/MatMul")."""
    if len(name) <= width:
        return name
    tail = name[-(width - 1) :]
    cuts = [i for i in (tail.find("/"), tail.find("::")) if 0 <= i < len(tail) - 2]
    if cuts:
        tail = tail[min(cuts) :]
    return "\u2026" + tail


def _findings(
    findings: Sequence[Finding], gates: Sequence[Gate], r: ProfileReport, console: Console
) -> None:
    table = Table(title="findings", title_justify="left", box=None, padding=(0, 1))
    table.add_column("")
    table.add_column("finding")
    for finding in findings:
        cell = Text(finding.text)
        if finding.action:
            cell.append(f"\n-> {finding.action}", style="cyan")
        if finding.expected:
            cell.append(f"\n   expected: {finding.expected}", style="dim")
        table.add_row(Text(finding.severity, style=_SEV[finding.severity]), cell)
    console.print(table)
    console.print(Text(open_elsewhere(r), style="dim"))
    for gate in gates:
        console.print(
            Text(
                f"gate {gate.metric} {gate.op} {gate.value:g}: {_f(gate.actual)} "
                + ("passed" if gate.passed else "FAILED"),
                style="green" if gate.passed else "bold red",
            )
        )


def diff_html(a: ProfileReport, b: ProfileReport, rows: Sequence[DiffRow], path: Path) -> Path:
    """B against A as a chart: each metric's change, coloured better / worse / within the
    noise (the band), and the table."""
    changes = [
        Change(row.metric, row.change_pct, row.threshold_pct or 0.0, row.better)
        for row in rows
        if row.change_pct is not None
    ]
    img = change_img(changes, 0.0, "change from A to B, %", f"{a.run} -> {b.run}")
    table = [("metric", "A", "B", "change")]
    table += [
        (row.metric, _f(row.a, "{:.2f}"), _f(row.b, "{:.2f}"), _f(row.change_pct, "{:+.1f}%"))
        for row in rows
    ]
    page = before_after_page(
        "tfaccel profile diff", f"{a.logdir} ({a.run})", f"{b.logdir} ({b.run})", img, table
    )
    write_atomic(path, page)
    return path


def diff_text(
    a: ProfileReport, b: ProfileReport, rows: Sequence[DiffRow], console: Console
) -> None:
    table = Table(title=f"profile diff: {a.run} -> {b.run}", title_justify="left")
    for col in ("metric", "A", "B", "change", ""):
        table.add_column(col)
    for row in rows:
        if row.a is None and row.b is None:
            continue
        if row.better is not None:
            mark = Text("better" if row.better else "worse", style="green" if row.better else "red")
        elif row.change_pct is not None and row.threshold_pct is not None:
            mark = Text(f"within noise (±{row.threshold_pct:.0f}%)", style="dim")
        else:
            mark = Text("")
        table.add_row(
            row.metric,
            _f(row.a, "{:.2f}"),
            _f(row.b, "{:.2f}"),
            _f(row.change_pct, "{:+.1f}%"),
            mark,
        )
    console.print(table)


def _breakdown_png(report: ProfileReport) -> str | None:
    if not report.steps:
        return None
    plt = pyplot()

    cats = [category for category in report.breakdown_pct if report.breakdown_pct[category] > 0.05]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    left = [0.0] * len(report.steps)
    for cat in cats:
        vals = [step.parts_ms.get(cat, 0.0) for step in report.steps]
        ax.barh(range(len(report.steps)), vals, left=left, label=cat)
        left = [base + part for base, part in zip(left, vals, strict=True)]
    ax.set_yticks(range(len(report.steps)), labels=[step.step for step in report.steps], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title("step time breakdown")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return png_base64(fig)


def _timeline_png(report: ProfileReport) -> str | None:
    """One step on the GPU: each stream's busy intervals, and the copies."""
    timeline = report.extra.get("timeline") or {}
    rows = timeline.get("rows") or []
    if not rows:
        return None
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.2))
    for i, row in enumerate(rows):
        color = "#d62728" if row["kind"] == "copies" else "#1f77b4"
        ax.broken_barh(
            [(start, end - start) for start, end in row["spans"]], (i - 0.35, 0.7), color=color
        )
    ax.set_yticks(range(len(rows)), labels=[row["name"][:40] for row in rows], fontsize=7)
    ax.set_xlim(0, timeline.get("step_ms") or None)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the step's start (blue: kernels, red: copies; white: idle)")
    ax.set_title("timeline of one step on the GPU")
    fig.tight_layout()
    return png_base64(fig)


def profile_html(report: ProfileReport, findings: Sequence[Finding], path: Path) -> Path:
    """A self-contained HTML report: metrics, findings, breakdown chart, a timeline of
    one step, top ops/kernels."""
    png = _breakdown_png(report)
    timeline = _timeline_png(report)
    rows = "".join(
        f"<tr class='{html.escape(finding.severity)}'><td>{html.escape(finding.severity)}</td>"
        f"<td>{html.escape(finding.text)}</td><td>{html.escape(finding.action or '')}</td>"
        f"<td>{html.escape(finding.expected or '')}</td></tr>"
        for finding in findings
    )

    def top(items: Sequence[TopItem], title: str) -> str:
        body = "".join(
            f"<tr><td>{html.escape(i.name)}</td><td>{html.escape(i.kind)}</td>"
            f"<td>{i.total_us / 1e3:.2f}</td><td>{_f(i.share_pct, '{:.1f}%')}</td>"
            f"<td>{i.count}</td></tr>"
            for i in items
        )
        return (
            (
                f"<h2>{title}</h2><table><tr><th>name</th><th>type</th><th>ms</th>"
                f"<th>share</th><th>count</th></tr>{body}</table>"
            )
            if body
            else ""
        )

    metrics = [
        ("steps", f"{len(report.steps)}, {_f(report.step_ms_avg, '{:.2f}')} ms average"),
        ("GPU compute utilization", _f(report.gpu_utilization_pct, "{:.1f}%")),
        ("throughput", _f(report.samples_per_s, "{:,.0f} samples/s")),
        ("memory copies", _f(report.memcpy_pct, "{:.1f}% of step time with no kernel beside")),
        ("kernel launch latency", f"{_f(report.launch_latency_us_median)} us median"),
        ("16-bit compute", _f(report.pct_16bit, "{:.0f}%")),
        (
            "peak memory",
            _f(
                report.peak_memory_bytes / 2**30 if report.peak_memory_bytes else None, "{:.2f} GiB"
            ),
        ),
    ]
    metric_rows = "".join(
        f"<tr><td>{metric}</td><td>{html.escape(value)}</td></tr>" for metric, value in metrics
    )
    chart = f"<img alt='step time breakdown' src='data:image/png;base64,{png}'>" if png else ""
    if timeline:
        chart += f"<br><img alt='timeline of one step' src='data:image/png;base64,{timeline}'>"
    doc = f"""<!doctype html><html><head><meta charset="utf-8">
<title>tfaccel profile {html.escape(report.run)}</title><style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}}
table{{border-collapse:collapse;margin:.5em 0}} td,th{{border:1px solid #ccc;padding:4px 8px}}
tr.fail td{{background:#fdd}} tr.warn td{{background:#ffd}} tr.ok td{{background:#dfd}}
</style></head><body>
<h1>tfaccel profile: {html.escape(report.run)} ({html.escape(report.hardware)})</h1>
<p>{html.escape(report.note or "")}</p><p><code>{html.escape(open_elsewhere(report))}</code></p>
<table>{metric_rows}</table>
<h2>findings</h2><table><tr><th></th><th>finding</th><th>action</th><th>expected</th></tr>
{rows}</table>{chart}{top(report.top_kernels, "top kernels")}{top(report.top_ops, "top ops")}
{top(report.top_op_types, "by op type")}
</body></html>"""
    write_atomic(path, doc)
    return path
