"""The first stage: the user's baseline (float32, no XLA: also the accuracy guard's
first reference) and Keras' defaults, the batch size the search keeps, the device the
trials ran on and the guard's tolerance; the state every later stage starts from."""

from __future__ import annotations

import dataclasses

from tfaccel import stats
from tfaccel.optimize.settings import (
    Settings,
)
from tfaccel.script.command import own_compile_args
from tfaccel.trial.protocol import determinism_withholds_xla
from tfaccel.trial.runner import (
    TrialResult,
    beats,
)
from tfaccel.tune.core import (
    State,
    TunerCore,
)
from tfaccel.tune.figures import cold_first, gain_floor, merge_runs, repeats_here
from tfaccel.tune.guard import mean_loss_gap
from tfaccel.tune.result import TuneResult


def references(tuner: TunerCore) -> State | None:
    """The baseline (float32, no XLA: also the accuracy guard's first reference and
    the FLOP count) and Keras' defaults; the state the stages start from, or None
    when neither ran."""
    res = tuner.result
    first = tuner.base  # the baseline's request (the script's own batch: None)
    res.baseline = tuner.trial(first, "baseline")
    _check_device(tuner, res.baseline)
    if _ended_before_fit(tuner, res.baseline):
        return None
    if tuner.base.batch_size is None:
        _own_batch(tuner, res.baseline)
    _note_validation(tuner, res.baseline)
    defaults_s = tuner.base.replace(xla="auto", precision=tuner._default_precision)
    if tuner.hw.gpus:
        res.keras_defaults = tuner.trial(defaults_s, "keras defaults")
    else:
        defaults_s, res.keras_defaults = tuner.base, res.baseline
        tuner.decide(
            "keras defaults",
            "the baseline's settings on a machine without a GPU (Keras' "
            "jit_compile='auto' compiles nothing there, and float32 is its precision): "
            "measured once",
        )
    tuner._references_run = True
    _repeat_baseline(tuner, first)
    _as_written(tuner, defaults_s)
    _graph_mode(tuner, first)
    _without_determinism(tuner, defaults_s)
    if not res.baseline.ok and not res.keras_defaults.ok:
        tuner.decide("baseline", _failed(res.baseline, res.keras_defaults))
        return None
    state = _start(tuner, defaults_s, res.keras_defaults, res.baseline)
    _note_precisions(tuner)
    return state


def _start(
    tuner: TunerCore, defaults_s: Settings, defaults: TrialResult, baseline: TrialResult
) -> State:
    """The state the search starts from: Keras' defaults, what the script runs unless
    it says otherwise, and the float32 baseline only where it runs faster beyond the
    noise (XLA slowing the model down, say). Within the noise the defaults stay, so that
    no setting the search measured no gain for (TF32 turned off) reaches `run`."""
    first = defaults if defaults.ok else baseline
    first_s = Settings(**first.settings) if first is baseline else defaults_s
    state = State(first, first_s, defaults_s, _guard_tolerance(tuner))
    tuner._improved(state, first, first_s)
    if first is baseline or not baseline.ok:
        return state
    c = tuner.compare(defaults, baseline)
    if c.win:
        tuner.decide("keras defaults", f"{c.gain:+.0%} over the baseline (threshold {c.thr:.0%})")
    elif c.gain < -c.thr:
        tuner.decide(
            "keras defaults",
            f"{c.gain:+.0%} against the baseline, slower beyond the noise ({c.thr:.0%}): "
            "the search starts from the baseline",
        )
        tuner._improved(state, baseline, Settings(**baseline.settings))
    else:
        tuner.decide(
            "keras defaults",
            f"{c.gain:+.0%} against the baseline, within the noise ({c.thr:.0%}): the search "
            "starts from Keras' defaults, as the script runs them",
        )
    return state


def _as_written(tuner: TunerCore, defaults_s: Settings) -> None:
    """A script that chooses its own compile arguments or dtype policy (read from its
    source: `ScriptFacts.own`), measured as written beside the baseline and Keras'
    defaults, which replace them: Keras' defaults' settings with the script's own
    choices kept (`TrialRequest.as_written`). A reference, never an answer: `run`
    applies the tuned settings."""
    own = getattr(tuner.subject, "own", ())
    if not own:
        return
    if _as_the_baseline(tuner, own):
        tuner.decide(
            "as written",
            f"the script's own {', '.join(own)} is the baseline's setting on a machine "
            "without a GPU (no XLA there, float32): measured once, as the baseline",
        )
        return
    label = f"your script as written ({'; '.join(own)})"
    trial = tuner.trial(defaults_s, "as written", extra={"as_written": True}, label=label)
    tuner.result.as_written = trial
    if trial.ok:
        rate = f"{trial.samples_per_s:,.0f}/s"
        tuner.decide("as written", f"the script's own {', '.join(own)} kept: {rate}")


