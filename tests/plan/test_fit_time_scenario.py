"""Fit verdicts, suggestions, time to train and scenarios (no TensorFlow needed)."""

from __future__ import annotations

import pytest

from tfaccel.errors import InputError
from tfaccel.plan.fit import Capacity, capacity_from_spec, plan_fit
from tfaccel.plan.memory import MemoryEstimate
from tfaccel.plan.scenario import plan_scenario
from tfaccel.plan.timing import human_duration, time_to_train

GIB = 2**30
EST = MemoryEstimate(
    "resnet50",
    "float32",
    "Adam",
    25_636_712,
    25_583_592,
    weights_bytes=int(0.1 * GIB),
    optimizer_bytes=int(0.2 * GIB),
    gradients_bytes=int(0.1 * GIB),
    step_lines=((int(0.1 * GIB), 81 * 2**20),),
    activations_bytes_per_sample=80 * 2**20,
    traces=(),
)


def test_fits_and_max_batch() -> None:
    cap = capacity_from_spec("A100-80GB")
    plan = plan_fit(EST, cap, batch=256)
    assert plan.fits is True and plan.suggestions == ()
    assert plan.max_batch == int((80e9 * 0.9 - 0.3 * GIB - 0.1 * GIB) / (81 * 2**20))
    assert (256, EST.peak_bytes(256)) in plan.batch_table


def test_not_fitting_lists_every_option() -> None:
    cap = Capacity("T4", 16 * 10**9, "spec")
    half = MemoryEstimate(
        **{
            **EST.__dict__,
            "precision": "mixed_bfloat16",
            "step_lines": ((int(0.1 * GIB), 61 * 2**20),),
        }
    )
    plan = plan_fit(EST, cap, batch=512, alternatives=lambda p: half)
    assert plan.fits is False
    by = {s.action: s for s in plan.suggestions}
    assert set(by) == {
        "mixed precision",
        "gradient checkpointing",
        "gradient accumulation",
        "more GPUs",
        "a bigger GPU",
    }
    assert by["mixed precision"].max_batch == half.max_batch(cap.bytes, 0.1) > plan.max_batch
    acc = by["gradient accumulation"]
    assert acc.effective_batch is not None and acc.effective_batch >= 512
    assert acc.max_batch is not None and acc.max_batch <= plan.max_batch
    assert "H200" in by["a bigger GPU"].detail
    assert by["gradient checkpointing"].max_batch is not None
    assert by["gradient checkpointing"].max_batch > plan.max_batch


def test_bad_fit_inputs() -> None:
    cap = Capacity("x", 10**9, "x")
    with pytest.raises(InputError, match="batch size must be positive"):
        plan_fit(EST, cap, batch=0)
    with pytest.raises(InputError, match="margin"):
        plan_fit(EST, cap, margin=1.5)
    with pytest.raises(InputError, match="Unknown GPU"):
        capacity_from_spec("Z9000")


def test_time_to_train_imagenet() -> None:
    t = time_to_train(5563, 1_281_167, 90, gpus=8)
    first = t.rows[0]
    assert first.seconds == pytest.approx(1_281_167 * 90 / 5563)
    assert human_duration(first.seconds) == "5 h 45 min"
    eight = next(r for r in t.rows if r.label.startswith("on 8 GPUs"))
    assert eight.samples_per_s == pytest.approx(5563 * 8 * 0.9)
    remat = next(r for r in t.rows if "checkpointing" in r.label)
    assert remat.seconds > first.seconds
    with pytest.raises(InputError):
        time_to_train(0, 10, 1)


@pytest.mark.parametrize(
    ("cc", "want"), [("9.0", "mixed_bfloat16"), ("7.0", "mixed_float16"), ("6.0", "float32")]
)
def test_scenario_precision_by_capability(cc: str, want: str) -> None:
    s = plan_scenario("vision", "GPU", cc, 1)
    assert s.recommendations[0].value == want


def test_science_uses_tf32_and_mig() -> None:
    s = plan_scenario("science", "NVIDIA H200", "9.0", 2, mig_capable=True)
    values = {r.setting: r.value for r in s.recommendations}
    assert values["precision"] == "float32 with TF32 on"
    assert values["strategy"].startswith("MirroredStrategy over 2")
    assert "MIG" in values["sharing"]


def test_nlp_recommends_flat_einsums_on_any_gpu() -> None:
    for cc, gpus in (("9.0", 1), ("7.0", 2), (None, 0)):
        values = {r.setting: r.value for r in plan_scenario("nlp", "GPU", cc, gpus).recommendations}
        assert values["einsum"] == "tfaccel.configure(einsum='flat')"
    vision = plan_scenario("vision", "GPU", "9.0", 1).recommendations
    assert "einsum" not in {r.setting for r in vision}


def test_scenario_budget_picks_gpus() -> None:
    s = plan_scenario(
        "vision",
        None,
        None,
        0,
        throughput=5563,
        reference_gpu="H200",
        samples=1_281_167,
        epochs=90,
        budget_hours=3,
    )
    by = {c.gpu: c for c in s.candidates}
    assert by["H200"].est_samples_per_s == pytest.approx(5563)
    # 5.76 h on one H200; two at 90 % efficiency take 3.2 h, three take 2.1 h.
    assert by["H200"].gpus_needed == 3
    assert s.candidates[0].gpus_needed is not None
    assert s.candidates[0].gpus_needed <= by["H200"].gpus_needed  # type: ignore[operator]
    with pytest.raises(InputError, match="needs the GPU it was measured on"):
        plan_scenario("vision", None, None, 0, throughput=100)
    with pytest.raises(InputError, match="Unknown scenario"):
        plan_scenario("gaming", None, None, 0)
