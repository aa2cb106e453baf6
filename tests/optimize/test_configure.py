"""tfaccel.configure() with real TensorFlow (CPU); order-sensitive cases in fresh processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fakes import needs_keras_for

pytest.importorskip("tensorflow")

from tfaccel import _compat
from tfaccel.optimize.apply import resolve_precision
from tfaccel.optimize.environment import unified_memory_limit_mib


def run_py(code: str, tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(code))
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_order_idempotence_and_the_late_call_error(tmp_path: Path) -> None:
    out = run_py(
        """
        import json, os
        import tfaccel
        r1 = tfaccel.configure(allocator="cuda_malloc_async", memory="growth", xla="jit")
        env = os.environ.get("TF_GPU_ALLOCATOR")
        import tensorflow as tf
        tf.zeros(1)  # TensorFlow's runtime starts here
        r2 = tfaccel.configure(allocator="cuda_malloc_async", memory="growth", xla="jit")
        try:
            tfaccel.configure(allocator="default")
            late = None
        except Exception as e:
            late = [type(e).__name__, e.message, e.hint]
        print(json.dumps({"env": env, "first": [r.status for r in r1.rows],
                          "second": [r.status for r in r2.rows], "late": late,
                          "kwargs": r2.compile_kwargs()}))
    """,
        tmp_path,
    )
    assert out["env"] == "cuda_malloc_async"
    assert out["first"][0] == "applied"
    assert "applied" not in out["second"]  # the same call again changes nothing
    late = out["late"]
    assert late is not None and late[0] == "ConfigureOrderError"
    assert "can no longer change: TensorFlow already started" in late[1]
    assert "tfaccel.configure() at the top" in late[2]
    assert out["kwargs"] == {"jit_compile": True, "steps_per_execution": 1}


def test_unified_memory_sets_the_env_and_says_what_it_costs(tmp_path: Path) -> None:
    out = run_py(
        """
        import json, os
        import tfaccel
        r = tfaccel.configure(memory="unified", unified_oversubscription=2.0)
        print(json.dumps({"env": os.environ.get("TF_FORCE_UNIFIED_MEMORY"),
                          "rows": [[x.knob, x.status, x.detail] for x in r.rows
                                   if x.knob == "memory"]}))
    """,
        tmp_path,
    )
    assert out["env"] == "1"
    details = " ".join(row[2] for row in out["rows"])  # type: ignore[union-attr]
    assert "migrate on access over PCIe" in details
    assert unified_memory_limit_mib(143771, 1.5) == 215656


@needs_keras_for("gradient_checkpointing", True)
def test_helpers_apply_to_the_users_objects() -> None:
    import keras
    import tensorflow as tf

    import tfaccel

    try:
        r = tfaccel.configure(
            precision="mixed_float16",
            xla="off",
            steps_per_execution=5,
            gradient_accumulation_steps=4,
            gradient_checkpointing=True,
            cache_dataset=True,
        )
        assert keras.mixed_precision.global_policy().name == "mixed_float16"
        assert r.compile_kwargs() == {"jit_compile": False, "steps_per_execution": 5}
        assert r.optimizer("sgd").gradient_accumulation_steps == 4
        assert isinstance(r.remat_scope(), keras.RematScope)
        ds = r.dataset(tf.data.Dataset.range(10))
        assert "Prefetch" in type(ds).__name__
        assert list(ds.as_numpy_iterator()) == list(range(10))
        detail = next(x.detail for x in r.rows if x.knob == "precision")
        assert "LossScaleOptimizer" in detail
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        r.compile(model, optimizer="sgd", loss="mse")
        assert model.steps_per_execution == 5
        assert not any(x.status == "warning" for x in r.rows)  # one device: no strategy
        mirrored = tfaccel.configure(strategy="mirrored", gradient_accumulation_steps=4)
        warning = [x for x in mirrored.rows if x.status == "warning"]
        assert warning and "DistributedTrainer accumulates instead" in warning[0].detail
        from rich.console import Console

        console = Console(record=True, width=160)
        r.summary(console)  # the report printed on request: a row per knob
        table = console.export_text()
        assert "tfaccel.configure: mixed_float16" in table
        assert "steps_per_execution" in table and "at-compile" in table
    finally:
        tfaccel.configure.reset()
    assert keras.mixed_precision.global_policy().name == "float32"


def test_input_cast_sends_floating_inputs_in_the_compute_dtype() -> None:
    import numpy as np
    import tensorflow as tf

    import tfaccel

    try:
        r = tfaccel.configure(precision="mixed_bfloat16", xla="off", input_cast="compute")
        x = {"pixels": np.ones((2, 3), "float32"), "ids": np.arange(2, dtype="int32")}
        y = np.array([0.5, 1.5], "float32")
        ds = r.dataset(tf.data.Dataset.from_tensors((x, y)))
        xs, ys = next(iter(ds))
        assert xs["pixels"].dtype == tf.bfloat16 and xs["ids"].dtype == tf.int32
        assert ys.dtype == tf.float32  # labels as they are
        alone = r.dataset(tf.data.Dataset.from_tensors(np.ones((2, 3), "float32")))
        assert next(iter(alone)).dtype == tf.bfloat16
        # a batch held in memory (synthetic data) is cast once, up front
        cx, cy = r.cast_inputs((x, y))
        assert cx["pixels"].dtype == tf.bfloat16 and cx["ids"].dtype == tf.int32
        assert cy.dtype == tf.float32
        # float32 training: nothing to cast to
        row = next(x for x in r.rows if x.knob == "tf.data")
        assert row.value["input_cast"] == "compute"
        f32 = tfaccel.configure(precision="float32", xla="off", input_cast="compute")
        assert next(iter(f32.dataset(tf.data.Dataset.from_tensors(y)))).dtype == tf.float32
        row = next(x for x in f32.rows if x.knob == "tf.data")
        assert "no effect" in row.value["input_cast"]
    finally:
        tfaccel.configure.reset()


def test_from_file(tmp_path: Path) -> None:
    import tfaccel

    p = tmp_path / "tfaccel.json"
    p.write_text(
        json.dumps(
            {
                "schema": "tfaccel.settings/1",
                "settings": {"precision": "float32", "steps_per_execution": 7},
            }
        )
    )
    try:
        r = tfaccel.configure.from_file(p, xla="jit")
        spe = 7 if _compat.keras_needs("", *_compat.KERAS_SPE) is None else 1  # Keras 3.6: 1
        assert r.settings.steps_per_execution == spe and r.settings.xla == "jit"
    finally:
        tfaccel.configure.reset()


def test_unknown_keyword_is_a_clear_error() -> None:
    import tfaccel
    from tfaccel.errors import InputError

    with pytest.raises(InputError, match="Unknown configure"):
        tfaccel.configure(turbo=True)
    with pytest.raises(InputError) as caught:
        tfaccel.configure(memory_limit_mb=4096)
    assert "Received: memory_limit_mb" in caught.value.message
    assert caught.value.hint == "did you mean memory_limit_mib?"


@pytest.mark.parametrize(
    ("cc", "want"),
    [
        ("9.0", "mixed_bfloat16"),
        ("8.6", "mixed_bfloat16"),
        ("7.5", "mixed_float16"),
        ("6.1", "float32"),
        (None, "float32"),
    ],
)
def test_auto_precision_by_capability(cc: str | None, want: str) -> None:
    assert resolve_precision("auto", cc)[0] == want
    assert resolve_precision("tf32", cc) == ("tf32", "as requested")


def test_xla_options_go_into_xla_flags_before_tensorflow_starts(tmp_path: Path) -> None:
    out = run_py(
        """
        import json, os
        os.environ["XLA_FLAGS"] = "--xla_gpu_autotune_level=2"
        import tfaccel
        r1 = tfaccel.configure(xla_options=["cudnn_layer_norm", "cublaslt"], precision="bfloat16")
        both = os.environ["XLA_FLAGS"]
        import keras
        policy = keras.mixed_precision.global_policy().name
        tfaccel.configure(xla_options=["cublaslt"])
        one = os.environ["XLA_FLAGS"]
        import tensorflow as tf
        tf.zeros(1)  # TensorFlow's runtime starts here
        same = tfaccel.configure(xla_options=["cublaslt"])
        try:
            tfaccel.configure(xla_options=[])
            late = None
        except Exception as e:
            late = type(e).__name__
        print(json.dumps({"both": both, "one": one, "policy": policy, "late": late,
                          "rows": {x.knob: [x.value, x.status] for x in r1.rows},
                          "same": {x.knob: x.status for x in same.rows}["xla_options"]}))
    """,
        tmp_path,
    )
    cublaslt = "--xla_gpu_enable_cublaslt=true --xla_gpu_enable_command_buffer=-CUBLASLT"
    assert out["both"] == (
        f"--xla_gpu_autotune_level=2 {cublaslt} --xla_gpu_enable_cudnn_layer_norm=true"
    )
    assert out["one"] == f"--xla_gpu_autotune_level=2 {cublaslt}"
    assert out["policy"] == "bfloat16"
    rows = out["rows"]
    assert isinstance(rows, dict)
    assert rows["xla_options"] == [["cublaslt", "cudnn_layer_norm"], "applied"]
    assert rows["precision"] == ["bfloat16", "applied"]
    assert out["same"] == "unchanged"
    assert out["late"] == "ConfigureOrderError"


@needs_keras_for("float8", True)
def test_float8_turns_xlas_triton_gemms_off_and_says_why(tmp_path: Path) -> None:
    """float8 implies the cublas_gemm option (XLA folds the float8 products back to bf16
    in its Triton GEMMs); turning float8 off again takes the flag away; a user's own
    Triton setting is a clear error, not overridden."""
    out = run_py(
        """
        import json, os
        os.environ["XLA_FLAGS"] = "--xla_gpu_autotune_level=2"
        import tfaccel
        r = tfaccel.configure(float8=True, xla="jit", precision="mixed_bfloat16")
        on = os.environ["XLA_FLAGS"]
        row = next(x for x in r.rows if x.knob == "xla_options")
        tfaccel.configure(float8=False)
        off = os.environ["XLA_FLAGS"]
        os.environ["XLA_FLAGS"] = "--xla_gpu_enable_triton_gemm=true"
        try:
            tfaccel.configure(float8=True)
            clash = None
        except Exception as e:
            clash = [type(e).__name__, str(e)]
        print(json.dumps({"on": on, "off": off, "clash": clash,
                          "row": [row.value, row.status, row.detail]}))
    """,
        tmp_path,
    )
    assert out["on"] == "--xla_gpu_autotune_level=2 --xla_gpu_enable_triton_gemm=false"
    assert out["off"] == "--xla_gpu_autotune_level=2"
    value, status, detail = out["row"]  # type: ignore[misc]
    assert (value, status) == (["cublas_gemm"], "applied")
    assert "cublas_gemm: for float8" in detail
    clash = out["clash"]
    assert isinstance(clash, list) and clash[0] == "InputError"
    assert "--xla_gpu_enable_triton_gemm" in clash[1]


@pytest.mark.gpu
def test_gemv_as_gemm_keeps_a_vector_matrix_product_a_gemm_on_the_gpu(tmp_path: Path) -> None:
    """XLA's dot-strength-reduction turns a [1, 3072] x [3072, 768] product into a
    multiply and a reduction; with the option the optimized HLO keeps a GEMM."""
    from tfaccel import _compat
    from tfaccel.optimize.settings import XLA_OPTIONS

    floor = _compat.xla_flags_floor(XLA_OPTIONS["gemv_as_gemm"])
    if floor is not None:  # refused there (TF 2.16's XLA ignores it: measured)
        pytest.skip(f"xla_options 'gemv_as_gemm' needs TensorFlow >= {floor}")
    code = """
        import json, os
        import tfaccel
        tfaccel.configure(xla_options={options}, precision="bfloat16")
        import tensorflow as tf
        x = tf.ones((1, 3072), tf.bfloat16)
        w = tf.ones((3072, 768), tf.bfloat16)
        f = tf.function(lambda x, w: tf.matmul(x, w), jit_compile=True)
        hlo = f.experimental_get_compiler_ir(x, w)(stage="optimized_hlo")
        gemm = "__cublas$gemm" in hlo or "gemm_fusion" in hlo or "triton_gemm" in hlo
        print(json.dumps({{"gemm": gemm, "reduce": " reduce(" in hlo}}))
    """
    default = run_py(code.format(options="[]"), tmp_path)
    kept = run_py(code.format(options='["gemv_as_gemm"]'), tmp_path)
    assert default == {"gemm": False, "reduce": True}
    assert kept["gemm"] is True


def test_the_tuned_batch_size_is_applied_to_datasets_and_numpy_inputs(tmp_path: Path) -> None:
    """tfaccel.json's batch_size: report.dataset re-batches (batches or examples), and
    report.fit_kwargs() passes it to fit for numpy inputs; the summary lists every knob."""
    import json

    import keras
    import numpy as np
    import tensorflow as tf

    import tfaccel

    path = tmp_path / "tfaccel.json"
    settings = {"precision": "float32", "xla": "off", "batch_size": 48}
    path.write_text(json.dumps({"schema": "tfaccel.settings/1", "settings": settings}))
    try:
        report = tfaccel.configure.from_file(path)
        x, y = np.ones((200, 5), "float32"), np.zeros(200, "int32")
        batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
        first = next(iter(report.dataset(batches)))
        assert first[0].shape == (48, 5) and first[1].shape == (48,)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
        one = tf.data.Dataset.from_tensors((x[:8], y[:8])).repeat()  # static batch of 8
        assert next(iter(report.dataset(one, model=model)))[0].shape == (48, 5)
        assert report.fit_kwargs() == {"batch_size": 48}
        knobs = {r.knob for r in report.rows}
        assert {"float8", "gradient_checkpointing", "gradient_accumulation_steps"} <= knobs
        data = next(r for r in report.rows if r.knob == "tf.data")
        assert data.value["batch_size"] == 48 and "re-batches to 48" in data.detail
    finally:
        tfaccel.configure.reset()


@pytest.mark.parametrize("width", [80, 120])
def test_the_summary_fits_the_console_without_splitting_words(width: int, tmp_path: Path) -> None:
    """At 80 columns the table split `model.compile(j` / `it_compile=Fals` / `e)`; a
    narrow console now gets each knob on lines of its own, wrapped at spaces."""
    out = run_py(
        f"""
        import json
        from rich.console import Console
        import tfaccel
        console = Console(width={width}, record=True)
        tfaccel.configure(precision="float32", xla="off").summary(console)
        print(json.dumps({{"text": console.export_text()}}))
        """,
        tmp_path,
    )
    text = out["text"]
    assert "model.compile(jit_compile=False)" in text
    assert max(len(line) for line in text.splitlines()) <= width


def test_steps_per_execution_is_left_at_1_where_keras_would_train_other_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keras 3.6 trains other batches with an execution of several steps, and drops the
    validation (3.7 and later train the same): there it stays at 1, and the report says
    why."""
    import tfaccel

    monkeypatch.setattr(_compat, "keras_version", lambda: "3.6.0")
    try:
        r = tfaccel.configure(precision="float32", xla="off", steps_per_execution=25)
        assert r.compile_kwargs()["steps_per_execution"] == 1
        (row,) = [x for x in r.rows if x.knob == "steps_per_execution"]
        assert (row.value, row.status) == (25, "warning")
        assert "needs Keras >= 3.7.0" in row.detail and row.detail.endswith("left at 1")
        monkeypatch.setattr(_compat, "keras_version", lambda: "3.7.0")
        tfaccel.configure.reset()
        r = tfaccel.configure(precision="float32", xla="off", steps_per_execution=25)
        assert r.compile_kwargs()["steps_per_execution"] == 25
    finally:
        tfaccel.configure.reset()
