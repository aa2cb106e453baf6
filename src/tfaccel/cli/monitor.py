"""`tfaccel monitor` and `tfaccel power`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.live import Live

from tfaccel.cli._common import (
    FORMAT_OPTION,
    GPU_INDEX_HELP,
    WORKLOAD_HELP,
    duration,
    finite,
    gpu_index_flag,
    gpu_indices,
    group_format,
    handle_errors,
    one_gpu_index,
    positive,
    seconds_of,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import ExitCode, InputError
from tfaccel.monitor.alerts import Thresholds
from tfaccel.monitor.exporter import DEFAULT_ADDR, serve
from tfaccel.monitor.logs import SampleLog
from tfaccel.monitor.power import read_power, reset_power_limit, set_power_limit, sweep
from tfaccel.monitor.sampler import Sampler
from tfaccel.render import Format, dumps, to_jsonable
from tfaccel.render.monitor import power_table, snapshot_view, sweep_table
from tfaccel.results import SCHEMAS, check_writable


@handle_errors
def monitor(
    interval: str = typer.Option(
        "1",
        "--interval",
        "-i",
        # NVML's counters change a few times a second: a shorter interval repeats them
        callback=duration(low=0.1, high=3600),
        help="Time between samples, 0.1s to 1h (a bare number is seconds).",
    ),
    gpus: str = typer.Option(
        None, "--gpu-index", callback=gpu_index_flag, help=GPU_INDEX_HELP + " (default: all)."
    ),
    once: bool = typer.Option(
        False, "--once", help="Print one snapshot and exit (1 on any alert)."
    ),
    log: Path = typer.Option(None, "--log", help="Append samples to FILE.csv or FILE.jsonl."),
    prometheus: int = typer.Option(
        None, "--prometheus", min=1, max=65535, help="Serve Prometheus metrics on this port."
    ),
    bind: str = typer.Option(
        DEFAULT_ADDR,
        "--bind",
        help="Address for --prometheus (default 127.0.0.1: this machine only).",
    ),
    temp: float = typer.Option(
        85.0,
        "--temp-threshold",
        min=20,
        max=130,  # GPUs slow down near 90 C and shut down past about 100 C
        callback=finite,
        help="Temperature alert, C.",
    ),
    mem: float = typer.Option(
        95.0, "--mem-threshold", min=0, max=100, callback=finite, help="Memory alert, percent."
    ),
    stop_after: str = typer.Option(
        None,
        "--duration",
        callback=duration(),
        help="Stop after this long: 90, 5m, 2h (a bare number is seconds).",
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Live GPU health: utilization, memory, temperature, power, clocks, throttle reasons."""
    thresholds = Thresholds(temp_c=temp, mem_pct=mem)
    every_s, for_s = seconds_of(interval) or 1.0, seconds_of(stop_after)
    if log:
        check_writable(log, force=True)  # appended to, never replaced
    sample_log = SampleLog(log) if log else None
    sampler = Sampler(
        gpu_indices(gpus),
        every_s,
        thresholds,
        on_snapshot=sample_log.write if sample_log else None,
    )
    if once:
        sampler.start()
        snap = sampler.latest
        sampler.stop()
        if sample_log:
            sample_log.close()
        assert snap is not None
        if fmt is Format.json:
            write_out(dumps(snap, schema=SCHEMAS["monitor"]))
        else:
            out = stdout_console()
            out.print(snapshot_view(snap, out.width))
        if snap.alerts:
            raise typer.Exit(int(ExitCode.FINDINGS))
        return
    server = None
    sampler.start()
    try:
        if prometheus:
            server = serve(lambda: sampler.latest, prometheus, bind)
            stderr_console().print(f"Prometheus metrics on http://{bind}:{prometheus}/metrics")
        deadline = time.monotonic() + for_s if for_s else None
        if fmt is Format.json:  # one JSON line per snapshot
            last = None
            while deadline is None or time.monotonic() < deadline:
                snap = sampler.latest
                if snap is not None and snap is not last:
                    write_out(json.dumps(to_jsonable(snap)))  # one line each
                    last = snap
                time.sleep(min(every_s, 0.2))
        else:
            latest = sampler.latest
            assert latest is not None
            console = stdout_console()
            with Live(
                snapshot_view(latest, console.width), console=console, refresh_per_second=4
            ) as live:
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(min(every_s, 0.25))
                    snap = sampler.latest
                    if snap is not None:
                        live.update(snapshot_view(snap, console.width))
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a live view ends
    finally:
        sampler.stop()
        if server is not None:
            server.shutdown()
        if sample_log:
            sample_log.close()


power_app = typer.Typer(
    help="Power limits: show, set (root + --yes), reset, sweep.",
    no_args_is_help=False,
    invoke_without_command=True,
)


