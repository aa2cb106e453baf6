"""Inventory of every GPU through NVML, with derived figures and warnings.

Every NVML query may be unsupported on some GPU: such a field is None ("n/a" when
rendered), never an exception.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.hardware import specs as specmod
from tfaccel.hardware.nvml import Nvml, cuda_version_text
from tfaccel.hardware.topology import Topology, read_topology

# NVML constants (pynvml names), with their values as fallbacks for fakes.
_CONST = {
    "NVML_CLOCK_GRAPHICS": 0,
    "NVML_CLOCK_SM": 1,
    "NVML_CLOCK_MEM": 2,
}


def _c(nvml: Nvml, name: str) -> Any:
    return getattr(nvml.lib, name, _CONST[name])


@dataclass(frozen=True)
class PcieLink:
    """PCIe link generation and width, current against maximum."""

    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None

    @property
    def width_downtrained(self) -> bool:
        return bool(self.width_current and self.width_max and self.width_current < self.width_max)

    @property
    def gen_below_max(self) -> bool:
        return bool(self.gen_current and self.gen_max and self.gen_current < self.gen_max)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML reports it, plus figures derived from it and the spec file."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    compute_capability: str | None
    architecture: str | None
    sm_count: int | None
    cuda_cores: int | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    memory_free_mib: int | None
    memory_bus_width_bits: int | None
    memory_clock_max_mhz: int | None
    bandwidth_theoretical_gbs: float | None  # bus width x max memory clock x 2 (DDR)
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    memory_clock_mhz: int | None
    power_limit_w: float | None
    power_default_limit_w: float | None
    power_min_limit_w: float | None
    power_max_limit_w: float | None
    power_draw_w: float | None
    tdp_w: float | None  # from the spec file
    pcie: PcieLink
    mig_enabled: bool | None
    ecc_enabled: bool | None
    persistence_enabled: bool | None
    numa_node: int | None
    cpu_affinity: str | None
    spec_key: str | None
    warnings: tuple[str, ...] = ()

    @property
    def memory_total_gb(self) -> float | None:
        return self.memory_total_mib * 2**20 / 1e9 if self.memory_total_mib else None


@dataclass(frozen=True)
class Inventory:
    """Every GPU, the driver, and the topology between the GPUs."""

    driver_version: str | None
    cuda_version: str | None
    nvml_version: str | None
    gpus: tuple[GpuInfo, ...]
    topology: Topology | None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _mw_to_w(value: Any) -> float | None:
    return round(float(value) / 1000.0, 1) if value is not None else None


def _sysfs_affinity(
    bus_id: str | None, root: str = "/sys/bus/pci/devices"
) -> tuple[int | None, str | None]:
    """(NUMA node, local CPU list) of a PCI device from sysfs."""
    if not bus_id:
        return None, None
    dev = Path(root) / bus_id[-12:].lower()
    numa: int | None = None
    cpus: str | None = None
    try:
        value = int((dev / "numa_node").read_text().strip())
        numa = value if value >= 0 else None
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError):
        cpus = (dev / "local_cpulist").read_text().strip() or None
    return numa, cpus


def _gpu(nvml: Nvml, index: int, sysfs_root: str) -> GpuInfo:
    handle, err = nvml.try_call("nvmlDeviceGetHandleByIndex", index)
    if err is not None:
        blank: dict[str, Any] = {declared.name: None for declared in dataclasses.fields(GpuInfo)}
        blank.update(
            index=index, pcie=PcieLink(None, None, None, None), warnings=(f"GPU unusable: {err}",)
        )
        return GpuInfo(**blank)
    name = nvml.get("nvmlDeviceGetName", handle)
    cc_t = nvml.get("nvmlDeviceGetCudaComputeCapability", handle)
    capability = f"{cc_t[0]}.{cc_t[1]}" if cc_t else None
    spec = specmod.find_spec(name) if name else None
    cores = nvml.get("nvmlDeviceGetNumGpuCores", handle)
    per_sm = specmod.cores_per_sm(capability)
    sms = cores // per_sm if cores and per_sm else (spec.sm_count if spec else None)
    if not cores and spec is not None:
        cores = spec.cuda_cores
    mem = nvml.get("nvmlDeviceGetMemoryInfo", handle)
    bus = nvml.get("nvmlDeviceGetMemoryBusWidth", handle)
    mem_max = nvml.get("nvmlDeviceGetMaxClockInfo", handle, _c(nvml, "NVML_CLOCK_MEM"))
    bandwidth = round(bus / 8 * mem_max * 1e6 * 2 / 1e9, 1) if bus and mem_max else None
    pci = nvml.get("nvmlDeviceGetPciInfo", handle)
    bus_id = getattr(pci, "busId", None) if pci is not None else None
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode()
    constraints = nvml.get("nvmlDeviceGetPowerManagementLimitConstraints", handle)
    mig = nvml.get("nvmlDeviceGetMigMode", handle)
    ecc = nvml.get("nvmlDeviceGetEccMode", handle)
    persistence = nvml.get("nvmlDeviceGetPersistenceMode", handle)
    link = PcieLink(
        nvml.get("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        nvml.get("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        nvml.get("nvmlDeviceGetCurrPcieLinkWidth", handle),
        nvml.get("nvmlDeviceGetMaxPcieLinkWidth", handle),
    )
    numa, cpus = _sysfs_affinity(bus_id, sysfs_root)
    warnings: list[str] = []
    if link.width_downtrained:
        warnings.append(
            f"PCIe link runs at x{link.width_current} of x{link.width_max}: "
            "downtrained (check the slot, riser or BIOS)"
        )
    if mig is not None and mig[0]:
        warnings.append("MIG is enabled: TensorFlow sees only the MIG instances it is given")
    return GpuInfo(
        index=index,
        name=name,
        uuid=nvml.get("nvmlDeviceGetUUID", handle),
        pci_bus_id=bus_id,
        compute_capability=capability,
        architecture=specmod.architecture_name(capability) or (spec.architecture if spec else None),
        sm_count=sms,
        cuda_cores=cores,
        memory_total_mib=int(mem.total) // 2**20 if mem is not None else None,
        memory_used_mib=int(mem.used) // 2**20 if mem is not None else None,
        memory_free_mib=int(mem.free) // 2**20 if mem is not None else None,
        memory_bus_width_bits=bus,
        memory_clock_max_mhz=mem_max,
        bandwidth_theoretical_gbs=bandwidth,
        sm_clock_mhz=nvml.get("nvmlDeviceGetClockInfo", handle, _c(nvml, "NVML_CLOCK_SM")),
        sm_clock_max_mhz=nvml.get("nvmlDeviceGetMaxClockInfo", handle, _c(nvml, "NVML_CLOCK_SM")),
        memory_clock_mhz=nvml.get("nvmlDeviceGetClockInfo", handle, _c(nvml, "NVML_CLOCK_MEM")),
        power_limit_w=_mw_to_w(
            nvml.get("nvmlDeviceGetEnforcedPowerLimit", handle)
            or nvml.get("nvmlDeviceGetPowerManagementLimit", handle)
        ),
        power_default_limit_w=_mw_to_w(
            nvml.get("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        ),
        power_min_limit_w=_mw_to_w(constraints[0]) if constraints else None,
        power_max_limit_w=_mw_to_w(constraints[1]) if constraints else None,
        power_draw_w=_mw_to_w(nvml.get("nvmlDeviceGetPowerUsage", handle)),
        tdp_w=spec.tdp_w if spec else None,
        pcie=link,
        mig_enabled=bool(mig[0]) if mig is not None else None,
        ecc_enabled=bool(ecc[0]) if ecc is not None else None,
        persistence_enabled=bool(persistence) if persistence is not None else None,
        numa_node=numa,
        cpu_affinity=cpus,
        spec_key=spec.key if spec else None,
        warnings=tuple(warnings),
    )


def read_inventory(lib: Any = None, sysfs_root: str = "/sys/bus/pci/devices") -> Inventory:
    """Query every GPU and the topology between them. Raises GpuError if NVML cannot start."""
    with Nvml(lib) as nvml:
        count, err = nvml.try_call("nvmlDeviceGetCount")
        driver = nvml.get("nvmlSystemGetDriverVersion")
        cuda = cuda_version_text(
            nvml.get("nvmlSystemGetCudaDriverVersion_v2")
            or nvml.get("nvmlSystemGetCudaDriverVersion")
        )
        nvml_version = nvml.get("nvmlSystemGetNVMLVersion")
        if err is not None:
            return Inventory(driver, cuda, nvml_version, (), None, error=err)
        gpus = tuple(_gpu(nvml, i, sysfs_root) for i in range(int(count or 0)))
        topo = read_topology(nvml, gpus) if len(gpus) > 1 else None
    notes = []
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        notes.append(
            "NVML lists every GPU; CUDA_VISIBLE_DEVICES="
            f"{os.environ['CUDA_VISIBLE_DEVICES']!r} limits what TensorFlow sees"
        )
    return Inventory(driver, cuda, nvml_version, gpus, topo, notes=tuple(notes))
