"""Every knob `tfaccel.configure` applies, declared once with its default and checks.

Precedence (written down once): explicit arguments to `configure()` override the values
from `configure.from_file()`, which override the defaults below. Nothing is read from
the environment except what TensorFlow itself reads (the allocator and XLA flags are
written to it before TensorFlow starts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tfaccel.errors import ConfigFileError, InputError

# A batch size beyond this is a typo or a corrupt file, not a training batch (tune's
# ladder stops at the data's size, 16 steps an epoch).
MAX_BATCH = 1 << 24

# Each knob's choices, as a type (for the fields of Settings and whoever passes them)
# and as the tuple the checks and the command line list.
Precision = Literal["auto", "float32", "tf32", "mixed_float16", "mixed_bfloat16", "bfloat16"]
XlaMode = Literal["off", "jit", "auto", "autoclustering"]
MemoryMode = Literal["default", "growth", "limit", "unified"]
Allocator = Literal["default", "cuda_malloc_async"]
Strategy = Literal["auto", "none", "one_device", "mirrored"]
Prefetch = Literal["auto", "device", "off"]
InputCast = Literal["off", "compute"]
# Keras' dropout, or tfaccel's cheaper masks for XLA (tfaccel.optimize.dropout).
Dropout = Literal["keras", "mask_once", "philox16"]
# Keras' einsum, or projections' einsums as 2-D GEMMs (tfaccel.optimize.einsum).
Einsum = Literal["keras", "flat"]
# Keras' attention, or cuDNN's flash attention under XLA (tfaccel.optimize.attention).
Attention = Literal["keras", "cudnn"]
# TensorFlow's cuDNN RNN algorithm, or one of cuDNN's persistent ones
# (tfaccel.optimize.rnn_algorithm).
RnnAlgorithm = Literal["default", "persist_static", "persist_dynamic"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
XLA_MODES: tuple[str, ...] = get_args(XlaMode)
MEMORY_MODES: tuple[str, ...] = get_args(MemoryMode)
ALLOCATORS: tuple[str, ...] = get_args(Allocator)
STRATEGIES: tuple[str, ...] = get_args(Strategy)
PREFETCH: tuple[str, ...] = get_args(Prefetch)
INPUT_CASTS: tuple[str, ...] = get_args(InputCast)
DROPOUTS: tuple[str, ...] = get_args(Dropout)
EINSUMS: tuple[str, ...] = get_args(Einsum)
ATTENTIONS: tuple[str, ...] = get_args(Attention)
RNN_ALGORITHMS: tuple[str, ...] = get_args(RnnAlgorithm)
# XLA's GPU compiler options, by name: the XLA_FLAGS each one adds (set before TensorFlow
# starts; XLA reads them once per process).
XLA_OPTIONS: dict[str, tuple[str, ...]] = {
    # GEMMs through cuBLASLt, with the bias add and activation in the GEMM's epilogue;
    # kept out of XLA's command buffers (CUDA graphs): captured into one, a cuBLASLt GEMM
    # failed its workspace check on an H100 (TF 2.21: "Failed to capture gpu graph:
    # ... cuda_blas_lt.cc:388 workspace_addr != nullptr"), and the trial with it.
    "cublaslt": ("--xla_gpu_enable_cublaslt=true", "--xla_gpu_enable_command_buffer=-CUBLASLT"),
    # Layer norms (forward, and backward on compute capability 9.0) through cuDNN's
    # fused kernels, where XLA's CudnnNormRewriter recognises the pattern; otherwise a
    # layer norm is two dependent reductions and an elementwise pass, in separate
    # kernels. `tune` tries it on models of matrix products.
    "cudnn_layer_norm": ("--xla_gpu_enable_cudnn_layer_norm=true",),
    # Keep vector x matrix products (batch-1 decoding) as GEMMs: XLA's
    # dot-strength-reduction pass otherwise turns each one under 10M elements into an
    # elementwise multiply, written out in full, and a reduction.
    "gemv_as_gemm": ("--xla_disable_hlo_passes=dot-strength-reduction",),
    # CUDA graphs for more of XLA's program than its default (fusions and library
    # calls inside while loops and conditionals too), so a loop of small kernels, as in
    # batch-1 decoding, is launched as a few graphs.
    "command_buffers": (
        "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,"
        "COLLECTIVES,DYNAMIC_SLICE_FUSION,DYNAMIC_SLICE_COPY_FUSION,WHILE,CONDITIONAL",
    ),
    # Matrix products through cuBLAS/cuBLASLt only, none as XLA's Triton GEMM fusions.
    # float8 needs it (and implies it): with Triton GEMMs on, XLA (TF 2.21) folds Keras'
    # float8 quantize-dequantize back into a bf16 product, so no FP8 GEMM is formed and
    # the quantization is pure cost.
    "cublas_gemm": ("--xla_gpu_enable_triton_gemm=false",),
    # XLA's newer emitters, off by default in TF 2.21; measured no faster on BERT-base
    # training (the measurements page), so `tune` does not try them.
    # GEMM fusions (a product with the elementwise work around it) through cuDNN's
    # graph API, as another candidate of XLA's GEMM autotuner.
    "cudnn_gemm_fusions": ("--xla_gpu_cudnn_gemm_fusion_level=2",),
    # Fusions without a product (elementwise, reductions: layer norms, softmax, bias
    # gradients, dropout) rewritten to Triton's block-level emitter where XLA's cost
    # model rates it faster than XLA's own.
    "block_level_fusions": ("--xla_gpu_experimental_enable_fusion_block_level_rewriter=true",),
    # Every such fusion timed with both emitters (by default only reductions and
    # transposes are).
    "triton_fusions": ("--xla_gpu_experimental_all_fusions_with_triton=true",),
}
# The XLA options a knob needs to do what it says: configure adds them.
IMPLIED_XLA_OPTIONS = {"float8": ("cublas_gemm",)}


# What a late trial of `tune` may need, besides the knob's own layers in the model:
# GPUs (one GPU), XLA on, a 16-bit compute dtype, a model mostly of matrix products,
# FP8 tensor cores, cuDNN's flash attention (tfaccel.tune.search decides each).
Need = Literal["gpu", "one_gpu", "xla", "16bit", "gemm_model", "fp8", "flash_attention"]


@dataclass(frozen=True)
class TuneTry:
    """How `tune` tries a knob late in its search, on the best settings so far: each
    value in turn, until one that the accuracy guard did not reject (kept or not),
    where every need holds. `layers`: what the model must hold for the knob to act,
    as a note names it ("dropout layer"); `tfaccel.optimize.<knob>.count_layers(layers)`
    counts them among the model's layers, nested ones included. `guard`: the knob
    changes the arithmetic, so the guard holds its losses to the best run's.
    `together`: knobs next to each other in KNOBS with the same name here are tried in
    one trial (each its first value), where more than one applies. `saves_ms`: the knob
    saves host time per step, at most this much; where the best's step is so long that
    this is under the noise floor, it is not tried. `withheld`: why tune does not try
    it at all (said where the model holds its layers), as for a knob measured to change
    what the model learns in a way the accuracy guard does not see: the user may still
    set it in a settings file."""

    values: tuple[Any, ...]
    needs: tuple[Need, ...] = ()
    layers: str | None = None
    guard: bool = False
    together: str | None = None
    saves_ms: float | None = None
    withheld: str | None = None


@dataclass(frozen=True)
class Knob:
    """One knob of `Settings` as the rest of tfaccel knows it: the values it takes
    (checked when Settings are made), how a trial's label shows it (always, or where it
    is not `quiet`), whether `tune --skip` can leave it alone, whether it replaces
    a Keras function for the process (then `tfaccel.optimize.<name>` has
    `set_<name>(value)` and `current_<name>()`, and "keras" is Keras' own), and how
    `tune` tries it late in its search, if it does."""

    name: str
    choices: tuple[str, ...] | None = None
    shown: str | None = None  # "{}" format of its label part; None: not in the label
    quiet: Any = None  # the value the label leaves out
    skippable: bool = False
    replaces_keras: bool = False
    tune: TuneTry | None = None
    none: str | None = None  # how the label shows None (the script's own); None: not at all


_XLA_16BIT_ATTENTION: tuple[Need, ...] = ("flash_attention", "xla", "16bit")

# Every knob that has choices, a label part, a --skip name, a Keras patch or a late
# trial, in the order of a trial's label (and of the late trials). A new knob: its field
# in Settings, its row here, its module.
KNOBS: tuple[Knob, ...] = (
    Knob("precision", PRECISIONS, shown="{}"),
    Knob("xla", XLA_MODES, shown="xla={}"),
    Knob("batch_size", shown="batch={}", none="own"),
    Knob("steps_per_execution", shown="spe={}", skippable=True),
    # Evaluation reads the weights and changes none: a script's validation arrays
    # evaluated at a larger batch leave its training as it was (tfaccel.script.validation).
    Knob("validation_batch_size", shown="val_batch={}", skippable=True),
    Knob("memory", MEMORY_MODES),
    Knob("strategy", STRATEGIES),
    # On a small-batch LSTM cuDNN's persistent dynamic algorithm ran 1.4x the standard
    # one and passed the guard, yet `tfaccel run` under an answer that held it (with
    # float32 and steps_per_execution 25) validated keras-io's LSTM script worse than
    # plain python in two same-seed pairs, beyond plain's own repeat, with training
    # losses alike (the measurements page). Of that answer's knobs it is the one that
    # changes the RNN's arithmetic, and the guard reads training losses only: tune leaves
    # it out and says so until it is shown harmless; a settings file may still ask for it.
    Knob(
        "rnn_algorithm",
        RNN_ALGORITHMS,
        shown="rnn={}",
        quiet="default",
        skippable=True,
        tune=TuneTry(
            ("persist_dynamic",),
            needs=("gpu",),
            layers="cuDNN LSTM or GRU layer",
            guard=True,
            withheld=(
                "with it in the answer, keras-io's LSTM script validated worse than under plain "
                "python at the same steps while its training losses stayed alike, which is all "
                "the accuracy guard reads: it is not shown to keep the training"
            ),
        ),
    ),
    # The GPU knobs that rarely pay come first among the late trials, so that a time
    # budget cuts them after the layer rewrites. They run in one trial: neither changes
    # the model's arithmetic, and each gained nothing alone on BERT-base and GPT-2 on the
    # H200 (-1 % to +0 %); a trial saved is a minute of a ResNet-50 tune. What they save
    # is host time per step (allocations, the wait for the next batch): on the H200 at
    # most 0.88 ms (a small convnet's 7.0 ms steps, 6.1 ms with both), and nothing beyond
    # the noise on steps of 46-483 ms (stacked LSTM, ResNet-50 at 512 and 1024 with
    # 308 MB of input a step, BERT-base). Twice that most is allowed: steps over 67 ms
    # (at the 3 % floor) leave them untried.
    Knob(
        "allocator",
        ALLOCATORS,
        shown="{}",
        quiet="default",
        skippable=True,
        tune=TuneTry(("cuda_malloc_async",), needs=("gpu",), together="runtime", saves_ms=2.0),
    ),
    Knob(
        "prefetch",
        PREFETCH,
        shown="prefetch={}",
        quiet="auto",
        skippable=True,
        tune=TuneTry(("device",), needs=("one_gpu",), together="runtime", saves_ms=2.0),
    ),
    Knob("input_cast", INPUT_CASTS, shown="input_cast={}", quiet="off", skippable=True),
    Knob("device_arrays", shown="device_arrays", quiet=False, skippable=True),
    # philox16 draws another random stream, so the guard holds it; only if the guard
    # rejects it, mask_once (Keras' own masks, computed once: part of the saving).
    Knob(
        "dropout",
        DROPOUTS,
        "dropout={}",
        "keras",
        skippable=True,
        replaces_keras=True,
        tune=TuneTry(("philox16", "mask_once"), ("xla",), "dropout layer", guard=True),
    ),
    Knob(
        "float8",
        shown="float8",
        quiet=False,
        skippable=True,
        tune=TuneTry((True,), ("fp8", "xla", "gemm_model"), guard=True),
    ),
    # cuDNN's softmax sums in another order: the guard holds it.
    Knob(
        "attention",
        ATTENTIONS,
        "attention={}",
        "keras",
        skippable=True,
        replaces_keras=True,
        tune=TuneTry(("cudnn",), _XLA_16BIT_ATTENTION, "multi-head attention", guard=True),
    ),
    # The flattened gradient sums in another order: the guard holds it.
    Knob(
        "einsum",
        EINSUMS,
        "einsum={}",
        "keras",
        skippable=True,
        replaces_keras=True,
        tune=TuneTry(("flat",), layers="EinsumDense layer", guard=True),
    ),
    Knob("xla_options", shown="xla_options={}", quiet=(), skippable=True),
)
# Each knob by its name.
KNOB_NAMED = {k.name: k for k in KNOBS}
# The knobs `tune --skip` can leave as they are.
SKIPPABLE = tuple(k.name for k in KNOBS if k.skippable)
# The knobs that replace a Keras function for the process.
KERAS_PATCHES = tuple(k.name for k in KNOBS if k.replaces_keras)
# The knobs `tune` tries late in its search, in this order.
LATE_KNOBS = tuple(k for k in KNOBS if k.tune is not None)
# The knobs whose late trial needs their layers in the model: the trials count them.
LAYER_KNOBS = tuple(k.name for k in LATE_KNOBS if k.tune and k.tune.layers)


def changed(base: Settings, other: Settings) -> dict[str, Any]:
    """The fields where `other` differs from `base`, with `other`'s values."""
    ours = base.to_dict()
    return {name: value for name, value in other.to_dict().items() if ours[name] != value}


def said(values: dict[str, Any]) -> str:
    """Settings' values in words: `name=value`, comma-separated."""
    return ", ".join(f"{name}={value}" for name, value in values.items())


def label_of(settings: Settings) -> str:
    """A trial's settings in a line: the knobs with a label part, in KNOBS' order."""
    parts = []
    for knob in KNOBS:
        value = getattr(settings, knob.name)
        if knob.shown is None or (knob.quiet is not None and value == knob.quiet):
            continue
        if value is None and knob.none is None:
            continue
        shown = ",".join(value) if isinstance(value, tuple) else value
        parts.append(knob.shown.format(knob.none if value is None else shown))
    return " ".join(parts)


def _doc(default: Any, doc: str) -> Any:
    """A Settings field with its one-line documentation (the docs' configure reference
    is generated from these)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Settings:
    """What `tfaccel.configure()` applies; each field's `metadata["doc"]` says what it does."""

    memory: MemoryMode = _doc(
        "default", "GPU memory: TensorFlow's default, grow as needed, a fixed limit, or unified"
    )
    memory_limit_mib: int | None = _doc(None, 'with memory="limit": MiB per GPU')
    unified_oversubscription: float = _doc(
        1.0, 'with memory="unified": how many times the physical memory (1 to 8)'
    )
    allocator: Allocator = _doc("default", "default: the BFC allocator; or cuda_malloc_async")
    precision: Precision = _doc(
        "auto",
        "auto: mixed_bfloat16 from compute capability 8.0, mixed_float16 on older tensor "
        "cores, float32 elsewhere; bfloat16 keeps the weights in bf16 too (inference)",
    )
    xla: XlaMode = _doc("auto", "XLA compilation of the model; auto: Keras' default")
    xla_options: tuple[str, ...] = _doc((), "XLA options by name (XLA_OPTIONS), as XLA_FLAGS")
    steps_per_execution: int = _doc(1, "training steps per compiled call")
    batch_size: int | None = _doc(
        None, "recorded by tune; report.dataset re-batches to it, report.fit_kwargs() passes it"
    )
    validation_batch_size: int | None = _doc(
        None,
        "the batch a script's validation arrays are evaluated at (fit's "
        "validation_batch_size; None: the script's own); evaluation changes no weight",
    )
    gradient_checkpointing: bool = _doc(False, "recompute activations to save memory")
    gradient_accumulation_steps: int = _doc(1, "batches whose gradients add up to one update")
    prefetch: Prefetch = _doc("auto", "tf.data prefetch; auto: AUTOTUNE on the host")
    input_cast: InputCast = _doc(
        "off",
        "compute: floating inputs are cast to the mixed-precision compute dtype on the host, "
        "so half the bytes cross PCIe",
    )
    cache_dataset: bool = _doc(False, "cache the dataset after its first pass")
    device_arrays: bool = _doc(
        False,
        "a script's numpy arrays given to fit copied to GPU memory once and each batch "
        "gathered there (tfaccel.optimize.device_arrays), where they fit in a quarter of it",
    )
    dropout: Dropout = _doc(
        "keras",
        "mask_once: Keras' masks computed once under XLA; philox16: 16-bit random numbers, "
        "two per Philox word (another random stream)",
    )
    einsum: Einsum = _doc(
        "keras", "flat: EinsumDense projections as one 2-D GEMM (one kernel-gradient GEMM)"
    )
    rnn_algorithm: RnnAlgorithm = _doc(
        "default",
        "cuDNN's algorithm for Keras' LSTM and GRU layers on the GPU: TensorFlow's default "
        "(standard), or a persistent one, which keeps the recurrent weights on chip "
        "(tfaccel.optimize.rnn_algorithm)",
    )
    attention: Attention = _doc(
        "keras",
        "cudnn: MultiHeadAttention through cuDNN's flash attention under XLA "
        "(compute capability 8.0+)",
    )
    float8: bool = _doc(
        False, "FP8 matrix products (Keras' quantize at report.compile): compute capability 8.9+"
    )
    deterministic_data: bool = _doc(True, "tf.data keeps its element order (False: faster)")
    strategy: Strategy = _doc(
        "auto", "distribution strategy; auto: mirrored over several GPUs, none on one"
    )

    @property
    def effective_xla_options(self) -> tuple[str, ...]:
        """`xla_options` and the options the other knobs imply (IMPLIED_XLA_OPTIONS):
        what configure writes into XLA_FLAGS."""
        implied = [
            option
            for knob, opts in IMPLIED_XLA_OPTIONS.items()
            if getattr(self, knob)
            for option in opts
        ]
        return tuple(sorted({*self.xla_options, *implied}))

    def __post_init__(self) -> None:
        for knob in KNOBS:
            if knob.choices is not None:
                _choice(knob.name, getattr(self, knob.name), knob.choices)
        options = self.xla_options
        if isinstance(options, str) or not isinstance(options, (list, tuple)):
            raise InputError(
                "xla_options must be a list of option names",
                expected=f"a list among {{{', '.join(XLA_OPTIONS)}}}",
                received=f"xla_options={options!r}",
            )
        for name in options:
            _choice("xla_options entry", name, tuple(XLA_OPTIONS))
        # JSON gives a list; a tuple keeps Settings hashable. Sorted and unique: the
        # same options are the same settings (tune's journal key).
        object.__setattr__(self, "xla_options", tuple(sorted(set(options))))
        for name in (
            "float8",
            "gradient_checkpointing",
            "cache_dataset",
            "deterministic_data",
            "device_arrays",
        ):
            if not isinstance(getattr(self, name), bool):  # "false" would read as true
                raise InputError(
                    f"{name} must be true or false",
                    expected="a boolean",
                    received=f"{name}={getattr(self, name)!r}",
                )
        for name in ("steps_per_execution", "gradient_accumulation_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(
                    f"{name} must be a positive integer",
                    expected="an integer >= 1",
                    received=f"{name}={value!r}",
                )
        for name in ("batch_size", "memory_limit_mib", "validation_batch_size"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise InputError(
                    f"{name} must be a positive integer",
                    expected="an integer >= 1, or null",
                    received=f"{name}={value!r}",
                )
        if self.batch_size is not None and self.batch_size > MAX_BATCH:
            raise InputError(
                f"batch_size {self.batch_size:,} is larger than any training batch",
                expected=f"at most {MAX_BATCH:,} examples a step (tune never goes past the data)",
                received=f"batch_size={self.batch_size!r}",
            )
        if self.memory == "limit" and (self.memory_limit_mib is None or self.memory_limit_mib <= 0):
            raise InputError(
                "memory='limit' needs a positive memory_limit_mib",
                expected="memory_limit_mib=<MiB per GPU>",
                received=f"memory_limit_mib={self.memory_limit_mib!r}",
            )
        over = self.unified_oversubscription
        if isinstance(over, bool) or not isinstance(over, (int, float)) or not 1.0 <= over <= 8.0:
            raise InputError(
                "unified_oversubscription must be a number from 1 to 8",
                expected="1 <= unified_oversubscription <= 8 (x the GPU's memory)",
                received=f"unified_oversubscription={over!r}",
            )
        if self.memory == "unified" and not 1.0 < self.unified_oversubscription <= 8.0:
            raise InputError(
                "memory='unified' needs an oversubscription factor",
                expected="1 < unified_oversubscription <= 8 (x the GPU's memory)",
                received=f"unified_oversubscription={self.unified_oversubscription}",
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


def input_cast_dtype(input_cast: str, precision: str | None) -> str | None:
    """The dtype float inputs cross to the GPU in: the 16-bit compute dtype of a
    mixed precision with `input_cast="compute"`, else None (as they are)."""
    if input_cast != "compute":
        return None
    return {"mixed_bfloat16": "bfloat16", "bfloat16": "bfloat16", "mixed_float16": "float16"}.get(
        precision or ""
    )


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(
            f"Unknown {name}",
            expected=f"one of {{{', '.join(allowed)}}}",
            received=f"{name}={value!r}",
        )


FIELDS = tuple(f.name for f in dataclasses.fields(Settings))


def _check_schema(schema: Any, source: str) -> None:
    """A settings file of this tfaccel's schema, or a ConfigFileError that says what the
    file is instead: another version's settings, tune's report, another report."""
    from tfaccel.results import SCHEMAS

    if schema == SCHEMAS["settings"]:
        return
    name = str(schema).rsplit("/", 1)[0] if isinstance(schema, str) else ""
    if name == SCHEMAS["settings"].rsplit("/", 1)[0]:
        problem = f"{source} was written by another version of tfaccel"
        hint = "tune again with this version to write it anew"
    elif name == SCHEMAS["tune"].rsplit("/", 1)[0]:
        problem = f"{source} is tune's report (its --format json output), not a settings file"
        hint = "the settings file is the one tune writes with --output (tfaccel.json)"
    else:
        problem = f"{source} is not a tfaccel settings file"
        hint = "give the file tfaccel tune wrote (--output, tfaccel.json by default)"
    raise ConfigFileError(
        problem,
        expected=f"schema {SCHEMAS['settings']!r}",
        received=f"schema {schema!r}",
        hint=hint,
    )


def settings_from_dict(data: Any, source: str = "settings") -> Settings:
    """Build Settings from parsed JSON; unknown keys and bad values are ConfigFileErrors."""
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"{source} is not a JSON object",
            expected='{"precision": ...}',
            received=type(data).__name__,
        )
    if "schema" in data:
        _check_schema(data["schema"], source)
    # tune's file (schema, settings, what was measured), or one written by hand with
    # only its "settings" object, or the settings alone
    payload = data.get("settings", data) if "schema" in data or "settings" in data else data
    if not isinstance(payload, dict):
        raise ConfigFileError(
            f"{source}: 'settings' is not an object",
            expected="an object of settings",
            received=type(payload).__name__,
        )
    beside = sorted(set(data) & set(FIELDS)) if payload is not data else []
    if beside:  # a knob written next to the "settings" object would go unread
        raise ConfigFileError(
            f"{source} has settings outside its 'settings' object: {', '.join(beside)}",
            expected="every setting inside 'settings'",
            received=", ".join(beside),
        )
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise ConfigFileError(
            f"{source} has unknown settings: {', '.join(unknown)}",
            expected="keys among " + ", ".join(FIELDS),
            received=", ".join(unknown),
        )
    try:
        return Settings(**payload)
    except InputError as exc:
        raise ConfigFileError(
            f"{source}: {exc.problem}", expected=exc.expected, received=exc.received
        ) from exc
    except TypeError as exc:
        raise ConfigFileError(
            f"{source}: {exc}", expected="settings of the right types", received=str(payload)
        ) from exc


def read_settings_file(path: str | Path) -> Settings:
    """Parse a tfaccel.json (never executed) into Settings."""
    from tfaccel._deps import read_json

    data = read_json(path, "a tfaccel.json written by `tfaccel tune`")
    return settings_from_dict(data, str(path))