# The script's own compile arguments, as written in its source, that leave a machine
# without a GPU at the baseline's settings (Keras' jit_compile "auto" compiles nothing
# there).
AS_THE_BASELINE = {
    "jit_compile": ("False", "None", "'auto'", '"auto"'),
    "steps_per_execution": ("1",),
}


def _as_the_baseline(tuner: TunerCore, own: tuple[str, ...]) -> bool:
    """Is the script as written the baseline itself: no GPU, and each of its own
    choices (`ScriptFacts.own`: "jit_compile=False, steps_per_execution=1") one that
    resolves to the baseline's setting there? (A dtype policy of its own, or a value
    read from a variable, is not.) Measured again, it would only measure the noise."""
    args = None if tuner.hw.gpus else own_compile_args(own)
    return args is not None and all(value in AS_THE_BASELINE[name] for name, value in args.items())


def _graph_mode(tuner: TunerCore, first: Settings) -> None:
    """A script whose steps run eagerly (the baseline says what makes them:
    `trial.child.runs_eagerly`) runs them as Python, without tf.function, and Keras
    turns XLA off: every trial times that. The baseline is measured once more in graph
    mode (`TrialRequest.graph`), and what it gains is said. A reference, never applied:
    in graph mode a train_step's Python (printing, counters, NumPy) runs once, when
    traced, so removing it is the user's change to make."""
    eager = tuner.result.baseline.extra.get("eager") if tuner.result.baseline else None
    if not eager or getattr(tuner.subject, "own", None) is None:  # a script's own choice
        return
    label = "the baseline in graph mode (run_eagerly=False)"
    res = tuner.result
    res.graph_mode = tuner.trial(first, "graph mode", extra={"graph": True}, label=label)
    tuner.decide("graph mode", graph_note(eager, res))


def graph_note(eager: str, res: TuneResult) -> str:
    """What the graph-mode reference found, in words."""
    said = (
        f"the script's {eager} runs each step as Python, without tf.function, and Keras "
        "turns XLA off: every trial times its steps so (tfaccel run keeps it too)"
    )
    graph, gain = res.graph_mode, res.graph_mode_gain
    if graph is None:
        return said
    if graph.ok and graph.extra.get("eager"):  # switched on in a way not left out
        return f"{said}; its steps stayed eager when asked for graph mode, so it was not measured"
    if gain is not None:
        return (
            f"{said}; in graph mode the baseline ran {gain:.1f}x ({graph.samples_per_s:,.0f}"
            f"/s): remove it where the code allows (a train_step's Python, such as printing, "
            "counters or NumPy, runs once in graph mode, when traced) and tune again"
        )
    if graph.status in ("error", "oom", "timeout"):
        return f"{said}; in graph mode the baseline failed ({graph.error}): it needs them eager"
    return f"{said}; graph mode was not measured ({graph.error or graph.status})"


def _without_determinism(tuner: TunerCore, defaults_s: Settings) -> None:
    """A script under TensorFlow's op determinism (the baseline says what turned it on:
    `trial.child.op_determinism`) runs every trial without XLA, which Keras withholds
    under it, and on cuDNN's deterministic algorithms. Kept: its reproducibility is the
    user's to want. Keras' defaults are measured once more without it
    (`TrialRequest.nondeterministic`), and what it costs is said. A reference, never
    applied."""
    res = tuner.result
    turned = res.baseline.extra.get("determinism") if res.baseline else None
    if not turned or getattr(tuner.subject, "own", None) is None:  # a script's own choice
        return
    label = "Keras' defaults without op determinism"
    extra = {"nondeterministic": True}
    free = res.without_determinism = tuner.trial(
        defaults_s, "determinism", extra=extra, label=label
    )
    threshold = 0.0
    if res.without_determinism_gain is not None and res.keras_defaults is not None:
        defaults = res.keras_defaults
        threshold = beats(free, defaults, gain_floor(tuner.opt, res, free, defaults))[2]
    tuner.decide("determinism", determinism_note(turned, res, threshold))


def determinism_note(turned: str, res: TuneResult, threshold: float = 0.0) -> str:
    """What the determinism reference found, in words; `threshold`: the smallest gain
    that counts between its figure and Keras' defaults' (the one noise rule)."""
    said = (
        f"{determinism_withholds_xla(turned)}; cuDNN takes its deterministic "
        "algorithms; kept in every trial and under tfaccel run"
    )
    free, gain = res.without_determinism, res.without_determinism_gain
    if free is None:
        return said
    if free.ok and free.extra.get("determinism"):
        return f"{said}; it stayed on when left out ({free.extra['determinism']}): not measured"
    if gain is None:
        return f"{said}; without it, not measured ({free.error or free.status})"
    ran = f"{said}; without it Keras' defaults ran {gain:.2f}x ({free.samples_per_s:,.0f}/s)"
    if gain - 1 > threshold:
        return f"{ran}: where you need no bit-for-bit reproducibility, remove it and tune again"
    where = "within" if gain - 1 >= -threshold else "slower beyond"
    return (
        f"{ran}, {where} the noise ({threshold:.0%}): it costs this model nothing measurable here"
    )


