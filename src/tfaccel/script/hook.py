"""Settings applied to an unmodified training script, from inside its own process.

`tfaccel tune -- python train.py` and `tfaccel run -- python train.py` start the script
with tfaccel's `sitecustomize` first on PYTHONPATH, and the settings in the
environment (`ENV`). When the script imports Keras, this module

- refuses another Keras backend with a clear message (a script may select one in its
  first lines; tfaccel's settings are TensorFlow's);
- applies `tfaccel.configure` (before the script builds its model, so the precision
  policy takes effect);
- patches `keras.Model.compile` (XLA, steps_per_execution, gradient accumulation,
  checkpointing, float8) and `keras.Model.fit` (the batch size: numpy inputs get
  `batch_size`, datasets are re-batched, and `steps_per_epoch` scaled to keep an
  epoch's examples; input_cast and prefetch on datasets).

In "tune" mode the first `fit` call (or the one `tune --fit` names; those before it
train one step each) is timed (`trial.child.timed_fit`) on the script's data, repeated
and re-batched at the trial's batch size, without the script's callbacks (they may
write the user's files); the payload goes to the parent, and the process ends: what
the script does after `fit` is not run. In "run" mode the script runs as written, with
the settings, and the hook says on stderr what was applied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import shutil
import sys
import textwrap
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tfaccel import _compat
from tfaccel.script import file_caches, tape, validation
from tfaccel.script.fit_batch import (
    data_form,
    is_array,
    is_dataset,
    offer_for,
    own_batch_note,
    own_batch_of,
    same_examples_per_epoch,
    scaled_first,
)
from tfaccel.script.loop import TimedLoop, say_loop
from tfaccel.script.watch import when_imported
from tfaccel.trial import xla_cache
from tfaccel.trial.protocol import FIT_AT, FIT_STARTED, MARK, TrialRequest, fit_call
from tfaccel.trial.protocol import SCRIPT_ENV as ENV

if TYPE_CHECKING:
    from tfaccel.optimize.report import ConfigureReport

STARTED = time.perf_counter()  # the script's start, near enough: sitecustomize imports this


def install() -> None:
    """Apply the settings in `ENV` when the script imports Keras."""
    request = TrialRequest.from_json(os.environ[ENV])
    if request.mode != "run":  # a trial ends mid-epoch
        file_caches.install()
    when_keras_imported(lambda: _on_keras(request))


def when_keras_imported(fn: Callable[[], None]) -> None:
    """Call `fn` right after the process first imports `keras` (also through tf.keras),
    or now if it did: nothing of Keras is imported before the script chose its
    backend."""
    when_imported("keras", fn)


def say(text: str, who: str = "tfaccel") -> None:
    """A note on the script's stderr: one line into a log or a pipe; on a terminal,
    wrapped at its width with words whole, the lines after the first indented."""
    line = f"{who}: {text}"
    if sys.stderr.isatty():
        line = textwrap.fill(
            line,
            width=shutil.get_terminal_size().columns,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    print(line, file=sys.stderr, flush=True)


def _fail(request: TrialRequest, error: str, tb: str | None = None) -> None:
    """In tune mode: the trial's error to the parent, and the process ends. In run
    mode: said on stderr; the script goes on without tfaccel's settings."""
    if request.mode == "tune":
        from tfaccel._child import emit

        emit(MARK, {"status": "error", "error": error, "traceback": tb})
        _end()
    say(f"{error}; the script runs without tfaccel's settings")


def _end() -> None:
    """End the script's process now (after fit, in tune mode), output flushed."""
    from tfaccel._child import end_process

    end_process()


