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


def _gpu_rows(g: GpuInfo) -> list[tuple[str, str]]:
    link = g.pcie
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
        ("name", _v(g.name)),
        ("UUID", _v(g.uuid)),
        ("PCI bus", _v(g.pci_bus_id)),
        ("compute capability", f"{_v(g.compute_capability)} ({_v(g.architecture)})"),
        ("SMs / CUDA cores", f"{_v(g.sm_count)} / {_v(g.cuda_cores, '{:,}')}"),
        (
            "memory",
            f"{_v(g.memory_total_mib, '{:,}', ' MiB')} total, "
            f"{_v(g.memory_free_mib, '{:,}', ' MiB')} free",
        ),
        (
            "memory bus / clock",
            f"{_v(g.memory_bus_width_bits, '{}', '-bit')} at "
            f"{_v(g.memory_clock_max_mhz, '{}', ' MHz')} max",
        ),
        ("bandwidth (theoretical)", _v(g.bandwidth_theoretical_gbs, "{:,.0f}", " GB/s")),
        (
            "SM clock",
            f"{_v(g.sm_clock_mhz, '{}', ' MHz')} now, {_v(g.sm_clock_max_mhz, '{}', ' MHz')} max",
        ),
        (
            "power",
            f"limit {_v(g.power_limit_w, '{:g}', ' W')} (default "
            f"{_v(g.power_default_limit_w, '{:g}', ' W')}, range "
            f"{_v(g.power_min_limit_w, '{:g}')}-{_v(g.power_max_limit_w, '{:g}', ' W')}); "
            f"TDP {_v(g.tdp_w, '{:g}', ' W')}; drawing {_v(g.power_draw_w, '{:g}', ' W')}",
        ),
        ("PCIe", pcie),
        (
            "MIG / ECC / persistence",
            f"{_onoff(g.mig_enabled)} / {_onoff(g.ecc_enabled)} / {_onoff(g.persistence_enabled)}",
        ),
        ("NUMA node / CPUs", f"{_v(g.numa_node)} / {_v(g.cpu_affinity)}"),
        ("spec entry", _v(g.spec_key)),
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
        g, verdict = group[0]
        table = Table(
            title=f"GPU {g.index}"
            + (f" (and {_indices(group[1:])}, alike)" if len(group) > 1 else ""),
            show_header=False,
            box=None,
            padding=(0, 1),
            title_justify="left",
            title_style="bold",
        )
        table.add_column(style="dim", no_wrap=True)
        table.add_column()
        for k, v in _gpu_rows(g):
            table.add_row(k, v)
        ports = _ports(inv, g.index)
        if ports is not None:
            table.add_row("NVLink", _nvlink(ports))
        console.print(table)
        console.print(tier_table(verdict))
        if len(group) > 1:
            console.print(_per_gpu_table(inv, [x for x, _ in group]))
        for w in g.warnings:
            console.print(Text(f"  ! {w}", style="yellow"))
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
    active = [p for p in ports if p.active]
    versions = sorted({p.version for p in active if p.version})
    return f"{len(active)} of {len(ports)} links active" + (
        f" (NVLink {', '.join(map(str, versions))})" if versions else ""
    )


def _static(g: GpuInfo, verdict: TierVerdict) -> tuple[object, ...] | None:
    """What makes two GPUs alike in the report (model, limits, modes, tier); None for a
    GPU with warnings, which keeps a card of its own."""
    if g.warnings:
        return None
    return (
        g.name,
        g.compute_capability,
        g.sm_count,
        g.memory_total_mib,
        g.memory_bus_width_bits,
        g.memory_clock_max_mhz,
        g.sm_clock_max_mhz,
        g.power_limit_w,
        g.power_default_limit_w,
        g.power_min_limit_w,
        g.power_max_limit_w,
        g.tdp_w,
        g.mig_enabled,
        g.ecc_enabled,
        g.persistence_enabled,
        g.spec_key,
        g.pcie.gen_max,
        g.pcie.width_max,
        verdict.overall,
    )


