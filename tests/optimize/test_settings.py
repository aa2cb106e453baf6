"""Settings: declared once, validated, parsed (never executed) from files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tfaccel.errors import ConfigFileError, ExitCode, InputError
from tfaccel.optimize.settings import Settings, read_settings_file, settings_from_dict


def test_defaults_and_replace() -> None:
    s = Settings()
    assert s.precision == "auto" and s.xla == "auto" and s.steps_per_execution == 1
    assert s.replace(precision="mixed_bfloat16").precision == "mixed_bfloat16"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"precision": "fp8"},
            "Unknown precision. Expected one of {auto, float32, tf32, "
            "mixed_float16, mixed_bfloat16, bfloat16}. Received: precision='fp8'",
        ),
        ({"xla": "yes"}, "Unknown xla"),
        ({"memory": "limit"}, "memory='limit' needs a positive memory_limit_mib"),
        ({"memory": "unified"}, "memory='unified' needs an oversubscription factor"),
        ({"steps_per_execution": 0}, "steps_per_execution must be a positive integer"),
        ({"gradient_accumulation_steps": True}, "gradient_accumulation_steps must be"),
        ({"batch_size": -4}, "batch_size must be a positive integer"),
    ],
)
def test_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as caught:
        Settings(**kwargs)  # type: ignore[arg-type]
    assert message in caught.value.message
    assert caught.value.exit_code is ExitCode.USAGE


def test_unknown_keys_in_a_file(tmp_path: Path) -> None:
    p = tmp_path / "tfaccel.json"
    p.write_text(json.dumps({"precision": "float32", "turbo": True}))
    with pytest.raises(ConfigFileError) as caught:
        read_settings_file(p)
    assert "unknown settings: turbo" in caught.value.message
    assert "Expected keys among memory" in caught.value.message


def test_a_hand_written_file_with_only_its_settings_object(tmp_path: Path) -> None:
    """{"settings": {...}} without tune's schema line is read as tune's file is: it
    was refused as the unknown setting "settings"."""
    p = tmp_path / "tfaccel.json"
    p.write_text(json.dumps({"settings": {"precision": "float32", "steps_per_execution": 8}}))
    settings = read_settings_file(p)
    assert settings.precision == "float32" and settings.steps_per_execution == 8
    p.write_text(json.dumps({"settings": {"precision": "fp8"}}))
    with pytest.raises(ConfigFileError, match="Unknown precision"):
        read_settings_file(p)
    # a setting beside the object would go unread: refused, not ignored
    p.write_text(json.dumps({"settings": {"precision": "float32"}, "xla": "on"}))
    with pytest.raises(ConfigFileError, match="settings outside its 'settings' object: xla"):
        read_settings_file(p)


def test_not_json_and_not_an_object(tmp_path: Path) -> None:
    p = tmp_path / "tfaccel.json"
    p.write_text("precision = 'float32'  # python is never executed")
    with pytest.raises(ConfigFileError, match="is not valid JSON"):
        read_settings_file(p)
    with pytest.raises(ConfigFileError, match="is not a JSON object"):
        settings_from_dict([1, 2])
    with pytest.raises(ConfigFileError, match="Cannot read"):
        read_settings_file(tmp_path / "missing.json")


def test_bad_value_in_a_file_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schema": "tfaccel.settings/1", "settings": {"xla": "sometimes"}}))
    with pytest.raises(ConfigFileError) as caught:
        read_settings_file(p)
    assert str(p) in caught.value.message and "Unknown xla" in caught.value.message


def test_tune_document_round_trip(tmp_path: Path) -> None:
    s = Settings(precision="mixed_bfloat16", xla="jit", batch_size=512, steps_per_execution=25)
    p = tmp_path / "tfaccel.json"
    p.write_text(
        json.dumps(
            {
                "schema": "tfaccel.settings/1",
                "workload": "resnet50",
                "settings": s.to_dict(),
                "measured": {},
            }
        )
    )
    assert read_settings_file(p) == s


def test_xla_options_are_a_sorted_unique_tuple_of_known_names() -> None:
    from tfaccel.optimize.settings import Settings

    s = Settings(xla_options=["gemv_as_gemm", "cublaslt", "cublaslt"])  # type: ignore[arg-type]
    assert s.xla_options == ("cublaslt", "gemv_as_gemm")
    assert hash(s) == hash(Settings(xla_options=("gemv_as_gemm", "cublaslt")))
    with pytest.raises(InputError, match="xla_options must be a list"):
        Settings(xla_options="cublaslt")  # type: ignore[arg-type]
    with pytest.raises(InputError) as err:
        Settings(xla_options=("fast",))
    assert "cublaslt" in (err.value.expected or "")


def test_xla_flags_keep_the_users_and_refuse_a_clash() -> None:
    from tfaccel.optimize.environment import xla_flags_with

    flags, added = xla_flags_with("--xla_dump_to=/tmp/d", ("cudnn_layer_norm",))
    assert flags == "--xla_dump_to=/tmp/d --xla_gpu_enable_cudnn_layer_norm=true"
    assert added == ["--xla_gpu_enable_cudnn_layer_norm=true"]
    # configure's own flag goes again; the user's own copy of it stays
    assert xla_flags_with(flags, (), added) == ("--xla_dump_to=/tmp/d", [])
    assert xla_flags_with(flags, ()) == (flags, [])
    with pytest.raises(InputError, match="already sets --xla_gpu_enable_cublaslt"):
        xla_flags_with("--xla_gpu_enable_cublaslt=false", ("cublaslt",))


def test_xla_options_round_trip_through_tfaccel_json(tmp_path: Path) -> None:
    p = tmp_path / "tfaccel.json"
    p.write_text(json.dumps({"xla_options": ["cublaslt"], "precision": "mixed_bfloat16"}))
    assert read_settings_file(p).xla_options == ("cublaslt",)
    assert json.loads(json.dumps(Settings(xla_options=("cublaslt",)).to_dict()))["xla_options"] == [
        "cublaslt"
    ]
    with pytest.raises(ConfigFileError, match="xla_options entry"):
        settings_from_dict({"xla_options": ["turbo"]})


def test_float8_implies_the_cublas_gemm_option() -> None:
    assert Settings().effective_xla_options == ()
    assert Settings(float8=True).effective_xla_options == ("cublas_gemm",)
    both = Settings(float8=True, xla_options=["cublaslt", "cublas_gemm"])
    assert both.effective_xla_options == ("cublas_gemm", "cublaslt")
    assert both.xla_options == ("cublas_gemm", "cublaslt")


def test_each_xla_option_is_whole_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """configure adds and removes its XLA_FLAGS token by token: an option's flags are
    each one token."""
    from tfaccel import _compat
    from tfaccel.optimize.environment import xla_flags_with
    from tfaccel.optimize.settings import XLA_OPTIONS

    assert all(len(flag.split()) == 1 for flags in XLA_OPTIONS.values() for flag in flags)
    names = ("cudnn_gemm_fusions", "block_level_fusions", "triton_fusions")
    monkeypatch.setattr(_compat, "installed_version", lambda: "2.21.0")  # all three known
    flags, added = xla_flags_with("--xla_dump_to=/tmp/x", names)
    assert flags.split() == ["--xla_dump_to=/tmp/x", *added] and len(added) == 3
    # configure's own flags go when the options change; the user's stay
    again, _ = xla_flags_with(flags, ("cublaslt",), added)
    assert again.split() == ["--xla_dump_to=/tmp/x", *XLA_OPTIONS["cublaslt"]]


def test_cublaslt_keeps_its_gemms_out_of_xlas_command_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Captured into a CUDA graph, a cuBLASLt GEMM failed its workspace check (H100, TF
    2.21): the option takes CUBLASLT out of the command buffers' default types, and out
    of the `command_buffers` option's list where both are set, as one flag."""
    from tfaccel import _compat
    from tfaccel.optimize.environment import merged_flags, xla_flags_with

    monkeypatch.setattr(_compat, "installed_version", lambda: "2.21.0")  # command_buffers

    flags, added = xla_flags_with("", ("cublaslt",))
    assert added == ["--xla_gpu_enable_cublaslt=true", "--xla_gpu_enable_command_buffer=-CUBLASLT"]
    assert flags == " ".join(added)
    _, added = xla_flags_with("", ("command_buffers", "cublaslt"))
    buffers = [flag for flag in added if flag.startswith("--xla_gpu_enable_command_buffer=")]
    assert len(buffers) == 1
    types = buffers[0].split("=", 1)[1].split(",")
    assert "CUBLASLT" not in types and {"FUSION", "CUBLAS", "WHILE"} <= set(types)
    assert merged_flags(["--f=-A", "--f=+B"]) == ["--f=-A,+B"]
    assert merged_flags(["--f=+C", "--f=A,B"]) == ["--f=A,B,C"]
    with pytest.raises(ValueError, match="one flag two ways"):
        merged_flags(["--f=A", "--f=B"])
    with pytest.raises(InputError, match="already sets --xla_gpu_enable_command_buffer"):
        xla_flags_with("--xla_gpu_enable_command_buffer=FUSION", ("cublaslt",))


