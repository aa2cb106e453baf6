"""The inventory on a real GPU (run on the GPU machine)."""

from __future__ import annotations

import pytest

from tfaccel.hardware.inventory import read_inventory
from tfaccel.hardware.specs import find_spec


@pytest.mark.gpu
def test_real_inventory_matches_the_spec_file() -> None:
    inv = read_inventory()
    assert inv.driver_version and inv.cuda_version
    for g in inv.gpus:
        assert g.name and g.uuid and g.compute_capability
        assert g.memory_total_mib and g.memory_total_mib > 1000
        assert g.cuda_cores and g.sm_count
        spec = find_spec(g.name)
        if spec is not None:
            assert g.compute_capability == spec.compute_capability
            assert g.sm_count == spec.sm_count
            if g.bandwidth_theoretical_gbs:  # NVML-derived vs datasheet: within 10 %
                assert abs(g.bandwidth_theoretical_gbs / spec.memory_bandwidth_gbs - 1) < 0.10


@pytest.mark.multi_gpu
def test_real_topology_has_a_path_for_every_pair() -> None:
    inv = read_inventory()
    assert inv.topology is not None
    n = len(inv.gpus)
    assert len(inv.topology.pairs) == n * (n - 1) // 2
    assert all(p.path != "?" for p in inv.topology.pairs)