def _on_keras(request: TrialRequest) -> None:
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        _fail(
            request,
            f"the script runs Keras on its {backend!r} backend (KERAS_BACKEND); tfaccel's "
            "settings are TensorFlow's, so there is nothing to apply or measure",
        )
        return
    try:
        from tfaccel.optimize import Settings, configure

        settings = Settings(**request.settings)
        if request.mode != "run":  # a trial: share compiled programs with the others
            xla_cache.prepare(settings.effective_xla_options)
        elif request.xla_cache:  # run: load those the tune compiled
            why_not = xla_cache.load(request.xla_cache, settings.effective_xla_options)
            if why_not:
                say(f"compiled programs: {why_not}")
        report = configure(settings)
    except Exception as exc:
        _fail(request, f"configure failed: {type(exc).__name__}: {exc}", traceback.format_exc())
        return
    if request.mode == "run":
        for line in report.brief():
            say(line)
    else:  # trials start from the same weights, so the accuracy guard compares losses
        keras.utils.set_random_seed(request.seed)
    if not request.as_written:  # tune's "as written" reference keeps the script's own
        _keep_policy(report.precision)
    if request.graph:
        _keep_graph()
    if request.nondeterministic:
        _keep_nondeterministic()
    _patch(keras, report, request)


POLICY_SETTERS = ("set_global_policy", "set_dtype_policy")


def _keep_policy(precision: str) -> None:
    """The script's own `keras.mixed_precision.set_global_policy` (or
    `keras.config.set_dtype_policy`), called after configure, would train every trial in
    its policy under the trial's label: it is left out, and said. Patched in each Keras
    module that holds it, and at its source for the modules imported later (tf.keras)."""
    from keras.src.dtype_policies import dtype_policy

    original = dtype_policy.set_dtype_policy

    def keep(policy: Any) -> None:
        name = getattr(policy, "name", policy)
        say(f"{_caller()}: the script's dtype policy {name!r} left out: {precision} applies")

    for module in [mod for key, mod in list(sys.modules.items()) if key.split(".")[0] == "keras"]:
        for attr in POLICY_SETTERS:
            if getattr(module, attr, None) is original:
                setattr(module, attr, keep)


# TensorFlow's switches of eager steps (the second, deprecated, calls the first inside
# TensorFlow, past a patch of `tf.config`'s name).
EAGER_SWITCHES = ("run_functions_eagerly", "experimental_run_functions_eagerly")


def _keep_graph() -> None:
    """tune's graph reference (`TrialRequest.graph`): the script's
    `tf.config.run_functions_eagerly(True)` left out, and said (its compile's
    `run_eagerly=True` is replaced in `_patch`). A switch made another way shows in the
    trial's `eager`, which tune then says."""
    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()
    original = tf.config.run_functions_eagerly
    original(False)

    def keep(run_eagerly: bool) -> None:
        if run_eagerly:
            say(f"{_caller()}: the script's run_functions_eagerly(True) left out: graph mode")
        else:
            original(False)

    for name in EAGER_SWITCHES:
        if hasattr(tf.config, name):
            setattr(tf.config, name, keep)


def _keep_nondeterministic() -> None:
    """tune's determinism reference (`TrialRequest.nondeterministic`): the script's
    `tf.config.experimental.enable_op_determinism()` left out, and said. Determinism
    turned on another way (`TF_DETERMINISTIC_OPS`) stays on, and the trial's
    `determinism` says so."""
    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()

    def keep() -> None:
        say(f"{_caller()}: the script's enable_op_determinism() left out")

    tf.config.experimental.enable_op_determinism = keep


def _caller() -> str:
    """file:line of the script's call into Keras (the first frame outside Keras and
    tfaccel)."""
    for frame in inspect.stack()[2:]:
        name = frame.filename
        if "/keras/" not in name and "/tfaccel/" not in name and "<frozen" not in name:
            return f"{os.path.basename(name)}:{frame.lineno}"
    return "?"


