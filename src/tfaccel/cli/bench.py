"""`tfaccel bench micro | WORKLOAD | all | compare A B`."""

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
from tfaccel.bench.suite import (
    extra_benches,
    micro_benches,
    run_suite,
    share_gpu_memory,
    workload_benches,
)
from tfaccel.bench.timer import Measurement
from tfaccel.cli._common import (
    FORMAT_OPTION,
    handle_errors,
    operands,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import InputError
from tfaccel.optimize.apply import set_xla_options
from tfaccel.optimize.settings import XLA_OPTIONS
from tfaccel.render import Format, dumps
from tfaccel.render.bench import bench_html, bench_text, compare_text, measurement_line
from tfaccel.results import check_writable, write_atomic
from tfaccel.workloads import BUILTIN

WORKLOAD_BATCH = {"resnet50": 256, "bert": 128, "bert_hub": 128, "tiny": 128}
QUICK_BATCH = 8  # --quick without --batch: a few seconds a step even on a laptop's CPU
EXTRAS = ("yolo", "conv3d", "gpt2", "remat", "resnet50-inference")


@handle_errors
def bench(
    what: list[str] = typer.Argument(
        ..., help="micro, a workload (" + ", ".join(BUILTIN) + "), all, or compare A.json B.json."
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Small sizes and few repeats (training at batch 8 unless --batch).",
    ),
    batch: int = typer.Option(None, "--batch", help="Batch size for workloads."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the results JSON here."),
    html: Path = typer.Option(None, "--html", help="Write an HTML report with plots here."),
    force: bool = typer.Option(False, "--force", help="Replace existing --out/--html files."),
    xla_options: str = typer.Option(
        "",
        "--xla-options",
        help="XLA compiler options for every benchmark, comma-separated: "
        + ", ".join(XLA_OPTIONS)
        + " (see tfaccel.configure). Recorded in the results' environment.",
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """A TensorFlow GPU benchmark suite, against the GPU's peak."""
    if what[0] == "compare":
        path_a, path_b = operands(
            what, 2, "compare takes two result files", "tfaccel bench compare A.json B.json"
        )
        ra, rb = load_report(path_a), load_report(path_b)
        rows, env = compare(ra, rb), environment_differences(ra, rb)
        if fmt is Format.json:
            write_out(
                dumps(
                    {
                        "a": path_a,
                        "b": path_b,
                        "rows": rows,
                        "environment_differences": {k: list(v) for k, v in env.items()},
                    }
                )
            )
        else:
            compare_text(rows, path_a, path_b, stdout_console(), env)
        return
    for path in (out, html):
        if path is not None:
            check_writable(path, force)
    if xla_options:
        set_xla_options(x.strip() for x in xla_options.split(",") if x.strip())

    def batch_for(workload: str) -> int:
        return batch or (QUICK_BATCH if quick else WORKLOAD_BATCH.get(workload, 64))

    benches = []
    for item in what:
        if item == "micro":
            benches += micro_benches(quick)
        elif item == "all":
            benches += micro_benches(quick)
            for w in ("resnet50", "bert_hub"):
                benches += workload_benches(w, batch_for(w), quick)
            for extra in ("resnet50-inference", "yolo", "gpt2", "conv3d", "remat"):
                benches += extra_benches(extra, quick) or []
        elif (found := extra_benches(item, quick)) is not None:
            benches += found
        elif item in BUILTIN or ":" in item:
            benches += workload_benches(item, batch_for(item), quick)
        else:
            raise InputError(
                f"Unknown benchmark {item!r}",
                expected="micro, all, compare, or one of " + ", ".join(BUILTIN),
                received=item,
            )
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
        shown = 0

        def on_progress(name: str, m: Measurement | None) -> None:
            if name not in started:
                started.add(name)
                progress.update(task, description=f"running {name}")
            else:
                progress.advance(task)

        def on_partial(so_far: BenchReport) -> None:
            # a line per finished benchmark, and --out rewritten after each, so that an
            # interrupted suite keeps what finished (complete: false)
            nonlocal shown
            for m in so_far.measurements[shown:]:
                progress.console.print(measurement_line(m))
            shown = len(so_far.measurements)
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
