"""The spec file, the tier table and the roofline ranking."""

from __future__ import annotations

import pytest

from tfaccel.errors import InputError
from tfaccel.hardware import rank as rankmod
from tfaccel.hardware.specs import all_specs, cores_per_sm, find_spec, get_spec
from tfaccel.hardware.tiers import BELOW, judge_values

REQUIRED = [
    "P100-SXM2-16GB",
    "V100-SXM2-16GB",
    "T4",
    "A10",
    "A30",
    "A40",
    "A100-40GB",
    "A100-80GB",
    "L4",
    "L40S",
    "H100-PCIE",
    "H100-SXM",
    "H200",
    "B200",
    "RTX-2080-Ti",
    "RTX-3090",
    "RTX-4090",
    "RTX-5090",
]


@pytest.mark.parametrize("key", REQUIRED)
def test_required_gpus_are_in_the_spec_file(key: str) -> None:
    s = get_spec(key)
    assert s.source and s.memory_gb > 0 and s.memory_bandwidth_gbs > 0 and s.tdp_w > 0
    assert s.cuda_cores == s.sm_count * (cores_per_sm(s.compute_capability) or 0)
    fp32 = s.peak_tflops["fp32"]
    assert fp32 is not None and fp32 > 0
    tensor = [v for k, v in s.peak_tflops.items() if k != "fp32" and v]
    assert all(v >= fp32 for v in tensor)  # tensor cores never slower than FP32


@pytest.mark.parametrize(
    ("nvml_name", "key"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("Tesla T4", "T4"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("a100-80gb", "A100-80GB"),
    ],
)
def test_lookup_by_nvml_name(nvml_name: str, key: str) -> None:
    spec = find_spec(nvml_name)
    assert spec is not None and spec.key == key


def test_unknown_gpu_suggests_close_names() -> None:
    with pytest.raises(InputError) as caught:
        get_spec("H2OO")
    assert "Unknown GPU 'H2OO'" in caught.value.message
    assert "H200" in (caught.value.hint or "")
    assert find_spec("Quadro Mystery 9000") is None


def test_h200_has_the_datasheet_figures() -> None:
    s = get_spec("H200")
    assert (s.memory_gb, s.memory_bandwidth_gbs, s.tdp_w) == (141, 4800, 700)
    assert s.peak("bf16") == 989.5 and s.peak("fp8") == 1979 and s.peak("tf32") == 494.5


@pytest.mark.parametrize(
    ("key", "overall"),
    [("H200", "extreme"), ("A100-80GB", "recommended"), ("T4", "basic"), ("P100-SXM2-16GB", BELOW)],
)
def test_tiers(key: str, overall: str) -> None:
    s = get_spec(key)
    v = judge_values(s.key, s.cuda_cores, s.memory_gb, s.memory_bandwidth_gbs, s.compute_capability)
    assert v.overall == overall, [(r.parameter, r.tier) for r in v.rows]


def test_tier_rows_are_judged_one_by_one() -> None:
    v = judge_values("x", 6000, 10, None, "7.5")
    tiers = {r.parameter: r.tier for r in v.rows}
    assert tiers == {
        "cuda_cores": "recommended",
        "memory_gb": "basic",
        "memory_bandwidth_gbs": None,
        "compute_capability": "recommended",
    }
    assert v.overall == "basic"  # unknown rows do not count


def test_generation_ranks_by_bandwidth_and_science_uses_tf32() -> None:
    rows = rankmod.rank(all_specs(), "gpt2")
    assert all(r.bound == "memory" for r in rows)
    bandwidths = [get_spec(r.key).memory_bandwidth_gbs for r in rows]
    assert bandwidths == sorted(bandwidths, reverse=True)
    assert rows[0].relative == 1.0
    sci = {r.key: r for r in rankmod.rank(all_specs(), "science")}
    assert sci["A100-80GB"].precision == "tf32" and sci["V100-SXM2-16GB"].precision == "fp32"


def test_unknown_workload() -> None:
    with pytest.raises(InputError, match="Unknown workload"):
        rankmod.rank(all_specs(), "chess")
