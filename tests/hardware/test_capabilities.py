"""One table of what each compute capability supports."""

from __future__ import annotations

import pytest

from tfaccel.hardware.capabilities import (
    auto_precision,
    capability_at_least,
    precisions,
    supports,
)


@pytest.mark.parametrize(
    ("cc", "has", "lacks"),
    [
        ("7.0", {"tensor_cores"}, {"bf16", "tf32", "fp8", "mig"}),
        ("8.0", {"bf16", "tf32", "mig", "flash_attention"}, {"fp8", "cudnn_layer_norm"}),
        ("8.9", {"fp8"}, {"cudnn_layer_norm"}),
        ("9.0", {"fp8", "cudnn_layer_norm"}, set()),
        ("10.0", {"bf16", "fp8", "mig", "cudnn_layer_norm"}, set()),  # numbers, not text
        (None, set(), {"tensor_cores", "bf16"}),
        ("garbage", set(), {"tensor_cores"}),
    ],
)
def test_features_by_capability(cc: str | None, has: set[str], lacks: set[str]) -> None:
    assert all(supports(cc, f) for f in has)  # type: ignore[arg-type]
    assert not any(supports(cc, f) for f in lacks)  # type: ignore[arg-type]


def test_precisions_and_the_auto_choice() -> None:
    assert precisions("12.0")[-2:] == ["mixed_bfloat16", "mixed_float16"]
    assert precisions("7.5") == ["float32", "mixed_float16"]
    assert precisions("6.1") == precisions(None) == ["float32"]
    assert auto_precision("9.0")[0] == "mixed_bfloat16"
    assert auto_precision("7.0")[0] == "mixed_float16"
    assert auto_precision("6.0")[0] == auto_precision(None)[0] == "float32"
    assert capability_at_least("10.0", 8.0) and not capability_at_least("7.5", 8.0)
