"""The boundary between tfaccel and a trial's process, in one place: the request a
trial is sent, the environment variables and the marker the two sides share, and every
key a trial's payload may hold.

The parent starts a trial with a `TrialRequest` (`tfaccel.trial.child` for a workload or
an entry point reads it from its command line; a user's script, with
`tfaccel.script.hook` inside it, from `SCRIPT_ENV`); the trial prints one line, `MARK`
and its payload as JSON (`tfaccel._child.emit`), and ends. The parent reads the payload
through `Payload`: what becomes a `TrialResult`'s own fields (RESULT_KEYS), and what it
carries in `extra` (EXTRA_KEYS, every other key declared here). A key a child writes
must be declared here, or the parent does not keep it (a test runs real trials and
checks).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, cast

# The settings a script's hook applies, as JSON (`tfaccel tune --`, `tfaccel run --`).
SCRIPT_ENV = "TFACCEL_SCRIPT"
# What `tfaccel profile --` tells the profile hook inside a script.
PROFILE_LOGDIR_ENV = "TFACCEL_PROFILE_LOGDIR"
PROFILE_START_ENV = "TFACCEL_PROFILE_START"
PROFILE_STEPS_ENV = "TFACCEL_PROFILE_STEPS"
PROFILE_STATUS_ENV = "TFACCEL_PROFILE_STATUS"
PROFILE_STOP_ENV = "TFACCEL_PROFILE_STOP"
PROFILE_FIT_ENV = "TFACCEL_PROFILE_FIT"
# What `tfaccel plan --` tells the plan hook inside a script, as JSON: the precision to
# build its model in, an optimizer to plan with instead of its own, which fit call.
PLAN_ENV = "TFACCEL_PLAN"
# The line a trial's payload follows, on its stdout.
MARK = "TFACCEL_TRIAL "
# How a script's trial names the fit it timed (`Payload.measured`): this, then the call
# (`fit_call`: "train.py:42", "train.py:42 (call 2)"), which a batch offer's `raced_fit`
# reads back.
FIT_AT = "model.fit at "
_NTH_CALL = re.compile(r"(.*) \(call (\d+)\)")


def fit_call(where: str, call: int) -> str:
    """A script's fit call as tune names it: where it is called ("train.py:42"), with
    its number among the script's fit calls after the first (tune --fit N)."""
    return where if call <= 1 else f"{where} (call {call})"


def fit_call_parts(named: str) -> tuple[str, int]:
    """`fit_call`'s (where, call) back from its name."""
    match = _NTH_CALL.fullmatch(named)
    return (match.group(1), int(match.group(2))) if match else (named, 1)


# On a script's stdout as its timed fit starts: a process that dies after it died in fit.
FIT_STARTED = "TFACCEL_FIT_STARTED"


Mode = Literal["workload", "tune", "run"]
MODES: tuple[Mode, ...] = ("workload", "tune", "run")
# Keys of a caller's `extra` that the engine of tfaccel's own data-parallel step reads
# (`trial.parallel`); any other key that is no field of the request is refused.
ENGINE_KEYS = (
    "engine",
    "logical_cpus",
    "input",
    "cross_device_ops",
    "num_packs",
    "gradient_accumulation_steps",
)


@dataclass(frozen=True)
class TrialRequest:
    """What a trial's process is told, one type on both sides of the boundary.

    `mode`: "workload" (a built-in or an entry point, in `tfaccel.trial.child`), "tune"
    (a user's script whose fit call number `fit` is timed, under the hook) or "run" (a
    script under `tfaccel run`: the settings applied, nothing timed, `lr` the batch
    offer's learning-rate change where one was asked for, `from_batch` the batch the
    answer was measured at, or the offer's race started from, `raced_fit` where the fit
    it was raced on is called, "train.py:42"). `settings` is
    `Settings.to_dict()`, `steps` a `StepPlan`'s fields. `race`: run a race of that many
    seconds (`trial.race`) instead of timed windows; `count_flops`: the baseline, which
    also counts the model's FLOPs and estimates its gradient noise scale; `engine`: the
    options of tfaccel's own data-parallel step (ENGINE_KEYS); `xla_cache` (run): the
    folder of the programs the tune's trials compiled, to load where the script's are
    the same (`trial.xla_cache`); `as_written` (tune): the script's own compile arguments
    and dtype policy kept, on the settings' other knobs (tune's "as written" reference);
    `graph` (tune): a script that runs its steps eagerly run in graph mode instead
    (tune's graph reference: `run_eagerly=False`); `nondeterministic` (tune): the
    script's `enable_op_determinism()` left out (tune's determinism reference)."""

    mode: Mode
    settings: dict[str, Any]
    steps: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    workload: str | None = None
    fit: int = 1
    lr: dict[str, Any] | None = None
    from_batch: int | None = None
    raced_fit: str | None = None
    race: dict[str, Any] | None = None
    count_flops: bool = False
    engine: dict[str, Any] = field(default_factory=dict)
    xla_cache: str | None = None
    as_written: bool = False
    graph: bool = False
    nondeterministic: bool = False

    @classmethod
    def of(cls, mode: Mode, extra: dict[str, Any] | None = None, **fields: Any) -> TrialRequest:
        """A request from a caller's `extra` (the extras its journal key holds): the
        request's own fields by name, the engine's options apart; any other key is a
        caller's bug, refused here rather than ignored in the child."""
        extra = dict(extra or {})
        engine = {key: extra.pop(key) for key in ENGINE_KEYS if key in extra}
        unknown = set(extra) - {declared.name for declared in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"not a trial request's field: {', '.join(sorted(unknown))}")
        return cls(mode, **fields, **extra, engine=engine)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrialRequest:
        """The request as its process reads it; a malformed one raises ValueError."""
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("mode") not in MODES:
            raise ValueError(f"not a trial request: {text[:200]!r}")
        names = {declared.name for declared in dataclasses.fields(cls)}
        unknown = set(doc) - names
        if unknown:
            raise ValueError(f"not a trial request's field: {', '.join(sorted(unknown))}")
        return cast(TrialRequest, cls(**doc))


