"""The search: which settings train this model soonest on this machine.

Two answers, in this order, each decision needing a gain larger than the noise:

**Same training** (the headline, and all that `tfaccel run` applies unless told
otherwise): the user's batch size, so the same optimizer steps per epoch, and the same
math up to the 16-bit accuracy guard. Its stages, in the order of their expected gain
(a time budget cuts the last ones):
1. the user's baseline (float32, no XLA) and Keras' defaults (jit_compile="auto");
   where the defaults resolve to the baseline's settings (a CPU: no XLA, float32),
   measured once;
2. each precision under XLA, where the hardware supports the precision (no 16-bit
   trials without tensor cores); a 16-bit precision is kept only if its loss stays
   finite and close to the 32-bit trajectory (the accuracy guard);
3. each precision without XLA (models that XLA slows down or cannot compile), unless
   Keras' defaults already prove XLA's own gain;
4. a script's numpy arrays kept in GPU memory (`tfaccel.optimize.device_arrays`: the
   same batches, each gathered there instead of sliced and copied from the host);
5. steps_per_execution and 16-bit input transfers (GPU, 16-bit precision, float
   inputs): one trial where both apply, each alone where that pair did not pay;
6. XLA's GEMM options (models of matrix products), then the late knobs, each as its
   row of `tfaccel.optimize.settings.KNOBS` says (`TuneTry`): the allocator and device
   prefetch, dropout's masks, flat einsums, FP8 products, cuDNN's flash attention;
7. the knobs that each gained too little alone, together;
8. the answer, never below Keras' defaults.

**A batch offer** (`tfaccel.tune.offer`): larger batches on top of the same-training
answer, up to a size that still leaves an epoch many steps; a larger batch changes what
the model learns, so it is offered with the learning-rate rule that goes with it and,
where the model has data to judge it by, a race to the same validation loss.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tfaccel import _compat, stats
from tfaccel.optimize.lr_scaling import LrChange
from tfaccel.optimize.settings import (
    KNOB_NAMED,
    LATE_KNOBS,
    Knob,
    Need,
    Settings,
    TuneTry,
    input_cast_dtype,
)
from tfaccel.stats import noise_threshold
from tfaccel.trial.race import POINTS as RACE_POINTS
from tfaccel.trial.runner import (
    StepPlan,
    TrialResult,
    beats,
    compile_cache_env,
    label_of,
    run_trial,
    settings_key,
    trial_noise,
)
from tfaccel.tune import offer
from tfaccel.tune.guard import loss_close, mean_loss_gap
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import (
    BatchOffer,
    Confirmation,
    Decision,
    Hardware,
    Race,
    TuneOptions,
    TuneResult,
)

TrialFn = Callable[[str, Settings, StepPlan, float], TrialResult]
# A race's run (`trial.race`): a trial function with the race's extras.
RaceFn = Callable[[str, Settings, StepPlan, float, dict[str, Any]], TrialResult]


class _Outcome(NamedTuple):
    """A trial against the best so far: kept (`win`), or its gain and the threshold."""

    r: TrialResult
    win: bool
    gain: float
    thr: float

    @property
    def worse(self) -> bool:
        """Failed, or slower beyond the noise."""
        return not self.r.ok or self.gain < -self.thr


class _NearMiss(NamedTuple):
    """A knob value whose gain was real but under the threshold (stage 8)."""

    knob: str
    value: Any
    guard: bool
    gain: float
    best_key: str  # the best it was measured against
    then: Any  # the knob's value in that best


SKIPPED = "not tried: --skip"
# TF32 over strict float32, both without XLA, on the H200: BERT-base 1.77x, GPT-2 1.64x,
# ResNet-50 1.54x; 16-bit without XLA ran 0.82-0.91x TF32 without XLA on the three (the
# casts cost more than the tensor cores save outside XLA's fusions). Figures: the
# measurements page, tune journals of ResNet-50, BERT and GPT-2.
NO_XLA_TF32_GAIN = 1.8
# How far Keras' defaults must outrun the baseline beyond TF32's share for stage 4 to be
# left out: XLA's own gain is then at least 1.4x.
XLA_PROVEN = 1.4
# steps_per_execution and input_cast share a trial where both apply: neither has run
# slower beyond the noise in any tune measured on the H200 (steps_per_execution
# 0.97-1.29x: MNIST convnet to ResNet-50; input_cast 1.04-1.23x: BERT-base to ResNet-50),
# and a trial of a large model costs minutes of compilation (ResNet-50: two). A pair that
# fails or runs slower beyond the noise is followed by each alone (`_spe_and_cast`).
SPE_WITH_CAST = ("steps_per_execution", "input_cast")
# The stage of a journal's trial of another machine, measured again here.
AGAIN = "again, here"


def search_precisions(hw: Hardware, opt: TuneOptions) -> list[str]:
    """The precisions a search tries: the user's choice, where the hardware has it."""
    if opt.precisions is None:
        return hw.default_precisions
    return [p for p in hw.precisions if p in opt.precisions or p == "float32"]


def estimate_trials(hw: Hardware, opt: TuneOptions) -> int:
    """At most how many trials a search runs (a progress bar's total).

    The float32/no-XLA trial is the baseline and steps_per_execution=1 is already
    measured, so those two are not counted; Keras' defaults are the baseline on a
    machine without a GPU; the batch offer's ladder may stop early, and its race (two
    runs) needs data to judge by.
    """
    # the offer's ladder: at most one trial per doubling (4x steps, a 2x step after a
    # failed one)
    batches = 0
    b = opt.batch_size or 32
    while b * 2 <= opt.max_batch:
        batches += 1
        b *= 2
    precisions = search_precisions(hw, opt)
    # XLA options: cuBLASLt, and cuDNN's layer norms on 9.0+
    gpu_stage = 2 if hw.gpus else 0  # cuBLASLt, and a script's arrays in GPU memory
    if hw.cudnn_layer_norm:
        gpu_stage += 1
    if hw.gpus and any(input_cast_dtype("compute", p) for p in precisions):
        gpu_stage += 1  # 16-bit input transfers
    spe = len([c for c in opt.spe_choices if c != 1])
    n = len(precisions)
    jit = n - (1 if "tf32" in precisions else 0)  # strict float32 under XLA: skipped
    references = 2 if hw.gpus else 1
    race = 2 if batches else 0
    together = 1 if hw.gpus else 0  # the knobs that each fell short, together
    runs = [k.tune for k in LATE_KNOBS if k.tune and _may_run(k.tune, hw)]
    late = sum(len(t.values) for t in runs if not t.together)
    late += len({t.together for t in runs if t.together})  # one trial a group
    confirm = 2 * opt.confirm
    stages = (n - 1) + jit + spe + gpu_stage + late + together
    return references + stages + confirm + batches + race