def test_einsum_is_a_later_knob_that_keeps_old_journal_keys() -> None:
    from tfaccel.trial.runner import StepPlan, label_of, settings_key

    s = Settings(precision="mixed_bfloat16", xla="jit", batch_size=2048)
    assert settings_key("bert_hub", s, StepPlan()) == settings_key(
        "bert_hub", s.replace(einsum="keras"), StepPlan()
    )
    flat = s.replace(einsum="flat")
    assert settings_key("bert_hub", flat, StepPlan()) != settings_key("bert_hub", s, StepPlan())
    assert "einsum=flat" in label_of(flat)


@pytest.mark.parametrize("knob", ["cache_dataset", "gradient_checkpointing", "float8"])
def test_a_boolean_knob_refuses_a_string(knob: str) -> None:
    """ "false" in a hand-edited tfaccel.json would otherwise turn the knob on."""
    from tfaccel.errors import ConfigFileError
    from tfaccel.optimize.settings import settings_from_dict

    with pytest.raises(ConfigFileError, match=f"{knob} must be true or false"):
        settings_from_dict({knob: "false"})


def test_one_table_gives_labels_skip_names_choices_and_keras_patches() -> None:
    from tfaccel.optimize.settings import KERAS_PATCHES, KNOBS, SKIPPABLE, label_of

    s = Settings(precision="mixed_bfloat16", xla="jit", batch_size=512, steps_per_execution=10)
    assert label_of(s) == "mixed_bfloat16 xla=jit batch=512 spe=10"
    more = s.replace(
        einsum="flat",
        float8=True,
        xla_options=("cublaslt",),
        allocator="cuda_malloc_async",
        rnn_algorithm="persist_dynamic",
    )
    assert label_of(more) == (
        "mixed_bfloat16 xla=jit batch=512 spe=10 rnn=persist_dynamic cuda_malloc_async "
        "float8 einsum=flat xla_options=cublaslt"
    )
    # None is the script's own: shown for the batch, left out for the validation's
    assert label_of(Settings(batch_size=None, validation_batch_size=1024)) == (
        "auto xla=auto batch=own spe=1 val_batch=1024"
    )
    assert set(SKIPPABLE) == {
        "steps_per_execution",
        "validation_batch_size",
        "input_cast",
        "device_arrays",
        "xla_options",
        "rnn_algorithm",
        "allocator",
        "prefetch",
        "dropout",
        "float8",
        "attention",
        "einsum",
    }
    assert KERAS_PATCHES == ("dropout", "attention", "einsum")
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert {k.name for k in KNOBS} <= fields
    for knob in KNOBS:
        if knob.choices:
            with pytest.raises(InputError, match=f"Unknown {knob.name}"):
                Settings(**{knob.name: "nonsense"})


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"memory": "limit", "memory_limit_mib": "4096"}, "memory_limit_mib must be a positive"),
        ({"memory": "unified", "unified_oversubscription": "2"}, "must be a number from 1 to 8"),
        ({"batch_size": 10**9}, "larger than any training batch"),
    ],
)
def test_a_wrong_type_names_its_field_before_any_comparison(
    fields: dict[str, object], says: str
) -> None:
    from tfaccel.errors import InputError

    with pytest.raises(InputError, match=says):
        Settings(**fields)  # type: ignore[arg-type]


def test_every_keras_patch_knob_has_its_row_in_the_registry() -> None:
    from tfaccel.optimize.patches import LAYER_COUNTERS, PATCHES
    from tfaccel.optimize.settings import KERAS_PATCHES, LAYER_KNOBS

    assert set(PATCHES) == set(KERAS_PATCHES) and set(LAYER_KNOBS) <= set(LAYER_COUNTERS)