@power_app.callback()
def _power(ctx: typer.Context, fmt: Format = FORMAT_OPTION) -> None:
    """Show the power limit, default and allowed range, draw and energy of every GPU."""
    if ctx.invoked_subcommand is None:
        _show(fmt=fmt)


@power_app.command("show")
def power_show(ctx: typer.Context, fmt: Format = FORMAT_OPTION) -> None:
    """The power limit, default and allowed range, draw and energy of every GPU (what
    `tfaccel power` alone shows)."""
    _show(fmt=group_format(ctx, fmt))


@handle_errors
def _show(fmt: Format) -> None:
    infos = read_power()
    if fmt is Format.json:
        write_out(dumps({"gpus": infos}))
    else:
        stdout_console().print(power_table(infos))


@power_app.command("set", context_settings={"ignore_unknown_options": True})  # "-5" W
@handle_errors
def power_set(
    ctx: typer.Context,
    watts: float = typer.Argument(..., callback=positive, help="New limit in watts."),
    gpu_text: str = typer.Option(
        "0", "--gpu-index", callback=gpu_index_flag, help=GPU_INDEX_HELP + " (one)."
    ),
    yes: bool = typer.Option(False, "--yes", help="Confirm the change."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Set a GPU's power limit (needs root and --yes; refuses values out of range)."""
    gpu = one_gpu_index(gpu_text, "power set changes")
    old, new = set_power_limit(gpu, watts, yes=yes)
    undo = f"tfaccel power reset --gpu-index {gpu} --yes"
    if group_format(ctx, fmt) is Format.json:
        write_out(dumps({"gpu": gpu, "old_w": old, "new_w": new, "undo": undo}))
    else:
        stdout_console().print(f"GPU {gpu}: power limit {old} W -> {new:g} W (undo: {undo})")


@power_app.command("reset")
@handle_errors
def power_reset(
    ctx: typer.Context,
    gpu_text: str = typer.Option(
        "0", "--gpu-index", callback=gpu_index_flag, help=GPU_INDEX_HELP + " (one)."
    ),
    yes: bool = typer.Option(False, "--yes", help="Confirm the change."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Restore a GPU's default power limit (needs root and --yes)."""
    gpu = one_gpu_index(gpu_text, "power reset changes")
    old, new = reset_power_limit(gpu, yes=yes)
    if group_format(ctx, fmt) is Format.json:
        write_out(dumps({"gpu": gpu, "old_w": old, "new_w": new}))
    else:
        stdout_console().print(f"GPU {gpu}: power limit {old} W -> default {new:g} W")


@power_app.command("sweep")
@handle_errors
def power_sweep(
    ctx: typer.Context,
    workload: str = typer.Argument(
        "resnet50", help="The workload trained at each limit (" + WORKLOAD_HELP + ")"
    ),
    limits: str = typer.Option(..., "--limits", help="Watts, e.g. 300,400,500,700."),
    gpu_text: str = typer.Option(
        "0", "--gpu-index", callback=gpu_index_flag, help=GPU_INDEX_HELP + " (one)."
    ),
    batch: int = typer.Option(256, "--batch", min=1, help="Batch size of the workload."),
    yes: bool = typer.Option(False, "--yes", help="Confirm changing the limit."),
    plot: Path = typer.Option(
        Path("tfaccel-power-sweep.png"), "--plot", help="Throughput and samples/J per limit."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --plot file."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Throughput, samples per joule and temperature at each power limit; restores after."""
    fmt = group_format(ctx, fmt)
    gpu = one_gpu_index(gpu_text, "power sweep measures")
    # the plot: in text mode, and in JSON mode where --plot was given
    given = getattr(ctx.get_parameter_source("plot"), "name", "") == "COMMANDLINE"
    draw = fmt is not Format.json or given
    if draw:
        check_writable(plot, force, hint="tfaccel power sweep ... --plot other.png, or --force")
    try:
        watts = [float(x) for x in limits.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(
            "Cannot read --limits", expected="watts like 300,400,500", received=repr(limits)
        ) from exc
    from tfaccel.monitor.sweep import measure_workload

    with stderr_console().status("power sweep ...") as status:

        def measure(w: float) -> tuple[float | None, float | None, float | None]:
            status.update(f"power limit {w:g} W: training {workload} on GPU {gpu} ...")
            return measure_workload(workload, gpu, batch)

        result = sweep(gpu, watts, measure, yes=yes)
    if fmt is Format.json:
        write_out(dumps(result))
    else:
        stdout_console().print(sweep_table(result))
    if draw:
        from tfaccel.monitor.sweep import sweep_plot

        sweep_plot(result, plot)
    if not result.restored:
        raise typer.Exit(int(ExitCode.GPU))