class Tuner:
    """One search over one target: times trials through `trial_fn` (a fresh process
    each, by default), compares each with the best so far by the one noise rule
    (`tfaccel.stats`), keeps the time budget on one clock (`clock`, from `run()`'s
    start), journals every trial before it is reported, and runs the stages of the
    module's doc in order. `run()` returns the TuneResult with both answers.
    """

    def __init__(
        self,
        workload: str,
        hardware: Hardware,
        options: TuneOptions,
        journal: Journal,
        trial_fn: TrialFn | None = None,
        on_trial: Callable[[str, TrialResult | None, Settings], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        runner: Callable[..., TrialResult] = run_trial,
        race_fn: RaceFn | None = None,
    ) -> None:
        self.workload = workload
        self.clock = clock
        self._start: float | None = None
        self._ran: list[float] = []  # wall seconds of the trials run (not resumed)
        self._skipped = 0
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
            lambda w, s, p, t: runner(
                w, s, p, t, env_overrides=env, extra=count if s == self.base else None
            )
        )
        self.race_fn: RaceFn = race_fn or (
            lambda w, s, p, t, x: runner(w, s, p, t, env_overrides=env, extra=x)
        )
        self.on_trial = on_trial
        self.result = TuneResult(workload, hardware)

    def estimated_trials(self) -> int:
        return estimate_trials(self.hw, self.opt)

    @property
    def precisions(self) -> list[str]:
        return search_precisions(self.hw, self.opt)

    def trial(self, settings: Settings, stage: str) -> TrialResult:
        key = settings_key(self.workload, settings, self.opt.steps)
        done = self.journal.results.get(key)
        if done is not None and done.status == "timeout" and done.wall_s < self.opt.timeout_s:
            done = None  # killed at a shorter --timeout than this tune's: run it again
        if done is not None:
            again = done in self.result.trials
            if not again:
                self.result.trials.append(done)
                self.result.resumed += 1  # what this tune took from the journal
                self.result.from_journal.append(done.key)
            if self.on_trial:
                note = "(measured above)" if again else "(from the journal)"
                self.on_trial(f"{stage} {note}", done, settings)
            return done
        if self._over_budget():
            self._skipped += 1
            return TrialResult(
                key,
                label_of(settings),
                settings.to_dict(),
                "skipped",
                error="time budget reached",
            )
        return self.measure(settings, stage, record=self._record)

    def _record(self, r: TrialResult) -> None:
        """A new trial, journaled (before it is reported) and listed."""
        self.journal.append(self.workload, r)
        self.result.trials.append(r)

    def compare(
        self, new: TrialResult, best: TrialResult
    ) -> tuple[bool, float, float, TrialResult, TrialResult]:
        """`beats(new, best)`, between figures of one machine where the journal has them.

        A tune resumed on another machine (another host, or this one after a reboot:
        two machines of one GPU kind can run a model 4-5 % apart) replays the journal's trials
        as they were, but a trial measured here is compared with a figure of here: the
        reference is measured again first when it has none. Returns (win, gain,
        threshold, new, best) with the figures compared.
        """
        j = self.journal
        if j.machine is not None and new.ok and best is not None and best.ok:
            pair = j.one_machine(new.key, best.key)
            if pair is not None:
                new, best = pair
            elif j.here(new.key):
                best = self._again(best)
        return (*beats(new, best, self.opt.noise_floor), new, best)

    def _model_count(self, key: str) -> int | None:
        """A count of the model's layers that trials report (`dropout_layers`, ...): the
        baseline's, else the first trial's that has it (a journal's baseline may be of a
        version that did not count it yet); None if none does."""
        res = self.result
        for t in (res.baseline, *res.trials):
            if t is not None and t.extra.get(key) is not None:
                return int(t.extra[key])
        return None

    def _guard_reference(self, s: Settings, best: TrialResult, best_s: Settings) -> TrialResult:
        """What the accuracy guard holds a trial of `s` to: the best run, or, where `s`
        runs another steps_per_execution (stage 8), the best's settings at that one
        (from the journal, or measured), so that the losses compared end the same steps."""
        spe = s.steps_per_execution
        if spe == best_s.steps_per_execution:
            return best
        ref = self.trial(best_s.replace(steps_per_execution=spe), "guard reference")
        return ref if ref.ok else best

    def _same_machine_figures(self) -> None:
        """The best's and Keras defaults' figures of one machine (this one first) where the
        journal has both, so that the speedup over the defaults compares one machine.
        A speedup that still compares two machines (over the defaults, or over the
        baseline) is named in `other_machine`."""
        res, j = self.result, self.journal
        best, defaults = res.best, res.keras_defaults
        if j.machine is None or best is None or not best.ok:
            return
        if defaults is not None and (pair := j.one_machine(best.key, defaults.key)):
            best, res.keras_defaults = pair
            res.best = best
        where = j.machine_of_figure(best)
        for name in ("baseline", "keras_defaults"):
            other = getattr(res, name)
            if other is not None and other.ok and j.machine_of_figure(other) != where:
                res.other_machine.append(name)

    def _again(self, old: TrialResult) -> TrialResult:
        """A journal's trial of another machine, measured again here (and journaled, so
        that a later resume here replays the same comparison). Past the time budget it
        is not run: the other machine's figure is used, and said so."""
        if self._over_budget():
            self._skipped += 1
            self.decide(
                "resume",
                f"{old.label} was measured on another machine, and the time budget left no "
                "time to measure it again here: its earlier figure is used",
            )
            return old
        r = self.measure(Settings(**old.settings), AGAIN)
        if not r.ok:
            self.decide(
                "resume",
                f"{old.label}, measured on another machine, ran here with {r.status} "
                f"({r.error}): its earlier figure is used",
            )
            return old
        self.journal.append_again(self.workload, r)
        self.decide(
            "resume",
            f"{old.label} measured again on this machine, to compare with a trial of "
            f"this one: {r.samples_per_s:,.0f}/s (the journal's, of another machine: "
            f"{old.samples_per_s or 0:,.0f}/s)",
        )
        return r

    def measure(
        self,
        settings: Settings,
        stage: str,
        record: Callable[[TrialResult], None] | None = None,
    ) -> TrialResult:
        """A fresh run of `settings`, whatever the journal holds. `record` keeps it
        before it is reported; without it, nothing is journaled (a confirmation compares
        runs of one session and is run again on resume)."""
        if self.on_trial:
            self.on_trial(stage, None, settings)
        t0 = self.clock()
        timeout = self._timeout()
        r = self._settled_trial(settings, timeout)
        self._ran.append(self.clock() - t0)
        if settings.batch_size is None and r.extra.get("own_batch"):
            # "the script's own": the trial says which, and is labelled with it
            s = settings.replace(batch_size=int(r.extra["own_batch"]))
            r = dataclasses.replace(r, settings=s.to_dict(), label=label_of(s))
        if r.status == "timeout" and timeout < self.opt.timeout_s:
            r = dataclasses.replace(r, error=f"{r.error}: stopped at the time budget")
        if record is not None:
            record(r)
        if self.on_trial:
            self.on_trial(stage, r, settings)
        return r

    def _settled_trial(self, settings: Settings, timeout: float) -> TrialResult:
        """A trial; measured once more with twice the warm-up where its windows still
        rose (no decision on a warm-up that had not ended), kept under the plan's key;
        a spread that says the machine was busy is said."""
        r = self.trial_fn(self.workload, settings, self.opt.steps, timeout)
        if r.ok and stats.rising(r.windows):
            longer = dataclasses.replace(self.opt.steps, warmup=2 * self.opt.steps.warmup)
            again = self.trial_fn(self.workload, settings, longer, timeout)
            self.decide(
                "noise",
                f"{r.label}: its windows still rose ({r.samples_per_s:,.0f}/s median): "
                f"measured again with a warm-up of {longer.warmup} steps",
            )
            r = dataclasses.replace(again, key=r.key) if again.ok else r
        if r.ok and trial_noise(r) > stats.BUSY:
            self.decide(
                "noise",
                f"{r.label}: its windows spread {trial_noise(r):.0%}: the machine looks busy "
                "(other work on its GPU or CPU); gains under twice that are not decided",
            )
        return r

    def _timeout(self) -> float:
        """A trial's timeout: --timeout, or what is left of the time budget if less, so
        that a trial running at the budget's end (a batch whose compilation fills the
        GPU) is stopped there; a resumed tune runs it again (`trial`). Not for the
        baseline and Keras' defaults: a budget shorter than they take would leave no
        answer that is at least Keras' defaults."""
        if self.opt.time_budget_s is None or self._start is None:
            return self.opt.timeout_s
        if not self._references_run:
            return self.opt.timeout_s
        left = self.opt.time_budget_s - (self.clock() - self._start)
        return max(1.0, min(self.opt.timeout_s, left))

    def _over_budget(self, longer_s: float = 0.0) -> bool:
        """Would the next trial (`longer_s` longer than the mean so far: a race) likely
        end past the time budget? (Never the baseline or Keras' defaults:
        `_references_run`.)"""
        if self.opt.time_budget_s is None or self._start is None or not self._references_run:
            return False
        expected = (sum(self._ran) / len(self._ran) if self._ran else 0.0) + longer_s
        return self.clock() - self._start + expected > self.opt.time_budget_s

    def decide(self, stage: str, text: str) -> None:
        self.result.decisions.append(Decision(stage, text))

    # -- the search, stage by stage over one state (_State) ---------------------------

    def run(self) -> TuneResult:
        """Measure the references, then each stage in turn (best-first: the likeliest
        large wins come first, so that a time budget cuts the least likely ones), and
        settle the answer: never below Keras' defaults."""
        start = self._start = self.clock()
        res = self.result
        st = self._references()
        if st is not None:
            for stage in self._stages():
                stage(st)
            self._settle(st)
            self._confirm(st)
            self._batch_offer(st)
        self._note_budget()
        res.wall_s = self.clock() - start
        return res

    def _stages(self) -> list[Callable[[_State], None]]:
        """The same-training stages, in order (the module's doc)."""
        return [
            self._xla_precisions,
            self._no_xla_precisions,
            self._device_arrays,
            self._spe_and_cast,
            self._gemm_options,
            self._late_knobs,
            self._together,
        ]

    def _references(self) -> _State | None:
        """The baseline (float32, no XLA: also the accuracy guard's first reference and
        the FLOP count) and Keras' defaults; the state the stages start from, or None
        when neither ran."""
        res = self.result
        res.baseline = self.trial(self.base, "baseline")
        self._check_device(res.baseline)
        if self._ended_before_fit(res.baseline):
            return None
        if self.base.batch_size is None:
            self._own_batch(res.baseline)
        defaults_s = self.base.replace(xla="auto", precision=self._default_precision)
        if self.hw.gpus:
            res.keras_defaults = self.trial(defaults_s, "keras defaults")
        else:
            defaults_s, res.keras_defaults = self.base, res.baseline
            self.decide(
                "keras defaults",
                "the baseline's settings on a machine without a GPU (Keras' "
                "jit_compile='auto' compiles nothing there, and float32 is its precision): "
                "measured once",
            )
        self._references_run = True
        if not res.baseline.ok and not res.keras_defaults.ok:
            self.decide(
                "baseline",
                f"the baseline failed ({res.baseline.status}: "
                f"{res.baseline.error}); nothing to tune",
            )
            return None
        # Start from the baseline; Keras' defaults replace it only beyond the noise.
        best = res.baseline if res.baseline.ok else res.keras_defaults
        st = _State(best, Settings(**best.settings), defaults_s, self._guard_tolerance())
        self._improved(st, best, st.best_s)
        if best is res.baseline:
            win, gain, thr, _, best = self.compare(res.keras_defaults, best)
            if win:
                self.decide(
                    "keras defaults", f"{gain:+.0%} over the baseline (threshold {thr:.0%})"
                )
                self._improved(st, res.keras_defaults, defaults_s)
        self._note_precisions()
        return st

    @property
    def _default_precision(self) -> str:
        """Keras' default float32 runs as TF32 on GPUs that have it."""
        return "tf32" if "tf32" in self.hw.precisions else "float32"

    def _ended_before_fit(self, baseline: TrialResult) -> bool:
        """A script whose baseline ended before its first fit (a bug of its own, data
        it cannot load, no fit at all) ends the same way at any settings: the baseline
        sets nothing before fit that Keras does not (float32, no XLA)."""
        if not baseline.extra.get("before_fit"):
            return False
        self.decide(
            "baseline",
            f"the baseline ended before the script's timed fit ({baseline.error}); "
            "before fit it changes nothing the script does (float32, no XLA), so any "
            "settings end the same way: nothing to tune",
        )
        return True

    def _batch(self, st: _State) -> int:
        """The best so far's batch size."""
        return st.best_s.batch_size or self.opt.batch_size or 32

    def _own_batch(self, baseline: TrialResult) -> None:
        """A script whose source does not say its batch size: the baseline ran at its
        own (its data's batches, or fit's batch_size) and said which; the search goes
        on from there (Keras' defaults at the same, the ladder from it)."""
        read = baseline.settings.get("batch_size")
        own = read or 32
        self.base = self.base.replace(batch_size=own)
        self.opt = dataclasses.replace(
            self.opt, batch_size=own, max_batch=max(self.opt.max_batch, own)
        )
        how = "read in the baseline trial" if read else "Keras' default: the baseline read none"
        self.decide("batch size", f"starting at the script's own batch size, {own} ({how})")

    def _check_device(self, baseline: TrialResult) -> None:
        """The commonest set-up failure: NVML sees the GPU, TensorFlow cannot use it (a
        CPU build, or CUDA libraries it cannot load). Tuning GPU settings on the CPU
        would measure nothing the user wants."""
        if self.hw.gpus and baseline.ok and baseline.device == "CPU":
            from tfaccel.errors import GpuError

            raise GpuError(
                f"NVML sees {self.hw.gpus} GPU(s), but TensorFlow in the trials runs on the CPU",
                expected="a TensorFlow that can use the GPU (a CUDA build with its libraries)",
                received=f"the baseline trial ran on the CPU ({baseline.label})",
                hint="tfaccel doctor says why and how to fix it; to tune for the CPU on "
                "purpose: CUDA_VISIBLE_DEVICES= tfaccel tune ...",
            )

    def _guard_tolerance(self) -> float:
        """The accuracy guard's tolerance: loss_rtol, or how far two 32-bit runs that
        differ only in their kernels (the baseline and Keras' defaults: XLA, TF32)
        already drift apart early on, if larger (at most 3 x loss_rtol): on a model whose
        32-bit runs already differ by more than loss_rtol, a fixed loss_rtol would reject
        16-bit runs for a drift that is not precision's doing."""
        res = self.result
        rtol = self.opt.loss_rtol
        both = res.baseline and res.baseline.ok and res.keras_defaults and res.keras_defaults.ok
        drift = mean_loss_gap(res.keras_defaults, res.baseline) if both else None  # type: ignore[arg-type]
        if drift is not None and drift > rtol:
            rtol = min(drift, 3 * self.opt.loss_rtol)
            self.decide(
                "accuracy guard",
                f"tolerance {rtol:.1%}: the two 32-bit runs (baseline and Keras defaults) "
                f"already differ by that much in mean loss",
            )
        return rtol

    def _note_precisions(self) -> None:
        skipped = [p for p in self.hw.precisions if p not in self.precisions]
        if skipped:
            self.decide("precision x XLA", "not tried: " + ", ".join(skipped))
        lacking = [p for p in self.opt.precisions or () if p not in self.hw.precisions]
        if lacking:
            where = (
                "on the CPU"
                if not self.hw.gpus
                else f"without the tensor cores it needs (compute capability "
                f"{self.hw.compute_capability})"
            )
            self.decide(
                "precision x XLA",
                f"asked for but not tried: {', '.join(lacking)}: slower {where}, not faster",
            )

    def _improved(self, st: _State, r: TrialResult, s: Settings) -> None:
        """`r` (of settings `s`) is the best so far: noted with the time it was found."""
        st.best, st.best_s = r, s
        if st.offer:
            st.rungs.append((r, s))
        if r.ok and r.samples_per_s and not st.offer:
            self.result.best_so_far.append((self.clock() - (self._start or 0.0), r.samples_per_s))

    def _precisions_at(self, st: _State, xla: str, base: Settings) -> None:
        """Each precision under `xla`, on `base`: the 32-bit one first (the guard's
        reference for the 16-bit ones of the same XLA mode: XLA alone changes the early
        trajectory, by as much as 20 % on BERT with random labels)."""
        res = self.result
        for precision in self.precisions:
            if precision == "float32" and "tf32" in self.precisions:
                # TF32 is what the GPU runs by default; strict float32 would only be slower.
                continue
            s = base.replace(precision=precision, xla=xla)
            defaults = res.keras_defaults
            if (
                xla == "jit"
                and s == st.defaults.replace(xla="jit")
                and defaults is not None
                and defaults.ok
                and defaults.extra.get("jit_compile") is True
            ):
                r = defaults  # Keras' defaults already resolved to XLA at this precision
            elif s == self.base and res.baseline is not None:
                r = res.baseline
            else:
                r = self.trial(s, "precision x XLA")
            if precision in ("float32", "tf32"):
                if not r.ok:
                    self.decide("precision x XLA", f"{r.label}: {r.status} ({r.error})")
                    continue
                st.reference.setdefault(xla, r)
            elif r.ok:
                ref = st.reference.get(xla) or res.baseline
                ok, why = loss_close(r, ref, st.rtol) if ref else (True, "")
                if not ok:
                    self.decide("accuracy guard", f"{r.label} rejected: {why}")
                    continue
            if r is st.best or not r.ok:
                continue
            win, gain, thr, r, best = self.compare(r, st.best)
            verdict = "kept" if win else _short(gain, thr)
            self.decide(
                "precision x XLA",
                f"{r.label}: {r.samples_per_s:,.0f}/s, {gain:+.0%} vs {best.label}: {verdict}",
            )
            if win:
                self._improved(st, r, s)

    def _xla_precisions(self, st: _State) -> None:
        """Stage 2: each precision under XLA, 16-bit + XLA first among the trials: the
        largest win on every tensor-core GPU workload measured."""
        self._precisions_at(st, "jit", self.base)

    def _no_xla_precisions(self, st: _State) -> None:
        """Stage 3: each precision without XLA, on the best so far (for models XLA
        slows down or cannot compile): after the batch ladder, as the least likely;
        not run where XLA's own gain is already measured beyond doubt."""
        why = self._xla_proven(st)
        if why:
            self.decide("precision x XLA", f"without XLA: not tried: {why}")
            return
        self._precisions_at(st, "off", st.best_s.replace(xla="off"))

    def _xla_proven(self, st: _State) -> str | None:
        """Why no precision without XLA can win here, or None. Keras' defaults (32-bit,
        XLA) against the baseline (float32, no XLA) is XLA's gain times TF32's; when it
        exceeds what TF32 gives without XLA by XLA_PROVEN, XLA itself speeds this model
        up, and 16-bit without XLA has run slower than TF32 without XLA on every
        workload measured (NO_XLA_TF32_GAIN's note)."""
        res = self.result
        d, b = res.keras_defaults, res.baseline
        if st.best_s.xla == "off" or not (d and d.ok and b and b.ok):
            return None
        if d.extra.get("jit_compile") is not True or not (d.samples_per_s and b.samples_per_s):
            return None
        tf32 = self._default_precision == "tf32"
        ratio = d.samples_per_s / b.samples_per_s
        if ratio < XLA_PROVEN * (NO_XLA_TF32_GAIN if tf32 else 1.0):
            return None
        return (
            f"Keras' defaults (XLA{', TF32' if tf32 else ''}) ran {ratio:.1f}x the baseline "
            "(no XLA)"
            + (
                f", more than TF32 alone gives without XLA (up to {NO_XLA_TF32_GAIN}x)"
                if tf32
                else ""
            )
            + ": XLA speeds this model up, and 16-bit without XLA is slower than 32-bit"
        )

    def _batch_ladder(self, st: _State, largest: int, stage: str = "batch size") -> None:
        """Grow the batch while it fits and gains beyond the noise, 4x at a step where
        `largest` leaves room (one trial where doubling takes two), else 2x. A 4x step
        that fails or runs slower beyond the noise is followed by the 2x step between it
        and the best, the ladder's last; one within the noise ends the ladder, since the
        batch between would gain less."""
        b = self._batch(st)
        while b * 2 <= largest:
            factor = 4 if b * 4 <= largest else 2
            step, _ = self._ladder_step(st, b, b * factor, stage)
            if step == "kept":
                b *= factor
                continue
            if factor == 4 and step == "worse":
                self._ladder_step(st, b, b * 2, stage)
            break

    def _ladder_step(self, st: _State, b: int, to: int, stage: str) -> tuple[str, float]:
        """One trial of the ladder, batch `b` (the best) to `to`: ("kept", "even"
        (within the noise) or "worse" (failed, or slower beyond the noise), the gain)."""
        s = st.best_s.replace(batch_size=to)
        r = self.trial(s, stage)
        if not r.ok:
            why = " (does not fit)" if r.status == "oom" else f" ({r.error})"
            self.decide(stage, f"batch {to}: {r.status}{why}")
            return "worse", 0.0
        win, gain, thr, r, _ = self.compare(r, st.best)
        if win:
            self.decide(stage, f"batch {to}: {gain:+.0%} over batch {b}")
            self._improved(st, r, s)
            return "kept", gain
        even = gain >= -thr
        if to == 2 * b:
            then = "stop"
        else:
            then = f"stop (batch {b * 2} would gain less)" if even else f"batch {b * 2} instead"
        self.decide(stage, f"batch {to}: {gain:+.0%} vs batch {b}, {_short(gain, thr)}: {then}")
        return ("even" if even else "worse"), gain

    def _near_miss(
        self, st: _State, knob: str, value: Any, r: TrialResult, gain: float, guard: bool
    ) -> None:
        """Remember a gain that was real but under the threshold, for stage `together`:
        real means beyond twice the two trials' spread and 0.5 %."""
        floor = self.opt.noise_floor / 6
        bar = noise_threshold(trial_noise(r), trial_noise(st.best), floor=floor)
        if r.ok and gain > bar:
            then = getattr(st.best_s, knob)
            st.near.append(_NearMiss(knob, value, guard, gain, st.best.key, then))

    def _attempt(
        self, st: _State, s: Settings, stage: str, what: Any, guard: bool = False, places: int = 0
    ) -> _Outcome | None:
        """A trial of `s` against the best so far, kept if it wins; None if the accuracy
        guard rejected it. `guard`: `s` changes the arithmetic (a rewrite of XLA's), so
        its losses must stay finite and within the guard's tolerance of the best run's,
        as for a precision."""
        r = self.trial(s, stage)
        if guard and r.ok:
            ok, why = loss_close(r, self._guard_reference(s, st.best, st.best_s), st.rtol)
            if not ok:
                self.decide("accuracy guard", f"{r.label} rejected: {why}")
                return None
        win, gain, thr, r, best = self.compare(r, st.best)
        self.decide(stage, _verdict(what, r, win, gain, thr, best.label, places))
        if win:
            self._improved(st, r, s)
        return _Outcome(r, win, gain, thr)

    def _knob(
        self, st: _State, knob: str, value: Any, guard: bool = False, stage: str = ""
    ) -> _Outcome | None:
        """One knob's trial against the best so far (see `_attempt`); a gain under the
        threshold is remembered for stage `together`. None if the accuracy guard
        rejected it; an outcome that won without a trial where the best already has
        the value or `--skip` leaves the knob alone. `stage`: the name its decisions
        and `--skip` know it by, if not the knob's."""
        stage = stage or knob
        s = st.best_s.replace(**{knob: value})
        if s == st.best_s:
            return _Outcome(st.best, True, 0.0, 0.0)
        if stage in self.opt.skip:
            if not any(d.stage == stage and d.text == SKIPPED for d in self.result.decisions):
                self.decide(stage, SKIPPED)
            return _Outcome(st.best, True, 0.0, 0.0)
        shown = ",".join(value) if isinstance(value, tuple) else value
        shown = "on" if shown is True else shown
        out = self._attempt(st, s, stage, shown, guard)
        if out is not None and not out.win:
            self._near_miss(st, knob, value, out.r, out.gain, guard)
        return out

    def _device_arrays(self, st: _State) -> None:
        """Stage 4: a script's numpy arrays kept in GPU memory, where they fit."""
        base = self.result.baseline
        if not self.hw.gpus or base is None or base.extra.get("fit_data") != "arrays":
            return
        why = base.extra.get("device_arrays_blocker")
        if why:
            self.decide("device_arrays", f"not tried: {why}")
            return
        self._knob(st, "device_arrays", True)

    def _spe_and_cast(self, st: _State) -> None:
        """Stage 5: steps_per_execution, longest first, and 16-bit input transfers; in
        one trial where both apply (SPE_WITH_CAST), each alone where that pair failed or
        ran slower beyond the noise."""
        cast = self._cast_applies(st)
        old = _compat.keras_needs("timing steps_per_execution", *_compat.KERAS_TUNE_SPE)
        longest = max(self.opt.spe_choices)
        pair = set(SPE_WITH_CAST).isdisjoint(self.opt.skip)
        if cast and pair and not old and longest > 1 and self._spe_with_cast(st, longest):
            return
        self._steps_per_execution(st)
        if cast:
            self._knob(st, "input_cast", "compute")

    def _spe_with_cast(self, st: _State, spe: int) -> bool:
        """steps_per_execution `spe` and input_cast in one trial; True where that decided
        both: kept together, or within the noise (neither alone is then tried)."""
        values = dict(zip(SPE_WITH_CAST, (spe, "compute"), strict=True))
        out = self._joint(st, values)
        if out is None or out.worse:
            return False
        if not out.win:
            self.decide(
                " + ".join(values),
                "each alone not tried: together they gained nothing beyond the noise, and "
                "neither has run slower beyond it in any tune measured",
            )
        return True

    def _steps_per_execution(self, st: _State) -> None:
        old = _compat.keras_needs("timing steps_per_execution", *_compat.KERAS_TUNE_SPE)
        if old:
            self.decide("steps_per_execution", f"not tried: {old}")
            return
        # The longest execution first: it saves the most host time per step. A shorter
        # one is tried only where a longer one failed or ran slower beyond the noise; a
        # longer one that gained nothing beyond the noise ends the stage, since a
        # shorter execution saves less of the same host time.
        choices = sorted({c for c in self.opt.spe_choices if c > 1}, reverse=True)
        for i, spe in enumerate(choices):
            out = self._knob(st, "steps_per_execution", spe)
            if out is None or out.win or not out.worse:
                rest = ", ".join(map(str, choices[i + 1 :]))
                if rest and out is not None and not out.win:
                    self.decide(
                        "steps_per_execution",
                        f"{rest}: not tried: {spe} gained nothing beyond the noise, and a "
                        "shorter execution saves less of the same host time",
                    )
                break

    def _resolved_precision(self, st: _State) -> str:
        return st.best.precision or "" if st.best_s.precision == "auto" else st.best_s.precision

    def _cast_applies(self, st: _State) -> bool:
        """16-bit input transfers: on a GPU, under a 16-bit precision, for a model with
        float inputs (its float32 batch copy may be a large part of the step); a model
        of token ids is said to be left out."""
        if not (self.hw.gpus and input_cast_dtype("compute", self._resolved_precision(st))):
            return False
        arrays = self._arrays()
        if arrays:
            self.decide("input_cast", f"not tried: {arrays}")
            return False
        base = self.result.baseline
        if base is not None and base.extra.get("float_inputs") is False:
            self.decide(
                "input_cast",
                "not tried: the model's inputs are all integers (token ids, say), which "
                "input_cast leaves as they are",
            )
            return False
        return True

    def _gemm_options(self, st: _State) -> None:
        """cuBLASLt epilogues, and cuDNN's layer norms (9.0+), under XLA. cuBLASLt runs
        only matrix products, so a model of convolutions skips it."""
        res = self.result
        if not self.hw.gpus or st.best_s.xla == "off":
            return
        if not _gemm_model(res.baseline):
            share = res.baseline.extra["gemm_flop_share"] if res.baseline else 0.0
            self.decide(
                "xla_options",
                f"cublaslt not tried: matrix products are {share:.0%} of the forward "
                "pass's FLOPs (convolutions the rest), and cuBLASLt runs only those",
            )
            return
        self._knob(st, "xla_options", ("cublaslt", *st.best_s.xla_options))
        if self.hw.cudnn_layer_norm:
            opts = (*st.best_s.xla_options, "cudnn_layer_norm")
            self._knob(st, "xla_options", opts, guard=True)

    def _late_knobs(self, st: _State) -> None:
        """Stage 6: each knob of LATE_KNOBS, as its TuneTry says, where its needs hold
        and the model holds its layers; the knobs of one `together` group that apply,
        in one trial."""
        for _, group in itertools.groupby(LATE_KNOBS, key=_late_group):
            ready = [k for k in group if self._late_ready(k, st)]
            if len(ready) > 1:
                self._late_together(st, ready)
            elif ready:
                self._late_one(st, ready[0])

    def _late_ready(self, knob: Knob, st: _State) -> bool:
        """Does a late knob get its trial: its needs hold, the model holds its layers,
        nothing blocks it (each but the first said in a decision), not --skip?"""
        t = knob.tune
        if t is None or not all(self._holds(need, st) for need in t.needs):
            return False
        if t.layers and self._model_count(f"{knob.name}_layers") == 0:
            self.decide(knob.name, f"not tried: the model has no {t.layers}")
            return False
        blocked = self._blocked(knob.name) or next(
            (w for v in t.values if (w := _compat.keras_floor(knob.name, v))), None
        )
        if blocked:
            self.decide(knob.name, f"not tried: {blocked}")
            return False
        if knob.name in self.opt.skip:
            self.decide(knob.name, SKIPPED)
            return False
        too_long = self._step_too_long(t, st)
        if too_long:
            self.decide(knob.name, f"not tried: {too_long}")
            return False
        return True

    def _step_too_long(self, t: TuneTry, st: _State) -> str | None:
        """Why a knob that saves host time per step (`TuneTry.saves_ms`) is left out:
        the best's steps are so long that its most is under the noise floor."""
        if t.saves_ms is None or not st.best.ok or not st.best.samples_per_s:
            return None
        step_ms = 1000.0 * self._batch(st) / st.best.samples_per_s
        if step_ms * self.opt.noise_floor <= t.saves_ms:
            return None
        return (
            f"a step takes {step_ms:.0f} ms, and this knob saves host time per step, at "
            f"most {t.saves_ms:g} ms: under the {self.opt.noise_floor:.0%} noise floor"
        )

    def _late_one(self, st: _State, knob: Knob) -> None:
        """One late knob: each value in turn, until the guard lets one be measured."""
        assert knob.tune is not None
        for value in knob.tune.values:
            if self._knob(st, knob.name, value, guard=knob.tune.guard) is not None:
                break
        if knob.name == "attention":
            self._note_attention_calls(st)

    def _late_together(self, st: _State, knobs: list[Knob]) -> None:
        """The knobs of one `together` group, each at its first value, in one trial."""
        values = {k.name: k.tune.values[0] for k in knobs if k.tune}
        if st.best_s.replace(**values) != st.best_s:
            self._joint(st, values, guard=any(k.tune and k.tune.guard for k in knobs))

    def _joint(self, st: _State, values: dict[str, Any], guard: bool = False) -> _Outcome | None:
        """Knobs' values in one trial against the best so far (see `_attempt`), its
        stage their names joined by " + "; a gain under the threshold is remembered
        for each knob, for stage `together`."""
        shown = ", ".join((KNOB_NAMED[k].shown or "{}").format(v) for k, v in values.items())
        s = st.best_s.replace(**values)
        out = self._attempt(st, s, " + ".join(values), f"{shown}, together", guard)
        if out is not None and not out.win:
            for knob, value in values.items():
                self._near_miss(st, knob, value, out.r, out.gain, guard)
        return out

    def _holds(self, need: Need, st: _State) -> bool:
        """Does a late trial's need (settings.Need) hold on this hardware and best?"""
        if need == "xla":
            return st.best_s.xla != "off"
        if need == "16bit":
            return input_cast_dtype("compute", self._resolved_precision(st)) is not None
        if need == "gemm_model":
            return _gemm_model(self.result.baseline)
        if need == "one_gpu":
            return self.hw.gpus == 1
        hardware = {"gpu": True, "fp8": self.hw.float8, "flash_attention": self.hw.flash_attention}
        return bool(self.hw.gpus) and hardware[need]

    def _arrays(self) -> str | None:
        """Why tf.data settings are left out: a script that gives fit numpy arrays,
        which `tfaccel run` passes to fit as they are."""
        base = self.result.baseline
        if base is None or base.extra.get("fit_data") != "arrays":
            return None
        return (
            "the script gives fit numpy arrays, which tfaccel run passes as they are "
            "(tf.data settings act on a tf.data.Dataset)"
        )

    def _blocked(self, knob: str) -> str | None:
        """Why a knob would gain nothing on this model although it has its layers, or
        could not be applied to its data."""
        if knob == "prefetch":
            return self._arrays()
        layers = self._model_count("attention_layers")
        dropping = self._model_count("attention_dropout_layers")
        if knob == "attention" and layers and dropping == layers:
            return (
                f"each of the model's {layers} attention layers has dropout, whose "
                "training calls stay on Keras' attention (cuDNN's dropout crashes TF 2.21)"
            )
        return None

    def _note_attention_calls(self, st: _State) -> None:
        """cuDNN's flash attention kept or not, say when no call could use it."""
        key = settings_key(self.workload, st.best_s.replace(attention="cudnn"), self.opt.steps)
        tried = [t for t in self.result.trials if t.key == key and t.ok]
        if tried and tried[0].extra.get("cudnn_attention_calls") == 0:
            self.decide(
                "attention",
                "cudnn: no attention call fitted cuDNN's flash attention (16-bit "
                "heads of 8-128 in steps of 8, no causal flag): Keras' own ran",
            )

    def _together(self, st: _State) -> None:
        """The knobs that each gained less than the threshold, together. Two gains of 2 %
        are each within the noise floor, but their sum need not be; the combination is
        held to the same threshold (and to the guard if one of them changes the
        arithmetic). A single one is tried again when a later knob won: its gain was
        measured on another best. A near miss of a knob that a later trial set another
        way (mask_once, then philox16 kept) is left out: that knob is decided."""
        near = [
            n for n in st.near if n.knob == "xla_options" or getattr(st.best_s, n.knob) == n.then
        ]
        if not (len(near) >= 2 or (near and near[0].best_key != st.best.key)):
            return
        s = st.best_s
        for n in sorted(near, key=lambda n: n.gain):  # the larger gain wins
            value = n.value
            if n.knob == "xla_options":
                value = tuple(dict.fromkeys((*s.xla_options, *value)))
            s = s.replace(**{n.knob: value})
        key = settings_key(self.workload, s, self.opt.steps)
        if any(t.key == key for t in self.result.trials):
            return  # measured already (the knobs of a `together` group, on this best)
        parts = ", ".join(
            f"{n.knob}={','.join(n.value) if isinstance(n.value, tuple) else n.value} "
            f"({n.gain:+.1%})"
            for n in near
        )
        if s != st.best_s:
            what = (
                f"{parts}, each under the threshold alone: together"
                if len(near) > 1
                else f"{parts}, under the threshold on an earlier best: on this one"
            )
            self._attempt(st, s, "together", what, any(n.guard for n in near), places=1)

    def _settle(self, st: _State) -> None:
        """The answer: the best, unless it does not beat Keras' defaults beyond the
        noise; then the answer is Keras' defaults, and the decision says so."""
        res = self.result
        defaults = res.keras_defaults
        if defaults is not None and defaults.ok and st.best is not defaults and st.best.ok:
            # figures of one machine where the journal has them; nothing measured again
            pair = self.journal.one_machine(st.best.key, defaults.key)
            best, against = pair if self.journal.machine and pair else (st.best, defaults)
            win, gain, thr = beats(best, against, self.opt.noise_floor)
            if not win:
                self.decide(
                    "answer",
                    f"Keras' defaults: the search's best ({st.best.label}, {gain:+.1%} vs "
                    f"{against.label}) does not beat them beyond the noise (threshold "
                    f"{thr:.0%}), so there is nothing to change",
                )
                st.best, st.best_s = defaults, st.defaults
        res.best, res.best_settings = st.best, st.best_s
        self._same_machine_figures()

    def _confirm(self, st: _State) -> None:
        """Keras' defaults and the best once more, back to back (TuneOptions.confirm)."""
        res = self.result
        if not (
            self.opt.confirm
            and st.best.ok
            and res.keras_defaults is not None
            and res.keras_defaults.ok
            and st.best_s != st.defaults
        ):
            return
        for i in range(self.opt.confirm):
            if self._over_budget():
                self._skipped += 2 * (self.opt.confirm - i)
                break
            pair = (self.measure(st.defaults, "confirm"), self.measure(st.best_s, "confirm"))
            res.confirmations.append(Confirmation(*pair))
        sp = res.confirmed_speedup
        if res.confirmations:
            self.decide(
                "confirm",
                f"{len(res.confirmations)} round(s) of Keras defaults and the best, "
                "back to back: "
                + (f"{sp:.2f}x" if sp is not None else "no round where both finished")
                + f" (the search's runs: {res.speedup(res.keras_defaults) or 0:.2f}x)",
            )

    def _batch_offer(self, st: _State) -> None:
        """Larger batches on top of the same-training answer, as an offer: they change
        what the model learns (`tfaccel.tune.offer`). Never past the data: the ladder
        stops where an epoch would shrink to a handful of steps. Not tried where no race
        could prove one (no validation signal): its trials would spend the budget on an
        offer that cannot be made."""
        res = self.result
        if res.best is None or not res.best.ok or res.best_settings is None:
            return
        no_race = self._no_race()
        if no_race:
            res.batch_note = f"{no_race}: no batch change is offered, so none is tried"
            self.decide("batch offer", f"none: {res.batch_note}")
            return
        own = self._batch(st)
        largest, why = offer.largest_batch(
            own, self.opt.max_batch, self._examples(), self._baseline_fact("noise_scale")
        )
        if largest < 2 * own:
            res.batch_note = why or f"--max-batch {self.opt.max_batch} leaves no larger batch"
            self.decide("batch offer", f"none: {res.batch_note}")
            return
        if why:
            self.decide("batch offer", why)
        ladder = _State(res.best, res.best_settings, st.defaults, st.rtol, offer=True)
        skipped = self._skipped
        self._batch_ladder(ladder, largest, stage="batch offer")
        if not ladder.rungs:
            budget = self._skipped > skipped
            res.batch_note = (
                "not tried: the time budget was reached"
                if budget
                else "no larger batch ran faster beyond the noise"
            )
            return
        res.batch_offer = self._race_rungs(ladder.rungs)

    def _race_rungs(self, rungs: list[tuple[TrialResult, Settings]]) -> BatchOffer:
        """The ladder's faster batches raced from the largest down until one passes (a
        batch past the critical one can lose where a smaller one wins); the
        same-training run is raced once and read from the journal after. The last
        verdict stands: a pass, the smallest's failure, or an unproven race (the budget,
        an error), after which no smaller batch is raced."""
        res = self.result
        assert res.best is not None
        judged: BatchOffer | None = None
        for r, s in reversed(rungs):
            judged = self._raced(offer.make(res.best, r, s, res.baseline))
            self.decide("batch offer", judged.summary)
            if judged.verdict != "failed":
                break
        assert judged is not None
        return judged

    def _no_race(self) -> str | None:
        """Why the offer cannot be raced: the trials said the model has no validation
        signal (synthetic data, a train_step of its own)."""
        base = self.result.baseline
        return base.extra.get("no_race") if base is not None else None

    def _raced(self, found: BatchOffer) -> BatchOffer:
        """The offer judged by a race against the same-training answer, from the
        journal where it holds both runs; unproven where the race is off (race_s 0)
        or the time budget leaves too little for it."""
        res = self.result
        assert res.best_settings is not None
        if not self.opt.race_s:
            return dataclasses.replace(found, why="not raced (race_s is 0)")
        budget = "not raced: the time budget was reached (run the same command again to race it)"
        same = self._race_run(res.best_settings, None)
        if same is None:
            return dataclasses.replace(found, why=budget)
        candidate = self._race_run(found.settings, found.lr)
        if candidate is None:
            return dataclasses.replace(found, why=budget)
        race = offer.race_of(
            self.opt.race_s,
            str(same.extra.get("validation") or candidate.extra.get("validation") or ""),
            [tuple(p) for p in same.extra.get("race") or ()],
            [tuple(p) for p in candidate.extra.get("race") or ()],
            error=next((f"{r.label}: {r.error}" for r in (same, candidate) if not r.ok), None),
        )
        judged = offer.judged(found, race, self.opt.race_s / RACE_POINTS)
        return dataclasses.replace(judged, epochs_to_target=self._epochs(race, candidate))

    def _epochs(self, race: Race, candidate: TrialResult) -> float | None:
        """Epochs of the data the candidate trained before it reached the target."""
        count = self._examples()
        if race.candidate_s is None or not count or not candidate.samples_per_s:
            return None
        return race.candidate_s * candidate.samples_per_s / count

    def _race_run(self, s: Settings, lr: LrChange | None) -> TrialResult | None:
        """One run of a race, from the journal or measured (and journaled); None where
        the time budget leaves too little for it."""
        change = lr.to_dict() if lr is not None and lr.rule != "none" else None
        extra = {"race": {"seconds": self.opt.race_s, "lr": change}}
        key = settings_key(self.workload, s, self.opt.steps, extra)
        done = self.journal.results.get(key)
        if done is not None:
            return done
        if self._over_budget(self.opt.race_s):
            self._skipped += 1
            return None
        if self.on_trial:
            self.on_trial("race", None, s)
        timeout = max(self.opt.timeout_s, 3 * self.opt.race_s)
        r = self.race_fn(self.workload, s, self.opt.steps, timeout, extra)
        r = dataclasses.replace(r, key=key)
        self.journal.append(self.workload, r)
        if self.on_trial:
            self.on_trial("race", r, s)
        return r

    def _examples(self) -> int | None:
        """How many examples the model trains on, where a trial could count them."""
        n = self._baseline_fact("examples")
        return int(n) if n else None

    def _baseline_fact(self, key: str) -> Any:
        """What the baseline trial reported under `key` (None where it did not)."""
        base = self.result.baseline
        return base.extra.get(key) if base is not None else None

    def _note_budget(self) -> None:
        if self._skipped:
            seconds = self.opt.time_budget_s or 0
            budget = (
                f"{seconds:.0f}-second"
                if seconds < 60
                else f"{seconds / 60:.1f}".rstrip("0").rstrip(".") + "-minute"
            )
            self.decide(
                "time budget",
                f"{self._skipped} trial(s) not run: the {budget} budget was reached. Run "
                "the same command again to go on from the journal",
            )


