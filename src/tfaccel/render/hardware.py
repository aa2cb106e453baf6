"""Rendering of `tfaccel hw`: inventory, tiers, topology, spec comparison, ranking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.hardware.inventory import GpuInfo, Inventory
from tfaccel.hardware.rank import RankRow
from tfaccel.hardware.specs import GpuSpec
from tfaccel.hardware.tiers import BELOW, TierVerdict
from tfaccel.hardware.topology import PATH_HELP

NA = "n/a"
_TIER_STYLE = {
    "extreme": "bold green",
    "recommended": "green",
    "basic": "yellow",
    BELOW: "red",
    None: "dim",
}


def _v(value: Any, fmt: str = "{}", unit: str = "") -> str:
    if value is None:
        return NA
    return fmt.format(value) + unit


def _gpu_rows(gpu: GpuInfo) -> list[tuple[str, str]]:
    link = gpu.pcie
    pcie = (
        NA
        if link.gen_current is None
        else (
            f"Gen{link.gen_current} x{link.width_current} (max Gen{link.gen_max} x{link.width_max})"
        )
    )
    if link.gen_below_max and not link.width_downtrained:
        pcie += "; lower generation while idle is normal power saving"
    return [
        ("name", _v(gpu.name)),
        ("UUID", _v(gpu.uuid)),
        ("PCI bus", _v(gpu.pci_bus_id)),
        ("compute capability", f"{_v(gpu.compute_capability)} ({_v(gpu.architecture)})"),
        ("SMs / CUDA cores", f"{_v(gpu.sm_count)} / {_v(gpu.cuda_cores, '{:,}')}"),
        (
            "memory",
            f"{_v(gpu.memory_total_mib, '{:,}', ' MiB')} total, "
            f"{_v(gpu.memory_free_mib, '{:,}', ' MiB')} free",
        ),
        (
            "memory bus / clock",
            f"{_v(gpu.memory_bus_width_bits, '{}', '-bit')} at "
            f"{_v(gpu.memory_clock_max_mhz, '{}', ' MHz')} max",
        ),
        ("bandwidth (theoretical)", _v(gpu.bandwidth_theoretical_gbs, "{:,.0f}", " GB/s")),
        (
            "SM clock",
            f"{_v(gpu.sm_clock_mhz, '{}', ' MHz')} now, "
            f"{_v(gpu.sm_clock_max_mhz, '{}', ' MHz')} max",
        ),
        (
            "power",
            f"limit {_v(gpu.power_limit_w, '{:g}', ' W')} (default "
            f"{_v(gpu.power_default_limit_w, '{:g}', ' W')}, range "
            f"{_v(gpu.power_min_limit_w, '{:g}')}-{_v(gpu.power_max_limit_w, '{:g}', ' W')}); "
            f"TDP {_v(gpu.tdp_w, '{:g}', ' W')}; drawing {_v(gpu.power_draw_w, '{:g}', ' W')}",
        ),
        ("PCIe", pcie),
        (
            "MIG / ECC / persistence",
            f"{_onoff(gpu.mig_enabled)} / {_onoff(gpu.ecc_enabled)} / "
            f"{_onoff(gpu.persistence_enabled)}",
        ),
        ("NUMA node / CPUs", f"{_v(gpu.numa_node)} / {_v(gpu.cpu_affinity)}"),
        ("spec entry", _v(gpu.spec_key)),
    ]


def _onoff(value: bool | None) -> str:
    return NA if value is None else ("on" if value else "off")


def inventory_text(inv: Inventory, tiers: Sequence[TierVerdict], console: Console) -> None:
    console.print(
        Text(
            f"driver {_v(inv.driver_version)} · CUDA {_v(inv.cuda_version)} · "
            f"NVML {_v(inv.nvml_version)} · {len(inv.gpus)} GPU(s)",
            style="bold",
        )
    )
    if inv.error:
        console.print(Text(f"NVML error: {inv.error}", style="red"))
    for group in _alike(inv, tiers):
        gpu, verdict = group[0]
        table = Table(
            title=f"GPU {gpu.index}"
            + (f" (and {_indices(group[1:])}, alike)" if len(group) > 1 else ""),
            show_header=False,
            box=None,
            padding=(0, 1),
            title_justify="left",
            title_style="bold",
        )
        table.add_column(style="dim", no_wrap=True)
        table.add_column()
        for field, text in _gpu_rows(gpu):
            table.add_row(field, text)
        ports = _ports(inv, gpu.index)
        if ports is not None:
            table.add_row("NVLink", _nvlink(ports))
        console.print(table)
        console.print(tier_table(verdict))
        if len(group) > 1:
            console.print(_per_gpu_table(inv, [x for x, _ in group]))
        for warning in gpu.warnings:
            console.print(Text(f"  ! {warning}", style="yellow"))
    if inv.topology is not None:
        console.print(topology_table(inv))
    for note in inv.notes:
        console.print(Text(note, style="dim"))


def _ports(inv: Inventory, index: int) -> list[Any] | None:
    """GPU `index`'s NVLink ports, where the topology has them."""
    if inv.topology is None or index >= len(inv.topology.nvlink_ports):
        return None
    return list(inv.topology.nvlink_ports[index])


