"""The tune search's core: `TunerCore` runs a trial (or takes it from the journal),
compares it with the best so far by the one noise rule, keeps the time budget on one
clock and writes the decisions; `State` is what the stages carry from one to the next.
The stages are functions of `tfaccel.tune.stages` over a core and a state, in the order
of `tfaccel.tune.search.STAGES`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tfaccel import stats
from tfaccel.optimize.settings import (
    KNOB_NAMED,
    Settings,
)
from tfaccel.stats import noise_threshold
from tfaccel.trial.protocol import determinism_withholds_xla, layers_in_words
from tfaccel.trial.runner import (
    StepPlan,
    TrialResult,
    TrialTarget,
    compile_cache_env,
    label_of,
    run_trial,
    settings_key,
    trial_noise,
)
from tfaccel.tune import figures
from tfaccel.tune.figures import drift_of
from tfaccel.tune.guard import loss_close
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import (
    Decision,
    Hardware,
    TuneOptions,
    TuneResult,
)

TrialFn = Callable[[str, Settings, StepPlan, float], TrialResult]

# A race's run (`trial.race`): a trial function with the race's extras.
RaceFn = Callable[[str, Settings, StepPlan, float, dict[str, Any]], TrialResult]


class Outcome(NamedTuple):
    """A trial against the best so far: kept (`win`), or its gain and the threshold."""

    r: TrialResult
    win: bool
    gain: float
    thr: float

    @property
    def worse(self) -> bool:
        """Failed, or slower beyond the noise."""
        return not self.r.ok or self.gain < -self.thr


class NearMiss(NamedTuple):
    """A knob value whose gain was real but under the threshold (stage 8)."""

    knob: str
    value: Any
    guard: bool
    gain: float
    best_key: str  # the best it was measured against
    then: Any  # the knob's value in that best


@dataclass
class State:
    """What the stages of one search carry: the best so far and its settings, Keras'
    defaults' settings, the accuracy guard's tolerance and 32-bit references (one per
    XLA mode), the near misses, and where the batch ladder ended."""

    best: TrialResult
    best_s: Settings
    defaults: Settings
    rtol: float
    reference: dict[str, TrialResult] = field(default_factory=dict)
    near: list[NearMiss] = field(default_factory=list)
    offer: bool = False  # the batch offer's state: its best is no same-training answer
    rungs: list[tuple[TrialResult, Settings]] = field(default_factory=list)  # the offer's


SKIPPED = "not tried: --skip"

# Why a trial did not run after Ctrl-C (or SIGTERM, `tfaccel tune`'s) ended the search
# (`stop_here`).
INTERRUPTED = "interrupted (Ctrl-C or SIGTERM): the same command goes on from the journal"
# A trial's error where the time kept for the batch offer (or its race) stopped it:
# KEPT and what the time was kept for, FOR_OFFER for the late same-training stages.
KEPT, FOR_OFFER = "time kept for", "the batch offer"


def search_precisions(hw: Hardware, opt: TuneOptions) -> list[str]:
    """The precisions a search tries: the user's choice, where the hardware has it."""
    if opt.precisions is None:
        return hw.default_precisions
    return [
        precision
        for precision in hw.precisions
        if precision in opt.precisions or precision == "float32"
    ]


def gemm_model(baseline: TrialResult | None) -> bool:
    """Are matrix products (not convolutions) at least half of the forward FLOPs, or
    unknown? The knobs that speed up GEMMs only (cuBLASLt, float8) need it."""
    share = baseline.extra.get("gemm_flop_share") if baseline else None
    return share is None or share >= 0.5


