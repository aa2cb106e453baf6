"""Inventory and topology with NVML faked at its boundary."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.fakes import FakeGpu, FakeNvml
from tfaccel.hardware.inventory import read_inventory

BUS = ["00000000:18:00.0", "00000000:2A:00.0"]


def h200(i: int, peer: int | None = None, links: int = 18, **extra: Any) -> FakeGpu:
    values: dict[str, Any] = {
        "nvmlDeviceGetNumGpuCores": 16896,
        "nvmlDeviceGetMemoryBusWidth": 6144,
        "nvmlDeviceGetMaxClockInfo": lambda kind: {1: 1980, 2: 3201}[kind],
        "nvmlDeviceGetClockInfo": lambda kind: {1: 345, 2: 3201}[kind],
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId=BUS[i].encode()),
        "nvmlDeviceGetEnforcedPowerLimit": 700000,
        "nvmlDeviceGetPowerManagementDefaultLimit": 700000,
        "nvmlDeviceGetPowerManagementLimitConstraints": (200000, 700000),
        "nvmlDeviceGetPowerUsage": 75000,
        "nvmlDeviceGetCurrPcieLinkGeneration": 5,
        "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetMigMode": (0, 0),
        "nvmlDeviceGetEccMode": (1, 1),
        "nvmlDeviceGetPersistenceMode": 1,
    }
    if peer is not None:
        values["nvmlDeviceGetNvLinkState"] = lambda link: 1 if link < links else 0
        values["nvmlDeviceGetNvLinkVersion"] = lambda link: 4
        values["nvmlDeviceGetNvLinkRemotePciInfo_v2"] = lambda link: SimpleNamespace(
            busId=BUS[peer]
        )
    values.update(extra)
    return FakeGpu(extra=values)


class TopoNvml(FakeNvml):
    def __init__(self, gpus: list[FakeGpu], ancestor: int = 50, p2p: int = 0) -> None:
        super().__init__(gpus)
        self.ancestor, self.p2p = ancestor, p2p

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self.ancestor

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return self.p2p


def test_inventory_derives_bandwidth_cores_and_limits(tmp_path: Path) -> None:
    dev = tmp_path / "0000:18:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("0\n")
    (dev / "local_cpulist").write_text("0-15\n")
    inv = read_inventory(FakeNvml([h200(0)]), sysfs_root=str(tmp_path))
    g = inv.gpus[0]
    assert inv.driver_version == "580.159.03" and inv.cuda_version == "13.0"
    assert g.compute_capability == "9.0" and g.architecture == "Hopper"
    assert g.cuda_cores == 16896 and g.sm_count == 132  # 16896 / 128 per SM
    assert g.bandwidth_theoretical_gbs == round(6144 / 8 * 3201e6 * 2 / 1e9, 1)  # 4917.9
    assert g.power_limit_w == 700 and g.power_min_limit_w == 200 and g.tdp_w == 700
    assert g.ecc_enabled is True and g.mig_enabled is False and g.persistence_enabled is True
    assert g.numa_node == 0 and g.cpu_affinity == "0-15"
    assert g.spec_key == "H200" and g.warnings == ()
    assert inv.topology is None  # one GPU


def test_unsupported_queries_are_none() -> None:
    inv = read_inventory(FakeNvml([FakeGpu()]))
    g = inv.gpus[0]
    assert g.memory_bus_width_bits is None and g.bandwidth_theoretical_gbs is None
    assert g.power_limit_w is None and g.pcie.gen_current is None
    assert g.cuda_cores == 16896  # from the spec file when NVML cannot say
    assert g.numa_node is None


def test_downtrained_link_and_mig_warn() -> None:
    gpu = h200(0, nvmlDeviceGetCurrPcieLinkWidth=8, nvmlDeviceGetMigMode=(1, 1))
    w = read_inventory(FakeNvml([gpu])).gpus[0].warnings
    assert any("x8 of x16" in x for x in w)
    assert any("MIG is enabled" in x for x in w)


def test_lower_pcie_generation_alone_is_not_a_warning() -> None:
    g = read_inventory(FakeNvml([h200(0, nvmlDeviceGetCurrPcieLinkGeneration=1)])).gpus[0]
    assert g.warnings == () and g.pcie.gen_below_max


def test_lost_gpu_does_not_stop_the_inventory() -> None:
    inv = read_inventory(FakeNvml([h200(0), FakeGpu(broken=True)]))
    assert inv.gpus[0].name == "NVIDIA H200"
    assert inv.gpus[1].warnings and "GPU is lost" in inv.gpus[1].warnings[0]


def test_nvlink_pair_reads_nv18() -> None:
    inv = read_inventory(TopoNvml([h200(0, peer=1), h200(1, peer=0)]))
    topo = inv.topology
    assert topo is not None
    assert topo.matrix == (("X", "NV18"), ("NV18", "X"))
    assert topo.pairs[0].p2p_read == "ok" and topo.warnings == ()
    assert sum(p.active for p in topo.nvlink_ports[0]) == 18


def test_pcie_pair_across_sockets_without_p2p_warns() -> None:
    inv = read_inventory(TopoNvml([h200(0), h200(1)], ancestor=50, p2p=3))
    topo = inv.topology
    assert topo is not None and topo.matrix[0][1] == "SYS"
    assert any("P2P read unavailable (IOH topology" in w for w in topo.warnings)
    assert any("different CPU sockets" in w for w in topo.warnings)


def test_nvswitch_links_count_as_nvlink() -> None:
    switch = "00000000:C0:00.0"
    gpus = [
        h200(
            i,
            nvmlDeviceGetNvLinkState=lambda link: 1 if link < 18 else 0,
            nvmlDeviceGetNvLinkRemotePciInfo_v2=lambda link: SimpleNamespace(busId=switch),
        )
        for i in (0, 1)
    ]
    inv = read_inventory(TopoNvml(gpus, ancestor=20))
    assert inv.topology is not None and inv.topology.matrix[0][1] == "NV18"