def _alike(inv: Inventory, tiers: Sequence[TierVerdict]) -> list[list[tuple[GpuInfo, TierVerdict]]]:
    """The GPUs in groups of identical ones (in index order), so that eight H200s make
    one card and a table of what differs between them, not eight cards."""
    groups: list[list[tuple[GpuInfo, TierVerdict]]] = []
    by_key: dict[tuple[object, ...], list[tuple[GpuInfo, TierVerdict]]] = {}
    for g, verdict in zip(inv.gpus, tiers, strict=True):
        key = _static(g, verdict)
        if key is not None and key in by_key:
            by_key[key].append((g, verdict))
            continue
        groups.append([(g, verdict)])
        if key is not None:
            by_key[key] = groups[-1]
    return groups


def _indices(group: Sequence[tuple[GpuInfo, TierVerdict]]) -> str:
    return ", ".join(str(g.index) for g, _ in group)


def _per_gpu_table(inv: Inventory, gpus: Sequence[GpuInfo]) -> Table:
    """What differs between alike GPUs: identity, placement and the readings of now
    (UUIDs cut to 12 characters, PCI domain 0 left out: --format json has them whole;
    NVLink as active/all links)."""
    t = Table(title="per GPU", title_justify="left", box=None, padding=(0, 1))
    columns = ["GPU", "PCI bus", "UUID", "free GiB", "SM MHz", "W", "PCIe", "NUMA"]
    columns += ["NVLink"] if inv.topology is not None else []
    for col in columns:
        t.add_column(
            col, no_wrap=True, justify="right" if col in ("free GiB", "SM MHz", "W") else "left"
        )
    for g in gpus:
        ports = _ports(inv, g.index)
        pcie = g.pcie
        row = [
            str(g.index),
            _v(g.pci_bus_id).removeprefix("00000000:"),  # the usual PCI domain 0
            _v(g.uuid)[:12],
            _v(g.memory_free_mib / 1024 if g.memory_free_mib is not None else None, "{:,.1f}"),
            _v(g.sm_clock_mhz),
            _v(g.power_draw_w, "{:g}"),
            NA if pcie.gen_current is None else f"Gen{pcie.gen_current} x{pcie.width_current}",
            _v(g.numa_node),
        ]
        if inv.topology is not None:
            row.append(NA if ports is None else f"{sum(p.active for p in ports)}/{len(ports)}")
        t.add_row(*row)
    return t


def tier_table(verdict: TierVerdict) -> Table:
    t = Table(
        title=f"tier: {verdict.overall or NA}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        title_style=_TIER_STYLE.get(verdict.overall, "bold"),
    )
    for col in ("parameter", "value", "basic", "recommended", "extreme", "reached"):
        t.add_column(col)
    for r in verdict.rows:
        if r.value is None:
            value = NA
        else:
            number = f"{r.value:,.0f}" if r.value >= 100 else f"{r.value:g}"
            value = number + (f" {r.unit}" if r.unit else "")
        t.add_row(
            r.label,
            value,
            *[f"{r.thresholds[k]:g}" for k in ("basic", "recommended", "extreme")],
            Text(r.tier or NA, style=_TIER_STYLE.get(r.tier, "")),
        )
    return t


def topology_table(inv: Inventory) -> Table:
    topo = inv.topology
    assert topo is not None
    t = Table(title="topology (as nvidia-smi topo -m)", title_justify="left", box=None)
    t.add_column("")
    for g in inv.gpus:
        t.add_column(f"GPU{g.index}")
    t.add_column("CPU affinity")
    t.add_column("NUMA")
    for g, row in zip(inv.gpus, topo.matrix, strict=True):
        t.add_row(f"GPU{g.index}", *row, _v(g.cpu_affinity), _v(g.numa_node))
    legend = "; ".join(f"{k}: {v}" for k, v in PATH_HELP.items())
    p2p = "; ".join(
        f"GPU{p.a}<->GPU{p.b} P2P read {p.p2p_read}, write {p.p2p_write}" for p in topo.pairs
    )
    legend = p2p + "\n" + legend
    t.caption = legend + "".join(f"\n! {w}" for w in topo.warnings)
    t.caption_justify = "left"
    t.min_width = 78
    return t