def _repeat_baseline(tuner: TunerCore, first: Settings) -> None:
    """The baseline once more, after Keras' defaults, in a process of its own (or its
    repeats from the journal): every trial is a process, and on some machines their
    figures lie further apart than any one trial's windows (a launch-bound LSTM script:
    the measurements page). Twice that drift is the smallest gain that counts
    (`tune.figures.gain_floor`); above `stats.BUSY` the baseline runs a third time, and
    where the later two agree and the first stands apart from both (`cold_first`),
    the first is left out; otherwise the tune says the machine is busy."""
    res = tuner.result
    base = res.baseline
    if not tuner.opt.repeat_baseline or base is None or not base.ok:
        return
    if not tuner.journal.here(base.key):
        return  # a journal's baseline of another machine: its drift is not this one's
    if not _repeated(tuner, first, base.key, 1, "baseline again"):
        return
    runs = [base, *repeats_here(tuner, base.key)]
    if len(runs) == 2 and (stats.spread(_rates(runs)) or 0.0) > stats.BUSY:
        _repeated(tuner, first, base.key, 2, "baseline once more")
        runs = [base, *repeats_here(tuner, base.key)]
    cold = cold_first(_rates(runs))
    counted = runs[1:] if cold else runs
    res.drift_between_trials = drift = stats.spread(_rates(counted)) or 0.0
    merged = merge_runs(tuner, runs, counted=counted)
    tuner.decide("noise", _drift_text(tuner, runs, merged, drift, cold))


def _rates(runs: list[TrialResult]) -> list[float]:
    return [run.samples_per_s or 0.0 for run in runs]


def _repeated(tuner: TunerCore, first: Settings, key: str, want: int, stage: str) -> bool:
    """Whether the journal holds `want` good repeats of the baseline (`key`) on this
    machine, measuring the one missing (within the budget); a failed or skipped one is
    said."""
    if len(repeats_here(tuner, key)) >= want:
        return True
    if tuner._over_budget():
        tuner.decide("noise", f"the {stage}: not measured (the time budget)")
        return False
    again = tuner.measure(first, stage)
    if not again.ok:
        tuner.decide("noise", f"the {stage}: {again.status} ({again.error})")
        return False
    tuner.journal.append_repeat(tuner.workload, again)
    return True


def _drift_text(
    tuner: TunerCore, runs: list[TrialResult], merged: TrialResult, drift: float, cold: bool
) -> str:
    """The noise decision: the baseline's figures, the drift, the smallest gain."""
    rates = _rates(runs)
    figures = ", ".join(f"{rate:,.0f}" for rate in rates)
    floor = gain_floor(tuner.opt, tuner.result)
    again = "again, in a process of its own" if len(runs) == 2 else f"in {len(runs)} processes"
    text = f"the baseline {again}: {figures} samples/s, "
    if cold:
        later = stats.median(rates[1:]) or 1.0
        text += (
            f"the first {1 - rates[0] / later:.0%} below the later runs, which agree "
            f"({drift:.0%} apart): a first process on a cold machine (kernels compiled, "
            "autotuning), left out of the figure"
        )
    else:
        text += f"{drift:.0%} apart"
    text += (
        f" (its figure: the median of their windows, {merged.samples_per_s or 0:,.0f}/s); "
        f"a gain counts beyond {floor:.0%}"
    )
    if drift > stats.BUSY:
        text += (
            " (the machine is busy, or its clocks or the host's placement of the trials "
            "move, or the baseline's own kernels differ from one process to the next: a "
            "gain that only this drift hides is measured again)"
        )
    return text


def _failed(baseline: TrialResult, defaults: TrialResult) -> str:
    """Why there is nothing to tune: the baseline failed (and Keras' defaults, where they
    are another trial), where in the script, and whose error it most likely is."""
    where = baseline.extra.get("measured")  # "model.fit at train.py:14", a script's
    at = f" in the script's {where}" if where else ""
    text = f"the baseline failed{at} ({baseline.status}: {baseline.error})"
    if defaults is not baseline:
        text += f", and Keras' defaults too ({defaults.status})"
    if where and baseline.status == "error":
        text += (
            "; the baseline trains as Keras does (float32, no XLA, the script's own "
            "batch), so an error in its fit is most likely the script's own: run the "
            "script without tfaccel to see"
        )
    return text + "; nothing to tune"


