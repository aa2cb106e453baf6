"""`tfaccel hw`: what the GPUs are, how they rank for a workload, spec comparison."""

from __future__ import annotations

import typer

from tfaccel.cli._common import FORMAT_OPTION, handle_errors, stdout_console, write_out
from tfaccel.errors import GpuError, InputError
from tfaccel.hardware import rank as rankmod
from tfaccel.hardware import specs as specmod
from tfaccel.hardware.inventory import read_inventory
from tfaccel.hardware.tiers import judge_values
from tfaccel.render import Format, dumps
from tfaccel.render.hardware import compare_text, inventory_text, rank_text, spec_list_text
from tfaccel.results import SCHEMAS


def _spec_tier(s: specmod.GpuSpec):  # type: ignore[no-untyped-def]
    return judge_values(
        s.key, s.cuda_cores, s.memory_gb, s.memory_bandwidth_gbs, s.compute_capability
    )


@handle_errors
def hw(
    names: list[str] = typer.Argument(None, help="GPU names for --compare (spec keys)."),
    compare: bool = typer.Option(
        False, "--compare", help="Compare spec entries side by side, e.g. --compare A100-80GB H200."
    ),
    rank: str = typer.Option(
        None,
        "--rank",
        help="Rank the spec file's GPUs for a workload: " + ", ".join(rankmod.PROFILES) + ".",
    ),
    list_specs: bool = typer.Option(False, "--list-specs", help="List the GPUs in the spec file."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """What the GPUs are: NVML inventory, tiers, topology; or spec comparisons and rankings."""
    if names and not compare:
        raise InputError(
            "GPU names were given without --compare",
            expected="tfaccel hw --compare NAME NAME ...",
            received=" ".join(names),
        )
    if list_specs:
        _list_specs(fmt)
    elif compare:
        _compare(names, fmt)
    elif rank:
        _rank(rank, fmt)
    else:
        _inventory(fmt)


def _list_specs(fmt: Format) -> None:
    specs = specmod.all_specs()
    if fmt is Format.json:
        write_out(dumps({"specs": list(specs)}))
    else:
        spec_list_text(specs, stdout_console())


def _compare(names: list[str] | None, fmt: Format) -> None:
    if not names or len(names) < 2:
        raise InputError(
            "--compare needs at least two GPU names",
            expected="tfaccel hw --compare A100-80GB H200",
            received=" ".join(names or []) or "nothing",
            hint="tfaccel hw --list-specs",
        )
    chosen = [specmod.get_spec(name) for name in names]
    tiers = [_spec_tier(spec) for spec in chosen]
    if fmt is Format.json:
        write_out(dumps({"specs": chosen, "tiers": tiers}))
    else:
        compare_text(chosen, tiers, stdout_console())


def _rank(rank: str, fmt: Format) -> None:
    rows = rankmod.rank(specmod.all_specs(), rank)
    local = None
    try:
        inv = read_inventory()
        local = next((gpu.spec_key for gpu in inv.gpus if gpu.spec_key), None)
    except Exception:
        pass
    if fmt is Format.json:
        write_out(dumps({"workload": rankmod.profile(rank), "rows": rows, "local": local}))
    else:
        rank_text(rank, rows, local, stdout_console())


def _inventory(fmt: Format) -> None:
    try:
        inv = read_inventory()
    except GpuError as exc:
        exc.hint = (
            "tfaccel doctor explains why; spec data works without a GPU: "
            "tfaccel hw --compare A100-80GB H200"
        )
        raise
    tiers = [
        judge_values(
            f"GPU {gpu.index}",
            gpu.cuda_cores,
            gpu.memory_total_gb,
            gpu.bandwidth_theoretical_gbs,
            gpu.compute_capability,
        )
        for gpu in inv.gpus
    ]
    if fmt is Format.json:
        write_out(dumps({"inventory": inv, "tiers": tiers}, schema=SCHEMAS["hw"]))
    else:
        inventory_text(inv, tiers, stdout_console())