def _nvlink(ports: list[Any]) -> str:
    active = [port for port in ports if port.active]
    versions = sorted({port.version for port in active if port.version})
    return f"{len(active)} of {len(ports)} links active" + (
        f" (NVLink {', '.join(map(str, versions))})" if versions else ""
    )


def _static(gpu: GpuInfo, verdict: TierVerdict) -> tuple[object, ...] | None:
    """What makes two GPUs alike in the report (model, limits, modes, tier); None for a
    GPU with warnings, which keeps a card of its own."""
    if gpu.warnings:
        return None
    return (
        gpu.name,
        gpu.compute_capability,
        gpu.sm_count,
        gpu.memory_total_mib,
        gpu.memory_bus_width_bits,
        gpu.memory_clock_max_mhz,
        gpu.sm_clock_max_mhz,
        gpu.power_limit_w,
        gpu.power_default_limit_w,
        gpu.power_min_limit_w,
        gpu.power_max_limit_w,
        gpu.tdp_w,
        gpu.mig_enabled,
        gpu.ecc_enabled,
        gpu.persistence_enabled,
        gpu.spec_key,
        gpu.pcie.gen_max,
        gpu.pcie.width_max,
        verdict.overall,
    )


def _alike(inv: Inventory, tiers: Sequence[TierVerdict]) -> list[list[tuple[GpuInfo, TierVerdict]]]:
    """The GPUs in groups of identical ones (in index order), so that eight H200s make
    one card and a table of what differs between them, not eight cards."""
    groups: list[list[tuple[GpuInfo, TierVerdict]]] = []
    by_key: dict[tuple[object, ...], list[tuple[GpuInfo, TierVerdict]]] = {}
    for gpu, verdict in zip(inv.gpus, tiers, strict=True):
        key = _static(gpu, verdict)
        if key is not None and key in by_key:
            by_key[key].append((gpu, verdict))
            continue
        groups.append([(gpu, verdict)])
        if key is not None:
            by_key[key] = groups[-1]
    return groups


def _indices(group: Sequence[tuple[GpuInfo, TierVerdict]]) -> str:
    return ", ".join(str(gpu.index) for gpu, _ in group)


def _per_gpu_table(inv: Inventory, gpus: Sequence[GpuInfo]) -> Table:
    """What differs between alike GPUs: identity, placement and the readings of now
    (UUIDs cut to 12 characters, PCI domain 0 left out: --format json has them whole;
    NVLink as active/all links)."""
    table = Table(title="per GPU", title_justify="left", box=None, padding=(0, 1))
    columns = ["GPU", "PCI bus", "UUID", "free GiB", "SM MHz", "W", "PCIe", "NUMA"]
    columns += ["NVLink"] if inv.topology is not None else []
    for col in columns:
        table.add_column(
            col, no_wrap=True, justify="right" if col in ("free GiB", "SM MHz", "W") else "left"
        )
    for gpu in gpus:
        ports = _ports(inv, gpu.index)
        pcie = gpu.pcie
        row = [
            str(gpu.index),
            _v(gpu.pci_bus_id).removeprefix("00000000:"),  # the usual PCI domain 0
            _v(gpu.uuid)[:12],
            _v(gpu.memory_free_mib / 1024 if gpu.memory_free_mib is not None else None, "{:,.1f}"),
            _v(gpu.sm_clock_mhz),
            _v(gpu.power_draw_w, "{:g}"),
            NA if pcie.gen_current is None else f"Gen{pcie.gen_current} x{pcie.width_current}",
            _v(gpu.numa_node),
        ]
        if inv.topology is not None:
            row.append(
                NA if ports is None else f"{sum(port.active for port in ports)}/{len(ports)}"
            )
        table.add_row(*row)
    return table


def tier_table(verdict: TierVerdict) -> Table:
    table = Table(
        title=f"tier: {verdict.overall or NA}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        title_style=_TIER_STYLE.get(verdict.overall, "bold"),
    )
    for col in ("parameter", "value", "basic", "recommended", "extreme", "reached"):
        table.add_column(col)
    for row in verdict.rows:
        if row.value is None:
            value = NA
        else:
            number = f"{row.value:,.0f}" if row.value >= 100 else f"{row.value:g}"
            value = number + (f" {row.unit}" if row.unit else "")
        table.add_row(
            row.label,
            value,
            *[f"{row.thresholds[tier]:g}" for tier in ("basic", "recommended", "extreme")],
            Text(row.tier or NA, style=_TIER_STYLE.get(row.tier, "")),
        )
    return table