def xla_refused(baseline: TrialResult | None) -> str | None:
    """Why Keras runs this model without XLA whatever its `jit_compile` says (the
    layers the baseline found marked `supports_jit = False`: `trial.child.no_xla_layers`),
    or None; or the script's steps run eagerly (`trial.child.runs_eagerly`), or it
    turns on op determinism (`trial.child.op_determinism`). An XLA
    trial of such a model would time it without XLA under another name. A training
    step of the script's own keeps its own XLA (`script.tape`: `xla_blocker`)."""
    blocker = baseline.extra.get("xla_blocker") if baseline else None
    if blocker:
        return str(blocker)
    eager = baseline.extra.get("eager") if baseline else None
    if eager:
        return (
            f"Keras runs this model without XLA: the script's {eager} runs its steps as "
            "Python, and Keras turns jit_compile off under it"
        )
    layers = baseline.extra.get("no_xla_layers") if baseline else None
    determinism = baseline.extra.get("determinism") if baseline else None
    if not layers and determinism:
        return f"Keras runs this model without XLA: {determinism_withholds_xla(determinism)}"
    if not layers:
        return None
    why = (
        f"Keras runs this model without XLA: it holds layers that Keras compiles no model "
        f"with XLA for ({layers_in_words(layers)}), so jit_compile=True and 'auto' fall "
        "back to False"
    )
    augmenting = [name for name in layers if name.startswith("Random")]
    if augmenting:  # keras.layers' random augmentation: RandomFlip, RandomRotation, ...
        why += (
            f" ({', '.join(augmenting)} augment the data: mapped over a tf.data pipeline "
            "instead, they would leave the model to XLA; tfaccel does not move them, "
            "that is a change to your code)"
        )
    return why


def without_xla_refused(settings: Settings, trial: TrialResult) -> TrialResult:
    """A trial that asked for XLA and that Keras ran without it (its `jit_compile`
    resolved to False: a layer or switch that `xla_refused` does not know yet), as a
    failure: its figure would stand under a label that names what did not run."""
    if settings.xla != "jit" or not trial.ok or trial.extra.get("jit_compile") is not False:
        return trial
    return dataclasses.replace(
        trial,
        status="error",
        error="Keras ran it without XLA (its jit_compile=True resolved to False), so its "
        "figure is not XLA's",
    )


def verdict_of(value: Any, c: figures.Comparison, places: int = 0) -> str:
    """A trial of one knob's value (or of what `value` names), in a decision's words,
    naming what it was compared with."""
    if not c.new.ok:
        return f"{value}: {c.new.status} ({c.new.error})"
    verdict = "kept" if c.win else f"(threshold {c.shown})"
    return f"{value}: {c.gain:+.{places}%} {verdict}, against {c.best.label}"