def compare_text(specs: Sequence[GpuSpec], tiers: Sequence[TierVerdict], console: Console) -> None:
    t = Table(title="GPU specifications (dense peak figures)", title_justify="left")
    t.add_column("")
    for s in specs:
        t.add_column(s.key, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("architecture", [f"{s.architecture} ({s.compute_capability})" for s in specs]),
        ("SMs / CUDA cores", [f"{s.sm_count} / {s.cuda_cores:,}" for s in specs]),
        ("memory", [f"{s.memory_gb:g} GB {s.memory_type}" for s in specs]),
        ("bandwidth", [f"{s.memory_bandwidth_gbs:,.0f} GB/s" for s in specs]),
    ]
    for key, label in (
        ("fp32", "FP32"),
        ("tf32_tensor", "TF32 tensor"),
        ("fp16_tensor", "FP16 tensor"),
        ("bf16_tensor", "BF16 tensor"),
        ("fp8_tensor", "FP8 tensor"),
    ):
        rows.append((f"{label} TFLOP/s", [_v(s.peak_tflops.get(key), "{:,.1f}") for s in specs]))
    rows += [
        ("TDP", [f"{s.tdp_w:g} W" for s in specs]),
        ("interconnect", [s.interconnect for s in specs]),
        ("tier", [v.overall or NA for v in tiers]),
    ]
    for label, vals in rows:
        t.add_row(label, *vals)
    if len(specs) == 2:
        a, b = specs
        ratio = [
            ("bandwidth", b.memory_bandwidth_gbs / a.memory_bandwidth_gbs),
            ("memory", b.memory_gb / a.memory_gb),
        ]
        pa, pb = a.peak("bf16") or a.peak("fp16"), b.peak("bf16") or b.peak("fp16")
        if pa and pb:
            ratio.append(("16-bit tensor", pb / pa))
        t.caption = f"{b.key} vs {a.key}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio)
    console.print(t)
    console.print(Text("sources: " + "; ".join(f"{s.key}: {s.source}" for s in specs), style="dim"))


def rank_text(workload: str, rows: Sequence[RankRow], local: str | None, console: Console) -> None:
    t = Table(
        title=f"GPUs ranked for {workload} (roofline estimate, relative)", title_justify="left"
    )
    for col in ("#", "GPU", "precision", "bound by", "relative", "per kW of TDP", "fits"):
        t.add_column(col, justify="right" if col in ("#", "relative", "per kW of TDP") else "left")
    best_kw = max((r.samples_per_kw for r in rows), default=1.0) or 1.0
    for i, r in enumerate(rows, 1):
        name = Text(r.key, style="bold cyan" if r.key == local else "")
        if r.key == local:
            name.append("  (this machine)")
        t.add_row(
            str(i),
            name,
            r.precision,
            r.bound,
            f"{r.relative:.2f}",
            f"{r.samples_per_kw / best_kw:.2f}",
            "yes" if r.fits else "no",
        )
    t.caption = (
        "time per sample = max(FLOPs / peak, bytes / bandwidth); measure the real "
        "figure with tfaccel bench"
    )
    console.print(t)


def spec_list_text(specs: Any, console: Console) -> None:
    """The GPUs of the spec file, a row each."""
    t = Table(title="GPU spec entries", title_justify="left", box=box.SIMPLE_HEAD)
    # the key is what `plan --spec` and `hw --compare` take: never cut, whatever the width
    t.add_column("key", no_wrap=True, min_width=max((len(s.key) for s in specs), default=3))
    for col in ("architecture", "memory", "bandwidth", "BF16/FP16 TFLOP/s", "TDP"):
        t.add_column(col)
    for s in specs:
        t.add_row(
            s.key,
            f"{s.architecture} ({s.compute_capability})",
            f"{s.memory_gb:g} GB",
            f"{s.memory_bandwidth_gbs:,.0f} GB/s",
            f"{(s.peak('bf16') or s.peak('fp16') or 0):,.1f}",
            f"{s.tdp_w:g} W",
        )
    console.print(t)
