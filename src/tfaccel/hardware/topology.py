"""Topology between GPUs: NVLink, P2P support and PCIe path type (as `nvidia-smi topo -m`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# NVML values, used when the bindings (or a fake) do not define the names.
_TOPOLOGY_NAMES = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_P2P_STATUS = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported (IOMMU/ACS?)",
    4: "disabled by registry key",
    5: "not supported",
    6: "unknown",
}
NVLINK_MAX_LINKS = 18
PATH_HELP = {
    "NV#": "connected by # NVLinks",
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, no host bridge",
    "PHB": "through a PCIe host bridge (the CPU)",
    "NODE": "across host bridges within one NUMA node",
    "SYS": "across NUMA nodes (the inter-socket link)",
}


class _HasBus(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def pci_bus_id(self) -> str | None: ...


@dataclass(frozen=True)
class NvLinkPort:
    """One NVLink port of a GPU."""

    link: int
    active: bool
    version: int | None
    remote_bus_id: str | None


@dataclass(frozen=True)
class PairLink:
    """How two GPUs reach each other."""

    a: int
    b: int
    path: str  # "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"
    nvlinks: int
    p2p_read: str  # "ok" or why not
    p2p_write: str


@dataclass(frozen=True)
class Topology:
    """The matrix nvidia-smi topo -m prints, with P2P status and warnings."""

    matrix: tuple[tuple[str, ...], ...]
    pairs: tuple[PairLink, ...]
    nvlink_ports: tuple[tuple[NvLinkPort, ...], ...]
    warnings: tuple[str, ...]


def _norm_bus(bus: Any) -> str | None:
    if bus is None:
        return None
    if isinstance(bus, bytes):
        bus = bus.decode()
    return str(bus)[-12:].lower()


def read_topology(nvml: Any, gpus: Sequence[_HasBus]) -> Topology:
    """Read NVLink ports, P2P status and the PCIe common ancestor of every GPU pair."""
    lib = nvml.lib
    handles = {gpu.index: nvml.get("nvmlDeviceGetHandleByIndex", gpu.index) for gpu in gpus}
    bus_of = {_norm_bus(gpu.pci_bus_id): gpu.index for gpu in gpus if gpu.pci_bus_id}
    ports: list[tuple[NvLinkPort, ...]] = []
    nv_count: dict[tuple[int, int], int] = {}
    switch_ports: dict[int, int] = {}  # active ports whose far end is not a GPU (NVSwitch)
    for gpu in gpus:
        handle = handles[gpu.index]
        mine: list[NvLinkPort] = []
        for link in range(NVLINK_MAX_LINKS):
            state = nvml.get("nvmlDeviceGetNvLinkState", handle, link)
            if state is None:
                continue
            remote = nvml.get("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle, link) or nvml.get(
                "nvmlDeviceGetNvLinkRemotePciInfo", handle, link
            )
            remote_bus = _norm_bus(getattr(remote, "busId", None)) if remote is not None else None
            port = NvLinkPort(
                link, bool(state), nvml.get("nvmlDeviceGetNvLinkVersion", handle, link), remote_bus
            )
            mine.append(port)
            peer = bus_of.get(remote_bus) if remote_bus else None
            if port.active and peer is None:
                switch_ports[gpu.index] = switch_ports.get(gpu.index, 0) + 1
            if port.active and peer is not None and peer != gpu.index:
                key = (min(gpu.index, peer), max(gpu.index, peer))
                nv_count[key] = nv_count.get(key, 0) + 1
        ports.append(tuple(mine))
    read_idx = getattr(lib, "NVML_P2P_CAPS_INDEX_READ", 0)
    write_idx = getattr(lib, "NVML_P2P_CAPS_INDEX_WRITE", 1)
    count = len(gpus)
    matrix = [["X" if i == j else "?" for j in range(count)] for i in range(count)]
    pairs: list[PairLink] = []
    warnings: list[str] = []
    for i, gpu_a in enumerate(gpus):
        for j, gpu_b in enumerate(gpus):
            if j <= i:
                continue
            handle_a, handle_b = handles[gpu_a.index], handles[gpu_b.index]
            # Each direction counts its own ports; nvidia-smi shows one side's count.
            links = nv_count.get((gpu_a.index, gpu_b.index), 0)
            links = links // 2 if links and _both_sides_counted(ports, i, j, bus_of) else links
            if not links and switch_ports.get(gpu_a.index) and switch_ports.get(gpu_b.index):
                links = min(switch_ports[gpu_a.index], switch_ports[gpu_b.index])  # via NVSwitch
            if links:
                path = f"NV{links}"
            else:
                level = nvml.get("nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b)
                path = _TOPOLOGY_NAMES.get(int(level), "?") if level is not None else "?"
            p2p_read = nvml.get("nvmlDeviceGetP2PStatus", handle_a, handle_b, read_idx)
            p2p_write = nvml.get("nvmlDeviceGetP2PStatus", handle_a, handle_b, write_idx)
            p2p_r = _P2P_STATUS.get(int(p2p_read), "unknown") if p2p_read is not None else "n/a"
            p2p_w = _P2P_STATUS.get(int(p2p_write), "unknown") if p2p_write is not None else "n/a"
            matrix[i][j] = matrix[j][i] = path
            pairs.append(PairLink(gpu_a.index, gpu_b.index, path, links, p2p_r, p2p_w))
            if p2p_r not in ("ok", "n/a"):
                warnings.append(
                    f"GPU {gpu_a.index} <-> GPU {gpu_b.index}: P2P read unavailable "
                    f"({p2p_r}); all-reduce goes through host memory"
                )
            if path == "SYS":
                warnings.append(
                    f"GPU {gpu_a.index} and GPU {gpu_b.index} sit on different CPU "
                    "sockets: traffic crosses the inter-socket link"
                )
    return Topology(
        tuple(tuple(row) for row in matrix), tuple(pairs), tuple(ports), tuple(warnings)
    )


def _both_sides_counted(
    ports: Sequence[Sequence[NvLinkPort]], i: int, j: int, bus_of: dict[str | None, int]
) -> bool:
    """True when both GPUs report their ends of the links (so each link counted twice)."""

    def sees(src: int, dst: int) -> bool:
        return any(port.active and bus_of.get(port.remote_bus_id) == dst for port in ports[src])

    return sees(i, j) and sees(j, i)