class TunerCore:
    """What every stage of one search uses: trials timed through `trial_fn` (a fresh
    process each, by default) and journaled before they are reported, compared with the
    best so far by the one noise rule (`tfaccel.stats`), the time budget kept on one
    clock (`clock`, from `run()`'s start), and the decisions in words.
    `tfaccel.tune.search.Tuner` adds the stages' order and `run()`.
    """

    def __init__(
        self,
        workload: str | TrialTarget,
        hardware: Hardware,
        options: TuneOptions,
        journal: Journal,
        trial_fn: TrialFn | None = None,
        on_trial: Callable[[str, TrialResult | None, Settings], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        runner: Callable[..., TrialResult] = run_trial,
        race_fn: RaceFn | None = None,
    ) -> None:
        # what run_trial runs (a workload's name, or a script), and the name keys use
        self.subject = workload
        self.workload = workload if isinstance(workload, str) else workload.name
        self.clock = clock
        self._start: float | None = None
        self._ran: list[float] = []  # wall seconds of the trials run or resumed
        # seconds each race run took besides its --race seconds, run or resumed, by key
        self._race_overheads: dict[str, float] = {}
        self._skipped = 0
        # The end of a time budget kept for the batch offer's ladder and race while the
        # late same-training stages run (`stages.batch_offer.keep_time`), and the trials
        # that did not run to keep it.
        self.reserve_s = 0.0
        self.reserve_for = FOR_OFFER  # what the kept time is for, in a skip's words
        self._kept = 0
        # The baseline and Keras' defaults run whatever the budget: without the defaults
        # measured, no answer could be said to be at least as fast as them.
        self._references_run = False
        self.hw = hardware
        self.opt = options
        self.journal = journal
        env = compile_cache_env(options.xla_cache_dir) if options.xla_cache_dir else None
        self.base = Settings(
            precision="float32", xla="off", batch_size=options.batch_size, steps_per_execution=1
        )
        # The baseline also counts the model's FLOPs: their matrix-product share says
        # whether the GEMM-only knobs (cuBLASLt) are worth a trial.
        count = {"count_flops": True}
        self.trial_fn: TrialFn = trial_fn or (
            lambda _, settings, plan, timeout: runner(
                self.subject,
                settings,
                plan,
                timeout,
                env_overrides=env,
                extra=count if settings == self.base else None,
            )
        )
        self.race_fn: RaceFn = race_fn or (
            lambda _, settings, plan, timeout, x: runner(
                self.subject, settings, plan, timeout, env_overrides=env, extra=x
            )
        )
        self.on_trial = on_trial
        self.result = TuneResult(self.workload, hardware)
        self.merged: dict[str, TrialResult] = {}  # key: its runs as one (`merge_runs`)

    @property
    def precisions(self) -> list[str]:
        return search_precisions(self.hw, self.opt)

    def trial(
        self,
        settings: Settings,
        stage: str,
        extra: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> TrialResult:
        """A trial of `settings` (with the request's `extra`: the "as written"
        reference, whose `label` says what it kept), from the journal or measured,
        unless the budget says not to."""
        key = settings_key(self.workload, settings, self.opt.steps, extra)
        done = self.journal.results.get(key)
        if done is not None and label is not None:
            done = dataclasses.replace(done, label=label)
        if done is not None and done.status == "timeout" and done.wall_s < self.opt.timeout_s:
            done = None  # killed at a shorter --timeout than this tune's: run it again
        if done is not None:
            again = done in self.result.trials
            if not again:
                self.result.trials.append(done)
                self.result.resumed += 1  # what this tune took from the journal
                self.result.from_journal.append(done.key)
                if done.wall_s > 0:
                    self._ran.append(done.wall_s)
            if self.on_trial:
                note = "(measured above)" if again else "(from the journal)"
                self.on_trial(f"{stage} {note}", done, settings)
            return done
        if self._over_budget():
            if self._over_budget(reserve=False):
                self._skipped += 1
                why = INTERRUPTED if self.result.interrupted else "time budget reached"
            else:  # only the time kept for the batch offer (or its race) stops it
                self._kept += 1
                why = f"{KEPT} {self.reserve_for}"
            return not_run(self, settings, why)
        return self.measure(settings, stage, record=self._record, extra=extra, label=label)

    def _record(self, trial: TrialResult) -> None:
        """A new trial, journaled (before it is reported) and listed."""
        self.journal.append(self.workload, trial)
        self.result.trials.append(trial)

    def compare(self, new: TrialResult, best: TrialResult) -> figures.Comparison:
        """`beats(new, best)` by the one noise rule, between figures of one machine
        (`tfaccel.tune.figures.compare`)."""
        return figures.compare(self, new, best)

    def _guard_reference(
        self, settings: Settings, best: TrialResult, best_s: Settings
    ) -> TrialResult:
        """What the accuracy guard holds a trial of `s` to: the best run, or, where `s`
        runs another steps_per_execution (stage 8), the best's settings at that one
        (from the journal, or measured), so that the losses compared end the same steps."""
        spe = settings.steps_per_execution
        if spe == best_s.steps_per_execution:
            return best
        ref = self.trial(best_s.replace(steps_per_execution=spe), "guard reference")
        return ref if ref.ok else best

    def measure(
        self,
        settings: Settings,
        stage: str,
        record: Callable[[TrialResult], None] | None = None,
        extra: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> TrialResult:
        """A fresh run of `settings`, whatever the journal holds, named `label` where
        given. `record` keeps it before it is reported; without it, nothing is journaled
        (a confirmation compares runs of one session and is run again on resume)."""
        if self.on_trial:
            self.on_trial(stage, None, settings)
        started = self.clock()
        timeout = self._timeout()
        try:
            trial = self._settled_trial(settings, timeout, extra, label)
        except KeyboardInterrupt:
            if not stop_here(self):
                raise
            return not_run(self, settings, INTERRUPTED)
        self._ran.append(self.clock() - started)
        trial = without_xla_refused(settings, trial)
        if settings.batch_size is None and trial.extra.get("own_batch"):
            # "the script's own": the trial says which, and is labelled with it (a named
            # reference keeps its name, given in `_settled_trial`)
            own = settings.replace(batch_size=int(trial.extra["own_batch"]))
            named = label or label_of(own)
            trial = dataclasses.replace(trial, settings=own.to_dict(), label=named)
        if trial.status == "timeout" and timeout < self.opt.timeout_s:
            trial = dataclasses.replace(trial, error=f"{trial.error}: stopped at the time budget")
        if record is not None:
            record(trial)
        if self.on_trial:
            self.on_trial(stage, trial, settings)
        return trial

    def _settled_trial(
        self,
        settings: Settings,
        timeout: float,
        extra: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> TrialResult:
        """A trial; measured once more with twice the warm-up where its windows still
        rose (no decision on a warm-up that had not ended), kept under the plan's key
        (with `extra`'s) and named `label` where given; a spread that says the machine
        was busy is said."""

        def run(plan: StepPlan) -> TrialResult:
            if extra is None:
                return self.trial_fn(self.workload, settings, plan, timeout)
            return self.race_fn(self.workload, settings, plan, timeout, extra)

        trial = run(self.opt.steps)
        if extra is not None:
            key = settings_key(self.workload, settings, self.opt.steps, extra)
            trial = dataclasses.replace(trial, key=key)
        if label is not None:  # the noise notes below name it so
            trial = dataclasses.replace(trial, label=label)
        if trial.ok and stats.rising(trial.windows):
            longer = dataclasses.replace(self.opt.steps, warmup=2 * self.opt.steps.warmup)
            again = run(longer)
            self.decide(
                "noise",
                f"{trial.label}: its windows still rose ({trial.samples_per_s:,.0f}/s median): "
                f"measured again with a warm-up of {longer.warmup} steps",
            )
            trial = (
                dataclasses.replace(again, key=trial.key, label=trial.label) if again.ok else trial
            )
        if trial.ok and trial_noise(trial) > stats.BUSY:
            self.decide(
                "noise",
                f"{trial.label}: its windows spread {trial_noise(trial):.0%}: the machine looks "
                "busy (other work on its GPU or CPU); gains under twice that are not decided",
            )
        return trial

    def _timeout(self) -> float:
        """A trial's timeout: --timeout, or what is left of the time budget if less, so
        that a trial running at the budget's end (a batch whose compilation fills the
        GPU) is stopped there; a resumed tune runs it again (`trial`). Not for the
        baseline and Keras' defaults: a budget shorter than they take would leave no
        answer that is at least Keras' defaults."""
        left = budget_left_s(self)
        if left is None or not self._references_run:
            return self.opt.timeout_s
        return max(1.0, min(self.opt.timeout_s, left))

    def _over_budget(self, longer_s: float = 0.0, reserve: bool = True) -> bool:
        """Would the next trial (`longer_s` longer than the mean so far: a race) likely
        end past the time budget, or into the time kept for the batch offer
        (`reserve_s`, unless `reserve` is False)? (Never the baseline or Keras' defaults:
        `_references_run`.)"""
        if self.result.interrupted:
            return True
        if not self._references_run:
            return False
        overrun = overrun_s(self, longer_s, reserve)
        return overrun is not None and overrun > 0

    @property
    def mean_trial_s(self) -> float:
        """The mean wall time of the trials this tune ran or took from the journal (a
        resumed tune's budget reckons with what they took), 0 before any."""
        return sum(self._ran) / len(self._ran) if self._ran else 0.0

    def decide(self, stage: str, text: str) -> None:
        self.result.decisions.append(Decision(stage, text))

    @property
    def _default_precision(self) -> str:
        """Keras' default float32 runs as TF32 on GPUs that have it."""
        return "tf32" if "tf32" in self.hw.precisions else "float32"

    def _batch(self, state: State) -> int:
        """The best so far's batch size."""
        return state.best_s.batch_size or self.opt.batch_size or 32

    def _improved(self, state: State, trial: TrialResult, settings: Settings) -> None:
        """`r` (of settings `s`) is the best so far: noted with the time it was found."""
        state.best, state.best_s = trial, settings
        if state.offer:
            state.rungs.append((trial, settings))
        if trial.ok and trial.samples_per_s and not state.offer:
            self.result.best_so_far.append(
                (self.clock() - (self._start or 0.0), trial.samples_per_s)
            )

    def _near_miss(
        self, state: State, knob: str, value: Any, trial: TrialResult, gain: float, guard: bool
    ) -> None:
        """Remember a gain that was real but under the threshold, for stage `together`:
        real means beyond twice the two trials' spread, the drift between trials and 0.5 %."""
        spreads = (
            trial_noise(trial),
            trial_noise(state.best),
            drift_of(self.result, trial, state.best),
        )
        bar = noise_threshold(*spreads, floor=self.opt.noise_floor / 6)
        if trial.ok and gain > bar:
            then = getattr(state.best_s, knob)
            state.near.append(NearMiss(knob, value, guard, gain, state.best.key, then))

    def _attempt(
        self,
        state: State,
        settings: Settings,
        stage: str,
        what: Any,
        guard: bool = False,
        places: int = 0,
    ) -> Outcome | None:
        """A trial of `s` against the best so far, kept if it wins; None if the accuracy
        guard rejected it. `guard`: `s` changes the arithmetic (a rewrite of XLA's), so
        its losses must stay finite and within the guard's tolerance of the best run's,
        as for a precision."""
        trial = self.trial(settings, stage)
        if guard and trial.ok:
            ok, why = loss_close(
                trial, self._guard_reference(settings, state.best, state.best_s), state.rtol
            )
            if not ok:
                self.decide("accuracy guard", f"{trial.label} rejected: {why}")
                return None
        c = self.compare(trial, state.best)
        self.decide(stage, verdict_of(what, c, places))
        if c.win:
            self._improved(state, c.new, settings)
        return Outcome(c.new, c.win, c.gain, c.thr)

    def _knob(
        self, state: State, knob: str, value: Any, guard: bool = False, stage: str = ""
    ) -> Outcome | None:
        """One knob's trial against the best so far (see `_attempt`); a gain under the
        threshold is remembered for stage `together`. None if the accuracy guard
        rejected it; an outcome that won without a trial where the best already has
        the value or `--skip` leaves the knob alone. `stage`: the name its decisions
        and `--skip` know it by, if not the knob's."""
        stage = stage or knob
        settings = state.best_s.replace(**{knob: value})
        if settings == state.best_s:
            return Outcome(state.best, True, 0.0, 0.0)
        if stage in self.opt.skip:
            if not any(
                decision.stage == stage and decision.text == SKIPPED
                for decision in self.result.decisions
            ):
                self.decide(stage, SKIPPED)
            return Outcome(state.best, True, 0.0, 0.0)
        shown = ",".join(value) if isinstance(value, tuple) else value
        shown = "on" if shown is True else shown
        out = self._attempt(state, settings, stage, shown, guard)
        if out is not None and not out.win:
            self._near_miss(state, knob, value, out.r, out.gain, guard)
        return out

    def _resolved_precision(self, state: State) -> str:
        return (
            state.best.precision or ""
            if state.best_s.precision == "auto"
            else state.best_s.precision
        )

    def _joint(self, state: State, values: dict[str, Any], guard: bool = False) -> Outcome | None:
        """Knobs' values in one trial against the best so far (see `_attempt`), its
        stage their names joined by " + "; a gain under the threshold is remembered
        for each knob, for stage `together`."""
        shown = ", ".join(
            (KNOB_NAMED[key].shown or "{}").format(shown_value)
            for key, shown_value in values.items()
        )
        settings = state.best_s.replace(**values)
        out = self._attempt(state, settings, " + ".join(values), f"{shown}, together", guard)
        if out is not None and not out.win:
            for knob, value in values.items():
                self._near_miss(state, knob, value, out.r, out.gain, guard)
        return out

    def _arrays(self) -> str | None:
        """Why tf.data settings are left out: a script that gives fit numpy arrays,
        which `tfaccel run` passes to fit as they are, or hands its batches to
        train_on_batch itself (`script.loop`)."""
        data = self._baseline_fact("fit_data")
        if data in ("train_on_batch", "train_step"):
            to = "train_on_batch" if data == "train_on_batch" else "its own training step"
            return (
                f"the script hands each batch to {to} itself (tf.data settings act on a "
                "tf.data.Dataset that fit reads)"
            )
        if data != "arrays":
            return None
        return (
            "the script gives fit numpy arrays, which tfaccel run passes as they are "
            "(tf.data settings act on a tf.data.Dataset)"
        )

    def _examples(self) -> int | None:
        """How many examples the model trains on, where a trial could count them."""
        examples = self._baseline_fact("examples")
        return int(examples) if examples else None

    def _baseline_fact(self, key: str) -> Any:
        """What the baseline trial reported under `key` (None where it did not)."""
        base = self.result.baseline
        return base.extra.get(key) if base is not None else None


def model_count(res: TuneResult, key: str) -> int | None:
    """A count of the model's layers that trials report (`dropout_layers`, ...): the
    baseline's, else the first trial's that has it (a journal's baseline may be of a
    version that did not count it yet); None if none does."""
    for trial in (res.baseline, *res.trials):
        if trial is not None and trial.extra.get(key) is not None:
            return int(trial.extra[key])
    return None


def overrun_s(tuner: TunerCore, longer_s: float = 0.0, reserve: bool = True) -> float | None:
    """How many seconds past the time budget (less the time kept, `reserve_s`, unless
    `reserve` is False) the next trial, `longer_s` longer than the mean so far, would
    likely end; negative: that much to spare. None without a budget."""
    left = budget_left_s(tuner)
    if left is None:
        return None
    kept = tuner.reserve_s if reserve else 0.0
    return tuner.mean_trial_s + longer_s - (left - kept)


def budget_left_s(tuner: TunerCore) -> float | None:
    """Seconds of the time budget not yet used; None without a budget (or before the
    tune starts)."""
    if tuner.opt.time_budget_s is None or tuner._start is None:
        return None
    return tuner.opt.time_budget_s - (tuner.clock() - tuner._start)


def not_run(tuner: TunerCore, settings: Settings, why: str) -> TrialResult:
    """A trial the search skipped (the budget, the time kept for the offer, Ctrl-C)."""
    key = settings_key(tuner.workload, settings, tuner.opt.steps)
    return TrialResult(key, label_of(settings), settings.to_dict(), "skipped", error=why)


def stop_here(tuner: TunerCore) -> bool:
    """Ctrl-C during a trial or race: once the references ran, the search ends there,
    each trial after it skipped and the answer settled from those that ended (True: the
    caller returns); before, there is no answer to settle (False: the caller lets the
    interrupt through). A second Ctrl-C stops at once."""
    if not tuner._references_run:
        return False
    tuner.result.interrupted = True
    tuner.decide(
        "interrupted",
        "stopped (Ctrl-C or SIGTERM): no more trials; the answer is settled from those "
        "that ended, and the same command goes on from the journal",
    )
    return True
