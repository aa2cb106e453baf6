"""XLA flags the TensorFlow in use does not know are never set: XLA would abort the
process at its first compilation, without a message of tfaccel's."""

from __future__ import annotations

import pytest

from tfaccel import _compat
from tfaccel.errors import InputError
from tfaccel.optimize.environment import xla_flags_with
from tfaccel.optimize.settings import XLA_OPTIONS
from tfaccel.trial.runner import compile_cache_env


@pytest.mark.parametrize(
    ("flag", "version", "floor"),
    [
        ("--xla_gpu_per_fusion_autotune_cache_dir=/x", "2.16.2", "2.18"),
        ("--xla_gpu_per_fusion_autotune_cache_dir=/x", "2.17.1", "2.18"),
        ("--xla_gpu_per_fusion_autotune_cache_dir=/x", "2.18.1", None),
        (XLA_OPTIONS["command_buffers"], "2.19.1", "2.20"),
        (XLA_OPTIONS["command_buffers"], "2.20.0", None),
        (XLA_OPTIONS["cudnn_gemm_fusions"], "2.17.1", "2.18"),
        (XLA_OPTIONS["block_level_fusions"], "2.18.1", "2.19"),
        (XLA_OPTIONS["triton_fusions"], "2.20.0", "2.21"),
        (XLA_OPTIONS["triton_fusions"], "2.21.0", None),
        (XLA_OPTIONS["cublaslt"], "2.16.2", None),
        (XLA_OPTIONS["gemv_as_gemm"], "2.16.2", "2.20"),  # the pass is inside algsimp there
        (XLA_OPTIONS["gemv_as_gemm"], "2.21.0", None),
        ("--xla_disable_hlo_passes=other-pass", "2.16.2", None),
        (XLA_OPTIONS["triton_fusions"], "2.22.0rc1", None),
    ],
)
def test_each_flag_has_its_floor(
    flag: str | tuple[str, ...], version: str, floor: str | None
) -> None:
    flags = (flag,) if isinstance(flag, str) else flag  # a flag, or an option's flags
    assert _compat.xla_flags_floor(flags, version) == floor


def test_an_option_this_tensorflow_lacks_is_refused_with_the_version_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_compat, "installed_version", lambda: "2.19.1")
    with pytest.raises(
        InputError, match=r"'triton_fusions' needs TensorFlow >= 2.21; this is 2.19.1"
    ):
        xla_flags_with("", ("triton_fusions",))
    flags, added = xla_flags_with("", ("cublaslt",))  # known to 2.19: set
    assert added == list(XLA_OPTIONS["cublaslt"]) and flags == " ".join(XLA_OPTIONS["cublaslt"])


def test_trials_share_autotuning_only_where_xla_knows_the_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(_compat, "installed_version", lambda: "2.17.1")
    assert "XLA_FLAGS" not in compile_cache_env(tmp_path)  # type: ignore[arg-type]
    monkeypatch.setattr(_compat, "installed_version", lambda: "2.21.0")
    assert "--xla_gpu_per_fusion_autotune_cache_dir=" in compile_cache_env(tmp_path)["XLA_FLAGS"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("knob", "value", "keras", "refused"),
    [
        ("attention", "cudnn", "3.14.1", True),
        ("attention", "cudnn", "3.15.0", False),
        ("attention", "keras", "3.0.5", False),
        ("float8", True, "3.12.0", True),
        ("float8", True, "3.13.0", False),
        ("gradient_checkpointing", True, "3.8.0", True),
        ("gradient_checkpointing", True, "3.9.0", False),
    ],
)
def test_each_keras_feature_has_its_floor(
    knob: str, value: object, keras: str, refused: bool
) -> None:
    why = _compat.keras_floor(knob, value, keras)
    assert (why is not None) is refused
    if why:
        assert f"this is {keras}" in why and "needs Keras >=" in why


def test_configure_refuses_a_feature_this_keras_lacks_before_patching_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tfaccel
    from tfaccel.optimize import attention

    monkeypatch.setattr(_compat, "keras_version", lambda: "3.14.1")
    before = attention.current_attention()
    with pytest.raises(InputError, match=r"attention='cudnn' needs Keras >= 3.15.0"):
        tfaccel.configure(attention="cudnn")
    assert attention.current_attention() == before