def topology_table(inv: Inventory) -> Table:
    topo = inv.topology
    assert topo is not None
    table = Table(title="topology (as nvidia-smi topo -m)", title_justify="left", box=None)
    table.add_column("")
    for gpu in inv.gpus:
        table.add_column(f"GPU{gpu.index}")
    table.add_column("CPU affinity")
    table.add_column("NUMA")
    for gpu, row in zip(inv.gpus, topo.matrix, strict=True):
        table.add_row(f"GPU{gpu.index}", *row, _v(gpu.cpu_affinity), _v(gpu.numa_node))
    legend = "; ".join(f"{path}: {meaning}" for path, meaning in PATH_HELP.items())
    p2p = "; ".join(
        f"GPU{pair.a}<->GPU{pair.b} P2P read {pair.p2p_read}, write {pair.p2p_write}"
        for pair in topo.pairs
    )
    legend = p2p + "\n" + legend
    table.caption = legend + "".join(f"\n! {warning}" for warning in topo.warnings)
    table.caption_justify = "left"
    table.min_width = 78
    return table


def compare_text(specs: Sequence[GpuSpec], tiers: Sequence[TierVerdict], console: Console) -> None:
    table = Table(title="GPU specifications (dense peak figures)", title_justify="left")
    table.add_column("")
    for spec in specs:
        table.add_column(spec.key, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("architecture", [f"{spec.architecture} ({spec.compute_capability})" for spec in specs]),
        ("SMs / CUDA cores", [f"{spec.sm_count} / {spec.cuda_cores:,}" for spec in specs]),
        ("memory", [f"{spec.memory_gb:g} GB {spec.memory_type}" for spec in specs]),
        ("bandwidth", [f"{spec.memory_bandwidth_gbs:,.0f} GB/s" for spec in specs]),
    ]
    for key, label in (
        ("fp32", "FP32"),
        ("tf32_tensor", "TF32 tensor"),
        ("fp16_tensor", "FP16 tensor"),
        ("bf16_tensor", "BF16 tensor"),
        ("fp8_tensor", "FP8 tensor"),
    ):
        rows.append(
            (f"{label} TFLOP/s", [_v(spec.peak_tflops.get(key), "{:,.1f}") for spec in specs])
        )
    rows += [
        ("TDP", [f"{spec.tdp_w:g} W" for spec in specs]),
        ("interconnect", [spec.interconnect for spec in specs]),
        ("tier", [verdict.overall or NA for verdict in tiers]),
    ]
    for label, vals in rows:
        table.add_row(label, *vals)
    if len(specs) == 2:
        first, second = specs
        ratio = [
            ("bandwidth", second.memory_bandwidth_gbs / first.memory_bandwidth_gbs),
            ("memory", second.memory_gb / first.memory_gb),
        ]
        peak_a, peak_b = (
            first.peak("bf16") or first.peak("fp16"),
            second.peak("bf16") or second.peak("fp16"),
        )
        if peak_a and peak_b:
            ratio.append(("16-bit tensor", peak_b / peak_a))
        table.caption = f"{second.key} vs {first.key}: " + ", ".join(
            f"{what} {verdict:.2f}x" for what, verdict in ratio
        )
    console.print(table)
    console.print(
        Text("sources: " + "; ".join(f"{spec.key}: {spec.source}" for spec in specs), style="dim")
    )


def rank_text(workload: str, rows: Sequence[RankRow], local: str | None, console: Console) -> None:
    table = Table(
        title=f"GPUs ranked for {workload} (roofline estimate, relative)", title_justify="left"
    )
    for col in ("#", "GPU", "precision", "bound by", "relative", "per kW of TDP", "fits"):
        table.add_column(
            col, justify="right" if col in ("#", "relative", "per kW of TDP") else "left"
        )
    best_kw = max((row.samples_per_kw for row in rows), default=1.0) or 1.0
    for i, row in enumerate(rows, 1):
        name = Text(row.key, style="bold cyan" if row.key == local else "")
        if row.key == local:
            name.append("  (this machine)")
        table.add_row(
            str(i),
            name,
            row.precision,
            row.bound,
            f"{row.relative:.2f}",
            f"{row.samples_per_kw / best_kw:.2f}",
            "yes" if row.fits else "no",
        )
    table.caption = (
        "time per sample = max(FLOPs / peak, bytes / bandwidth); measure the real "
        "figure with tfaccel bench"
    )
    console.print(table)


def spec_list_text(specs: Any, console: Console) -> None:
    """The GPUs of the spec file, a row each."""
    table = Table(title="GPU spec entries", title_justify="left", box=box.SIMPLE_HEAD)
    # the key is what `plan --spec` and `hw --compare` take: never cut, whatever the width
    table.add_column(
        "key", no_wrap=True, min_width=max((len(spec.key) for spec in specs), default=3)
    )
    for col in ("architecture", "memory", "bandwidth", "BF16/FP16 TFLOP/s", "TDP"):
        table.add_column(col)
    for spec in specs:
        table.add_row(
            spec.key,
            f"{spec.architecture} ({spec.compute_capability})",
            f"{spec.memory_gb:g} GB",
            f"{spec.memory_bandwidth_gbs:,.0f} GB/s",
            f"{(spec.peak('bf16') or spec.peak('fp16') or 0):,.1f}",
            f"{spec.tdp_w:g} W",
        )
    console.print(table)
