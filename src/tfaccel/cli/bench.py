"""`tfaccel bench [run] micro | WORKLOAD ... | all`, and `tfaccel bench compare A B`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tfaccel.bench.results import (
    BenchReport,
    compare,
    environment_differences,
    load_report,
    report_json,
)
from tfaccel.bench.suite import run_suite, select, share_gpu_memory
from tfaccel.bench.timer import Measurement
from tfaccel.cli._common import (
    FORMAT_OPTION,
    default_subcommand,
    handle_errors,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import ExitCode
from tfaccel.optimize.environment import set_xla_options
from tfaccel.optimize.settings import XLA_OPTIONS
from tfaccel.render import Format, dumps
from tfaccel.render.bench import (
    bench_html,
    bench_text,
    compare_html,
    compare_text,
    measurement_line,
    skipped_line,
)
from tfaccel.results import check_writable, write_atomic
from tfaccel.workloads import BUILTIN

bench_app = typer.Typer(
    cls=default_subcommand("run"),
    help="A TensorFlow GPU benchmark suite, against the GPU's peak: run (the verb taken "
    "when none is named: tfaccel bench resnet50), compare.",
)


@bench_app.command("run")
@handle_errors
def bench(
    what: list[str] = typer.Argument(
        ..., help="micro, a workload (" + ", ".join(BUILTIN) + "), several, or all."
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Small sizes and few repeats (training at batch 8 unless --batch).",
    ),
    batch: int = typer.Option(None, "--batch", min=1, help="Batch size for workloads."),
    out: Path = typer.Option(None, "--output", "-o", "--out", help="Write the results JSON here."),
    html: Path = typer.Option(None, "--html", help="Write an HTML report with plots here."),
    force: bool = typer.Option(False, "--force", help="Replace existing --output/--html files."),
    xla_options: str = typer.Option(
        "",
        "--xla-options",
        help="XLA compiler options for every benchmark, comma-separated: "
        + ", ".join(XLA_OPTIONS)
        + " (see tfaccel.configure). Recorded in the results' environment.",
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Run benchmarks: micro-benchmarks against the GPU's peak, or workloads' throughput."""
    for path in (out, html):
        if path is not None:
            check_writable(path, force)
    if xla_options:
        set_xla_options(x.strip() for x in xla_options.split(",") if x.strip())

    benches = select(what, quick, batch)
    share_gpu_memory()  # the checkpointing benchmark trains in child processes
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    ) as progress:
        task = progress.add_task("benchmarks", total=len(benches))

        started: set[str] = set()
        shown = shown_skipped = 0

        def on_progress(name: str, m: Measurement | None) -> None:
            if name not in started:
                started.add(name)
                progress.update(task, description=f"running {name}")
            else:
                progress.advance(task)

        def on_partial(so_far: BenchReport) -> None:
            # a line per finished benchmark, and --out rewritten after each, so that an
            # interrupted suite keeps what finished (complete: false)
            nonlocal shown, shown_skipped
            for measurement in so_far.measurements[shown:]:
                progress.console.print(measurement_line(measurement))
            for name, why in so_far.skipped[shown_skipped:]:
                progress.console.print(skipped_line(name, why))
            shown, shown_skipped = len(so_far.measurements), len(so_far.skipped)
            if out is not None:
                write_atomic(out, report_json(so_far))

        report = run_suite(" ".join(what), benches, on_progress, on_partial=on_partial)
    if out is not None:
        write_atomic(out, report_json(report))
    if html is not None:
        bench_html(report, html)
    if fmt is Format.json:
        write_out(report_json(report))
    else:
        bench_text(report, stdout_console())


@bench_app.command("compare")
@handle_errors
def compare_cmd(
    path_a: str = typer.Argument(..., metavar="A.json", help="Results before (bench --output)."),
    path_b: str = typer.Argument(..., metavar="B.json", help="Results after."),
    html: Path = typer.Option(None, "--html", help="Also write a before/after chart here."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --html file."),
    fail_worse: bool = typer.Option(
        False,
        "--fail-worse",
        help="Exit 1 when any benchmark of B is worse than A's beyond the noise (a CI gate).",
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Two result files side by side: each benchmark's ratio, beyond the noise or not."""
    if html is not None:
        check_writable(html, force)
    report_a, report_b = load_report(path_a), load_report(path_b)
    rows, env = compare(report_a, report_b), environment_differences(report_a, report_b)
    if fmt is Format.json:
        diffs = {key: list(values) for key, values in env.items()}
        write_out(dumps({"a": path_a, "b": path_b, "rows": rows, "environment_differences": diffs}))
    else:
        compare_text(rows, path_a, path_b, stdout_console(), env)
    if html is not None:
        compare_html(rows, path_a, path_b, html)
    if fail_worse and any(row.better is False for row in rows):
        raise typer.Exit(int(ExitCode.FINDINGS))