class Payload(TypedDict, total=False):
    """Every key a trial's process may write (all optional: a failed trial writes few)."""

    # -- read into TrialResult's own fields (RESULT_KEYS) --
    status: str  # "ok", "error", "oom", "timeout"
    error: str | None
    traceback: str | None
    window_samples_per_s: list[float]  # throughput of each timed window
    compile_s: float  # time to the first step beyond a steady one (tracing, XLA)
    peak_memory_bytes: int | None
    losses: list[float]  # the first steps' losses (the accuracy guard's)
    final_loss: float | None
    device: str | None  # "GPU" or "CPU"
    precision: str  # the precision configure resolved
    # -- kept in TrialResult.extra (EXTRA_KEYS) --
    # tfaccel's own data-parallel step (`trial.step`)
    engine: str
    replicas: int
    global_batch: int
    cross_device_ops: str
    allreduce_ms: float
    update: str
    update_error: str
    input: str
    input_bytes_per_sample: float
    # the timing
    window: int  # steps per timed window, after the plan shortened it
    setup_s: float  # process start to the first step (import, build, data)
    steps: int
    jit_compile: bool
    eager: str | None  # what ran each step as Python: `trial.child.runs_eagerly`
    determinism: str | None  # what turned op determinism on: `trial.child.op_determinism`
    checkpointing: str
    # the model (the baseline counts FLOPs)
    forward_flops_per_sample: float
    gemm_flop_share: float | None
    float_inputs: bool
    attention_dropout_layers: int
    layer_norm_layers: int  # keras.layers.LayerNormalization, subclasses included
    no_xla_layers: dict[str, int]  # by class, layers Keras compiles no model with XLA for
    float8_layers: list[str]
    cudnn_attention_calls: int
    # a script's fit (`script.hook`)
    measured: str  # which fit call was timed, where
    fit_data: str  # "dataset", "arrays", "iterator", "train_on_batch" (`script.loop`)
    # or "train_step" (`script.tape`)
    spe_blocker: str  # why steps_per_execution changes nothing (`script.loop`, `.tape`)
    xla_blocker: str  # why tfaccel's XLA does not reach the step (`script.tape`)
    device_arrays_blocker: str | None  # why its arrays cannot stay in GPU memory
    own_batch: int  # the script's own batch size, where the settings leave it open
    # its validation, timed (`script.validation`): window_samples_per_s then counts it
    train_window_samples_per_s: list[float]  # the windows' training alone
    validation_timing: dict[str, Any]  # the epoch's shape, the evaluation's rate, its share
    validation_untimed: str  # why a fit that validates had its validation left out
    validation_batch_blocker: str | None  # why it cannot be evaluated at another batch
    # what the batch offer needs (`trial.race`, `trial.noise_scale`)
    examples: int | None
    epoch_examples: int  # a fit of steps_per_epoch batches: the examples of its epoch
    fit_epochs: int  # the epochs the script's fit trains (epochs less initial_epoch)
    no_race: str  # why no race can judge this model
    optimizer: str
    learning_rate: float | None
    lr_schedule: str | None
    lr_setters: list[str]  # the script's callbacks that set the rate (they stay in charge)
    race: list[list[float | None]]  # [seconds, validation loss, training loss]
    race_steps: int
    validation: str
    lr_applied: str
    noise_scale: float | None
    noise_scale_batches: list[int]
    noise_scale_why: str  # why it was not estimated


# The payload's keys that become TrialResult's own fields; every other declared key
# goes to its `extra`, as do the layer counts (`<knob>_layers`, LAYER_KNOBS).
RESULT_KEYS = (
    "status",
    "error",
    "traceback",
    "window_samples_per_s",
    "compile_s",
    "peak_memory_bytes",
    "losses",
    "final_loss",
    "device",
    "precision",
)
EXTRA_KEYS = tuple(k for k in Payload.__annotations__ if k not in RESULT_KEYS)


def extra_of(payload: dict[str, Any], layer_knobs: tuple[str, ...]) -> dict[str, Any]:
    """What a TrialResult keeps of a payload beyond its own fields."""
    kept = {key: payload[key] for key in EXTRA_KEYS if key in payload}
    layers = (f"{key}_layers" for key in layer_knobs)
    return kept | {key: payload[key] for key in layers if key in payload}


def undeclared(payload: dict[str, Any], layer_knobs: tuple[str, ...]) -> set[str]:
    """The keys of a payload that this module does not declare (a child's bug)."""
    layers = {f"{knob}_layers" for knob in layer_knobs}
    return set(payload) - set(Payload.__annotations__) - layers


def layers_in_words(layers: dict[str, int]) -> str:
    """A payload's `no_xla_layers` in words: "4 LSTM, 1 StringLookup"."""
    return ", ".join(f"{count} {name}" for name, count in layers.items())


def determinism_withholds_xla(turned: str) -> str:
    """Why Keras compiles no model with XLA where a payload's `determinism` says what
    turned TensorFlow's op determinism on, in words."""
    return (
        f"TensorFlow's op determinism is on ({turned}), and Keras compiles no model with "
        "XLA under it"
    )