def _patch(keras: Any, report: ConfigureReport, request: TrialRequest) -> None:
    compile_ = keras.Model.compile
    fit = keras.Model.fit
    train_on_batch = keras.Model.train_on_batch
    calls = {"fit": 0}
    loop = TimedLoop(report, request, STARTED, _caller) if request.mode == "tune" else None
    step = tape.hook(keras, report, request, STARTED, _caller, say)  # a step of its own

    def compile_with_settings(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(compile_).bind(self, *args, **kwargs).arguments
        bound.pop("self", None)
        bound.update(bound.pop("kwargs", {}))
        report.checkpoint(self)
        report.quantize(self)
        if report.settings.gradient_accumulation_steps > 1:
            bound["optimizer"] = report.optimizer(bound.get("optimizer", "rmsprop"))
        applied = {} if request.as_written else report.compile_kwargs()
        if request.graph:
            applied["run_eagerly"] = False
        _say_replaced(bound, applied)
        return compile_(self, **{**bound, **applied})

    def fit_with_settings(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["fit"] += 1
        where = _caller()
        if request.mode == "tune":
            timed = request.fit  # tune --fit: which call is timed
            if calls["fit"] < timed:
                return one_step_fit(fit, self, args, kwargs)
            where = fit_call(where, timed)
            for timed_loop in (loop, step):
                if timed_loop is not None:
                    timed_loop.stop()
            _measured_fit(fit, self, report, request, where, args, kwargs)
            _end()
        return _run_fit(fit, self, report, where, calls["fit"], args, kwargs, request)

    def train_on_batch_with_settings(self: Any, *args: Any, **kwargs: Any) -> Any:
        if loop is None or calls["fit"] or request.fit > 1:
            if request.mode == "run":
                say_loop(self, _caller, say, report)
            return train_on_batch(self, *args, **kwargs)
        return loop.call(train_on_batch, self, args, kwargs)

    keras.Model.compile = compile_with_settings
    keras.Model.fit = fit_with_settings
    keras.Model.train_on_batch = train_on_batch_with_settings


def _say_replaced(given: dict[str, Any], applied: dict[str, Any]) -> None:
    """The script's own compile arguments that the settings replace, said: a script that
    chose jit_compile or steps_per_execution itself is told what it trains with."""
    changed = [name for name in applied if name in given and given[name] != applied[name]]
    if changed:
        own = ", ".join(f"{name}={given[name]!r}" for name in changed)
        new = ", ".join(f"{name}={applied[name]!r}" for name in changed)
        say(f"{_caller()}: the script's compile({own}) replaced by the settings' {new}")


def one_step_fit(fit: Any, model: Any, args: Any, kwargs: Any) -> Any:
    """A fit before the timed one (tune --fit N; plan's): one step, without the
    script's callbacks (they may write its files) and validation. How far it trains
    changes nothing of the timed fit's speed; its compile has the trial's settings."""
    fit_args = _fit_arguments(fit, model, args, kwargs)
    kw = fit_args.pop("kwargs", {})
    if is_array(fit_args.get("x")) and not fit_args.get("batch_size"):
        fit_args["batch_size"] = 32  # Keras' default: given steps alone, it makes one batch of all
    fit_args.update(
        epochs=1,
        initial_epoch=0,
        steps_per_epoch=1,
        callbacks=None,
        verbose=0,
        validation_data=None,
        validation_split=0.0,
    )
    return fit(model, **fit_args, **kw)


def fit_examples(fit: Any, model: Any, args: Any, kwargs: Any) -> tuple[Any, int, int | None]:
    """A fit call's data as a trial reads it (`_examples`), for plan's hook."""
    return _examples(model, _fit_arguments(fit, model, args, kwargs), peek=True)


def _fit_arguments(fit: Any, model: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    bound = inspect.signature(fit).bind(model, *args, **kwargs)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if name != "self"}


def _examples(model: Any, fit_args: dict[str, Any], peek: bool) -> tuple[Any, int, int | None]:
    """fit's data as a dataset of single examples (workloads.inputs), the batch size
    the script trains at (its data's batches, else fit's `batch_size`: Keras' 32 where
    it gives none), and how many examples there are where the data says. A dataset
    whose batch dimension is not static tells its size only from a first batch read
    (`peek`): only the trial that needs it reads one (each fills a shuffle buffer)."""
    import keras

    from tfaccel.workloads.inputs import count_examples, user_data

    # as fit packs them: a dataset or generator alone, arrays with or without labels
    data = keras.utils.pack_x_y_sample_weight(
        fit_args.get("x"), fit_args.get("y"), fit_args.get("sample_weight")
    )
    found = user_data(data, model, peek=peek)
    count = count_examples(fit_args.get("x") if is_dataset(fit_args.get("x")) else data, found)
    return found.examples, found.batch_size or fit_args.get("batch_size") or 32, count


def _measured_fit(
    fit: Any,
    model: Any,
    report: ConfigureReport,
    request: TrialRequest,
    where: str,
    args: Any,
    kwargs: Any,
) -> None:
    """The script's fit at the trial's settings, timed (`_timing`) or raced
    (`_racing`, `request.race`), on its own data at the trial's batch size (the
    script's own where the settings leave it open: said as `own_batch`); the payload,
    or the failure, to the parent."""
    from tfaccel._child import emit, failure

    print(FIT_STARTED, flush=True)  # a process that dies from here on died in fit
    own = None
    try:
        fit_args = _fit_arguments(fit, model, args, kwargs)
        learn = report.settings.batch_size is None  # the script's own, to be said
        examples, read, count = _examples(model, fit_args, peek=learn)
        own = read if learn else None
        batch = report.settings.batch_size or read
        fit = _weighted(fit, fit_args)
        call = _FitCall(fit, model, report, request, fit_args, examples, batch, count)
        out = _racing(call) if request.race else _timing(call)
    except Exception as exc:
        out = failure(exc)
    out["measured"] = f"{FIT_AT}{where}"
    if own:
        out["own_batch"] = own
    emit(MARK, out)


def _weighted(fit: Any, fit_args: dict[str, Any]) -> Any:
    """`fit` with the script's `class_weight` (without it, a trial or race trains
    another loss; `sample_weight` travels in the examples)."""
    weights = fit_args.get("class_weight")
    return fit if weights is None else lambda m, *a, **k: fit(m, *a, class_weight=weights, **k)


@dataclasses.dataclass(frozen=True)
class _FitCall:
    """The script's fit call as a trial measures it: Keras' own `fit`, the model, the
    trial's report and request, fit's arguments `a`, its data as single examples, the
    batch size trained at, and how many examples there are (None: unknown)."""

    fit: Any
    model: Any
    report: ConfigureReport
    request: TrialRequest
    a: dict[str, Any]
    examples: Any
    batch: int
    count: int | None


def _timing(call: _FitCall) -> dict[str, Any]:
    """A trial's timed fit (`trial.child.timed_fit`) on the script's examples, with
    what the batch offer needs of the data (and, in the baseline, the noise scale)."""
    fit, model, report, request, fit_args = call.fit, call.model, call.report, call.request, call.a
    examples, batch, count = call.examples, call.batch, call.count
    from tfaccel.trial import noise_scale
    from tfaccel.trial.child import Plan, timed_fit
    from tfaccel.trial.race import data_facts, lr_setters
    from tfaccel.workloads.synthetic import rebatched

    plan = Plan.of(request.steps, _timed_spe(model, report, request))
    # the baseline's facts decide the offer: only it evaluates a batch for them
    batches = rebatched(examples, batch) if request.count_flops else None
    facts = data_facts(model, count, has_data=True, batches=batches)
    reading = noise_scale.Reading(model, request.count_flops, facts)
    with contextlib.ExitStack() as stack:
        dataset = _timed_arrays(stack, model, report, fit_args, batch)
        if dataset is None:
            dataset = report.dataset(rebatched(examples, batch), batch=False)
        out = timed_fit(
            lambda *args, **kwargs: fit(model, *args, **kwargs),
            model,
            dataset,
            report,
            plan,
            batch,
            request.count_flops,
            STARTED,
        )
    out["validation_batch_blocker"] = validation.batch_blocker(model, fit_args)
    validation.applied_batch(model, fit_args, report.settings.validation_batch_size)
    out = validation.timed(call, plan, out)
    out["fit_data"] = data_form(fit_args.get("x"))
    if out["fit_data"] == "arrays":
        out["device_arrays_blocker"] = device_arrays_blocker(report, fit_args, setting=False)
    out.update(facts)
    out.update(reading.payload(model, examples, batch))
    setters = lr_setters(fit_args.get("callbacks"))
    if setters:  # they stay in charge of the rate under a batch offer: the offer says so
        out["lr_setters"] = list(setters)
    if fit_args.get("steps_per_epoch"):  # an epoch of so many batches (of a generator)
        out["epoch_examples"] = int(fit_args["steps_per_epoch"]) * batch
    out["fit_epochs"] = int(fit_args.get("epochs") or 1) - int(fit_args.get("initial_epoch") or 0)
    return out


def _timed_spe(model: Any, report: ConfigureReport, request: TrialRequest) -> int:
    """The steps each execution of the timed fit runs: the settings', or, as written,
    the script's own compile's (which Keras 3.6 cannot time: it trains other batches)."""
    if not request.as_written:
        return report.settings.steps_per_execution
    spe = int(getattr(model, "steps_per_execution", 1) or 1)
    if spe > 1:
        why = _compat.keras_needs(f"the script's steps_per_execution={spe}", *_compat.KERAS_SPE)
        if why:
            raise ValueError(why)
    return spe


def _racing(call: _FitCall) -> dict[str, Any]:
    """A race (`trial.race`) of the script's fit on its data and validation data
    (else a held-out part). Of the script's callbacks only those that set the learning
    rate are kept."""
    fit, model, report, request, fit_args = call.fit, call.model, call.report, call.request, call.a
    examples, batch, count = call.examples, call.batch, call.count
    from tfaccel.trial.race import kept_callbacks, race_blocker, race_fit, steps_per_epoch
    from tfaccel.workloads.synthetic import rebatched

    why = race_blocker(model, has_data=True)
    if why:
        raise ValueError(f"no race: {why}")
    split = validation.split(model, fit_args, examples, count)
    train = split.train
    if is_array(fit_args.get("x")) and fit_args.get("shuffle", True):  # as fit shuffles arrays
        train = train.shuffle(10_000, seed=request.seed)
    dataset = report.dataset(rebatched(train, batch), batch=False)
    steps = steps_per_epoch(split, batch)
    kept = kept_callbacks(fit_args.get("callbacks"))

    def run(callbacks: list[Any]) -> Any:
        return fit(
            model,
            dataset,
            epochs=10**6,
            steps_per_epoch=steps,
            verbose=0,
            callbacks=[*kept, *callbacks],
        )

    return race_fit(run, model, split, {**(request.race or {}), "batch": batch})


def _run_fit(
    fit: Any,
    model: Any,
    report: ConfigureReport,
    where: str,
    call: int,
    args: Any,
    kwargs: Any,
    request: TrialRequest,
) -> Any:
    """The script's fit with the settings that apply to its arguments (and an applied
    batch offer's learning-rate change, `request.lr`), said on stderr."""
    fit_args = _fit_arguments(fit, model, args, kwargs)
    size, lr, notes = offer_for(
        fit_args, model, report.settings.batch_size, request, fit_call(where, call)
    )
    x = fit_args.get("x")
    if is_dataset(x):
        try:
            _fit_dataset(fit_args, model, report, size, notes)
        except Exception as exc:
            notes.append(f"the dataset kept as it is ({type(exc).__name__}: {exc})")
    elif size and is_array(x):
        own = own_batch_of(fit_args, model)
        fit_args["batch_size"] = size
        notes.append(f"batch_size={size}")
        same_examples_per_epoch(fit_args, own, size, notes)
    elif is_array(x):
        notes.append(f"batch_size={own_batch_of(fit_args, model)} (the script's own)")
    elif size:
        notes.append(
            f"batch {size} not applied: the script's {type(x).__name__} makes its own "
            f"batches (make them {size} there, or give fit a tf.data.Dataset or arrays)"
        )
    else:
        notes.append(f"the batches the script's {type(x).__name__} makes (the same training)")
    from tfaccel.trial.child import unapplied_notes

    notes += unapplied_notes(model, report)
    said = validation.applied_batch(model, fit_args, report.settings.validation_batch_size)
    notes += [said] if said else []
    if lr:
        notes.append(_scale_learning_rate(model, fit_args, lr, first=scaled_first(model)))
    with contextlib.ExitStack() as stack:
        if is_array(x):
            notes.append(_arrays(stack, model, report, fit_args))
        _say_fit(call, where, "; ".join(notes))
        kw = fit_args.pop("kwargs", {})
        return fit(model, **fit_args, **kw)


_SAID: dict[str, list[Any]] = {}  # a fit's line: its first call, what was said, whether again


def _say_fit(call: int, where: str, text: str) -> None:
    """What run does to a fit call; a line that fits in a loop (keras-io's addition RNN
    fits 29 times) is said at its first call, once more as "as call N", then only where
    it changes."""
    first, said, again = _SAID.setdefault(where, [call, text, False])
    if first != call and said == text:
        if not again:
            say(f"model.fit call {call} at {where}: as call {first} (its like not said again)")
        _SAID[where][2] = True
        return
    _SAID[where] = [call, text, False]
    say(f"model.fit call {call} at {where}: {text}")


def _arrays(
    stack: contextlib.ExitStack, model: Any, report: ConfigureReport, fit_args: dict[str, Any]
) -> str:
    """fit's numpy arrays kept in GPU memory for the fit (`device_arrays`), entered
    on `stack`, or why they are passed as they are; the note to say."""
    why = device_arrays_blocker(report, fit_args)
    if why:
        return f"numpy arrays passed as they are ({why})"
    from tfaccel.optimize.device_arrays import kept_on_device

    return stack.enter_context(
        kept_on_device(model, fit_args, fit_args.get("batch_size") or 32, "/GPU:0")
    )


def _timed_arrays(
    stack: contextlib.ExitStack,
    model: Any,
    report: ConfigureReport,
    fit_args: dict[str, Any],
    batch: int,
) -> Any:
    """The endless dataset of index batches a trial times where device_arrays keeps
    fit's arrays in GPU memory (entered on `stack`), else None."""
    if not is_array(fit_args.get("x")) or device_arrays_blocker(report, fit_args):
        return None
    from tfaccel.optimize.device_arrays import kept_on_device

    args = dict(fit_args)
    stack.enter_context(kept_on_device(model, args, batch, "/GPU:0", repeat=True))
    return args["x"]


def device_arrays_blocker(
    report: ConfigureReport, fit_args: dict[str, Any], setting: bool = True
) -> str | None:
    """Why fit's arguments `a` keep their arrays on the host under `report`'s
    settings (`setting=False`: were device_arrays on), or None."""
    from tfaccel.optimize.device_arrays import blocker
    from tfaccel.optimize.environment import gpu_total_mib

    if setting and not report.settings.device_arrays:
        return "device_arrays is off"
    if report.gpus != 1 or report.strategy_name != "none":
        return "device_arrays needs one GPU and no distribution strategy"
    mib = gpu_total_mib()
    return blocker(fit_args, mib * 2**20 if mib else None)


def _scale_learning_rate(
    model: Any, fit_args: dict[str, Any], lr: dict[str, Any], first: bool
) -> str:
    """The batch offer's learning rate, with its warm-up, on the first fit (a later fit
    trains on from the scaled rate); the script's callbacks that set the rate stay in
    charge, and are named."""
    from tfaccel.optimize.lr_scaling import apply, from_dict
    from tfaccel.trial.race import lr_setters

    if not first:
        return "learning rate as the first fit left it"
    setters = lr_setters(fit_args.get("callbacks"))
    warmup, note = apply(model, dataclasses.replace(from_dict(lr), setters=setters))
    if warmup is not None:
        fit_args["callbacks"] = [*list(fit_args.get("callbacks") or []), warmup]
    return note


def _fit_dataset(
    fit_args: dict[str, Any],
    model: Any,
    report: ConfigureReport,
    size: int | None,
    notes: list[str],
) -> None:
    """fit's dataset at the tuned batch size with the tf.data settings, in `a`."""
    from tfaccel.workloads.inputs import rebatch

    x = fit_args["x"]
    dataset, own = rebatch(x, model, size) if size else (x, None)
    if not size:
        notes.append(own_batch_note(x, model))
    elif own == size:
        notes.append(f"batch {size} (the data's own)")
    else:
        notes.append(f"batch {size} (re-batched" + (f" from {own})" if own else ")"))
    fit_args["x"] = report.dataset(dataset, batch=False)
    if size:
        same_examples_per_epoch(fit_args, own, size, notes)
    notes.append("tf.data settings applied")
    if fit_args.get("steps_per_epoch") is None and int(x.cardinality()) >= 0 > int(
        dataset.cardinality()
    ):
        notes.append(
            "Keras counts the re-batched dataset's steps in its first epoch (it shows "
            "'Unknown', and warns then that the input ran out of data: harmless)"
        )