def _ended_before_fit(tuner: TunerCore, baseline: TrialResult) -> bool:
    """A script whose baseline ended before its first fit (a bug of its own, data
    it cannot load, no fit at all) ends the same way at any settings: the baseline
    sets nothing before fit that Keras does not (float32, no XLA)."""
    if not baseline.extra.get("before_fit"):
        return False
    tuner.decide(
        "baseline",
        f"the baseline ended before the script's timed fit ({baseline.error}); "
        "before fit it changes nothing the script does (float32, no XLA), so any "
        "settings end the same way: nothing to tune",
    )
    return True


def _own_batch(tuner: TunerCore, baseline: TrialResult) -> None:
    """A script's batch size: the baseline ran at its own (the batches its timed fit
    gets, or fit's batch_size) and said which; the search goes on from there (Keras'
    defaults at the same, the ladder from it)."""
    read = baseline.settings.get("batch_size")
    own = read or 32
    tuner.base = tuner.base.replace(batch_size=own)
    tuner.opt = dataclasses.replace(
        tuner.opt, batch_size=own, max_batch=max(tuner.opt.max_batch, own)
    )
    how = "read in the baseline trial" if read else "Keras' default: the baseline read none"
    tuner.decide("batch size", f"starting at the script's own batch size, {own} ({how})")


def _note_validation(tuner: TunerCore, baseline: TrialResult) -> None:
    """Say whether the trials' samples per second count the script's validation
    (`script.validation`): a setting that speeds training up may slow it down."""
    timing = baseline.extra.get("validation_timing")
    untimed = baseline.extra.get("validation_untimed")
    if timing:
        every, share = timing["every"], timing.get("share")
        when = "after each epoch" if every == 1 else f"after every {every} epochs"
        tuner.decide(
            "validation",
            f"samples/s count the script's validation too: {timing['validation']:,} "
            f"examples {when}, evaluated at batch {timing['batch']} with each trial's "
            "settings" + (f" ({share:.0%} of the baseline's epoch)" if share else ""),
        )
    elif untimed:
        tuner.decide("validation", f"samples/s count training alone: {untimed}")


def _check_device(tuner: TunerCore, baseline: TrialResult) -> None:
    """The commonest set-up failure: NVML sees the GPU, TensorFlow cannot use it (a
    CPU build, or CUDA libraries it cannot load). Tuning GPU settings on the CPU
    would measure nothing the user wants."""
    if tuner.hw.gpus and baseline.ok and baseline.device == "CPU":
        from tfaccel.errors import GpuError

        raise GpuError(
            f"NVML sees {tuner.hw.gpus} GPU(s), but TensorFlow in the trials runs on the CPU",
            expected="a TensorFlow that can use the GPU (a CUDA build with its libraries)",
            received=f"the baseline trial ran on the CPU ({baseline.label})",
            hint="tfaccel doctor says why and how to fix it; to tune for the CPU on "
            "purpose: CUDA_VISIBLE_DEVICES= tfaccel tune ...",
        )


def _guard_tolerance(tuner: TunerCore) -> float:
    """The accuracy guard's tolerance: loss_rtol, or how far two 32-bit runs that
    differ only in their kernels (the baseline and Keras' defaults: XLA, TF32)
    already drift apart early on, if larger (at most 3 x loss_rtol): on a model whose
    32-bit runs already differ by more than loss_rtol, a fixed loss_rtol would reject
    16-bit runs for a drift that is not precision's doing."""
    res = tuner.result
    rtol = tuner.opt.loss_rtol
    both = res.baseline and res.baseline.ok and res.keras_defaults and res.keras_defaults.ok
    drift = mean_loss_gap(res.keras_defaults, res.baseline) if both else None  # type: ignore[arg-type]
    if drift is not None and drift > rtol:
        rtol = min(drift, 3 * tuner.opt.loss_rtol)
        tuner.decide(
            "accuracy guard",
            f"tolerance {rtol:.1%}: the two 32-bit runs (baseline and Keras defaults) "
            f"already differ by that much in mean loss",
        )
    return rtol


def _note_precisions(tuner: TunerCore) -> None:
    skipped = [precision for precision in tuner.hw.precisions if precision not in tuner.precisions]
    if skipped:
        tuner.decide("precision x XLA", "not tried: " + ", ".join(skipped))
    lacking = [
        precision
        for precision in tuner.opt.precisions or ()
        if precision not in tuner.hw.precisions
    ]
    if lacking:
        where = (
            "on the CPU"
            if not tuner.hw.gpus
            else f"without the tensor cores it needs (compute capability "
            f"{tuner.hw.compute_capability})"
        )
        tuner.decide(
            "precision x XLA",
            f"asked for but not tried: {', '.join(lacking)}: slower {where}, not faster",
        )