@dataclass
class _State:
    """What the stages of one search carry: the best so far and its settings, Keras'
    defaults' settings, the accuracy guard's tolerance and 32-bit references (one per
    XLA mode), the near misses, and where the batch ladder ended."""

    best: TrialResult
    best_s: Settings
    defaults: Settings
    rtol: float
    reference: dict[str, TrialResult] = field(default_factory=dict)
    near: list[_NearMiss] = field(default_factory=list)
    offer: bool = False  # the batch offer's state: its best is no same-training answer
    rungs: list[tuple[TrialResult, Settings]] = field(default_factory=list)  # the offer's


def _late_group(knob: Knob) -> str:
    """A late knob's group: its TuneTry's `together` name, or its own."""
    return (knob.tune.together if knob.tune else None) or knob.name


def _may_run(t: TuneTry, hw: Hardware) -> bool:
    """Can a late trial run on this hardware (its other needs known only later)?"""
    gpus = {"gpu": hw.gpus > 0, "one_gpu": hw.gpus == 1}
    hardware = {**gpus, "fp8": hw.float8, "flash_attention": hw.flash_attention}
    return all(hardware.get(need, True) for need in t.needs)


def _gemm_model(baseline: TrialResult | None) -> bool:
    """Are matrix products (not convolutions) at least half of the forward FLOPs, or
    unknown? The knobs that speed up GEMMs only (cuBLASLt, float8) need it."""
    share = baseline.extra.get("gemm_flop_share") if baseline else None
    return share is None or share >= 0.5


def _short(gain: float, thr: float) -> str:
    """Why a trial was not kept: slower beyond the noise, or within it."""
    return (
        f"slower beyond the noise ({thr:.0%})" if gain < -thr else f"within the noise ({thr:.0%})"
    )


def _verdict(
    value: Any, r: TrialResult, win: bool, gain: float, thr: float, against: str, places: int = 0
) -> str:
    """A trial of one knob's value (or of what `value` names), in a decision's words,
    naming what it was compared with."""
    if not r.ok:
        return f"{value}: {r.status} ({r.error})"
    verdict = "kept" if win else f"(threshold {thr:.0%})"
    return f"{value}: {gain:+.{places}%} {verdict}, against {against}"
