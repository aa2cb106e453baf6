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
   inputs): one trial where both apply, each alone where that pair did not pay; then a
   script's validation arrays evaluated at a larger batch, where its validation is a
   share of the epoch (evaluation changes no weight);
6. where a batch offer could be raced under a time budget, the budget's end is kept
   for it (`stages.batch_offer.keep_time`): the late stages below run in what is left;
   then XLA's GEMM options (models of matrix products), then the late knobs, each as its
   row of `tfaccel.optimize.settings.KNOBS` says (`TuneTry`): the allocator and device
   prefetch, dropout's masks, flat einsums, FP8 products, cuDNN's flash attention;
7. the knobs that each gained too little alone, together;
8. the answer, never below Keras' defaults;
9. after the batch offer's races, in what the budget still holds, the late stages
   that the kept time left out, and the answer settled again (`after_offer`).

**A batch offer** (`tfaccel.tune.offer`): larger batches on top of the same-training
answer, up to a size that still leaves an epoch many steps; a larger batch changes what
the model learns, so it is offered with the learning-rate rule that goes with it and,
where the model has data to judge it by, a race to the same validation loss.
"""

from __future__ import annotations

from collections.abc import Callable

from tfaccel.optimize.settings import LATE_KNOBS, input_cast_dtype
from tfaccel.tune.core import FOR_OFFER, KEPT, State, TunerCore, search_precisions
from tfaccel.tune.result import Hardware, TuneOptions, TuneResult, hardware_allows
from tfaccel.tune.stages import answer, batch_offer, late, precision, references, steps

# The same-training stages after the references, in order (the module's doc): each a
# function of the search's core and state. A new stage is one row here and its module.
STAGES: tuple[tuple[str, Callable[[TunerCore, State], None]], ...] = (
    ("precision x XLA", precision.xla_precisions),
    ("precision without XLA", precision.no_xla_precisions),
    ("device_arrays", steps.device_arrays),
    ("steps_per_execution + input_cast", steps.spe_and_cast),
    ("validation_batch_size", steps.validation_batch),
    ("the batch offer's time", batch_offer.keep_time),
    ("xla_options", late.gemm_options),
    ("late knobs", late.late_knobs),
    ("together", late.together),
)
# The stages after the time kept for the batch offer: what `after_offer` runs again.
LATE_STAGES = STAGES[[name for name, _ in STAGES].index("the batch offer's time") + 1 :]


def estimate_trials(hw: Hardware, opt: TuneOptions) -> int:
    """At most how many trials a search runs (a progress bar's total).

    The float32/no-XLA trial is the baseline and steps_per_execution=1 is already
    measured, so those two are not counted; Keras' defaults are the baseline on a
    machine without a GPU; the batch offer's ladder may stop early, and its races (the
    same-training run once, then the faster batches by bisection; counted here as if
    each were raced) need data to judge by.
    """
    # the offer's ladder: at most one trial per doubling (4x steps, a 2x step after a
    # failed one)
    batches = 0
    batch = opt.batch_size or 32
    while batch * 2 <= opt.max_batch:
        batches += 1
        batch *= 2
    precisions = search_precisions(hw, opt)
    # XLA options: cuBLASLt, and cuDNN's layer norms on 9.0+
    gpu_stage = 2 if hw.gpus else 0  # cuBLASLt, and a script's arrays in GPU memory
    if hw.cudnn_layer_norm:
        gpu_stage += 1
    if hw.gpus and any(input_cast_dtype("compute", prec) for prec in precisions):
        gpu_stage += 1  # 16-bit input transfers
    spe = len([choice for choice in opt.spe_choices if choice != 1])
    count = len(precisions)
    jit = count - (1 if "tf32" in precisions else 0)  # strict float32 under XLA: skipped
    references = (2 if hw.gpus else 1) + opt.repeat_baseline  # the baseline's repeat
    race = 1 + batches if batches else 0  # the same-training run, and each batch raced
    together = 1 if hw.gpus else 0  # the knobs that each fell short, together
    validation = 1  # a script's validation at a larger batch (stage 5b), where it validates
    runs = [
        knob.tune
        for knob in LATE_KNOBS
        if knob.tune and not knob.tune.withheld and hardware_allows(hw, knob.tune.needs)
    ]
    late = sum(len(trying.values) for trying in runs if not trying.together)
    late += len({trying.together for trying in runs if trying.together})  # one trial a group
    confirm = 2 * opt.confirm
    stages = (count - 1) + jit + spe + gpu_stage + validation + late + together
    return references + stages + confirm + batches + race


class Tuner(TunerCore):
    """One search over one target: the references, the same-training stages of STAGES
    in order, the answer settled and confirmed, then the batch offer (`TunerCore` times,
    compares and keeps the budget). `run()` returns the TuneResult with both answers."""

    def estimated_trials(self) -> int:
        return estimate_trials(self.hw, self.opt)

    def run(self) -> TuneResult:
        """Measure the references, then each stage in turn (best-first: the likeliest
        large wins come first, so that a time budget cuts the least likely ones), and
        settle the answer: never below Keras' defaults."""
        start = self._start = self.clock()
        res = self.result
        state = references.references(self)
        if state is not None:
            for _, stage in STAGES:
                stage(self, state)
            batch_offer.release_time(self)
            kept = self._kept  # late trials (the ladder may keep more, for its race)
            answer.settle(self, state)
            answer.confirm(self, state)
            batch_offer.batch_offer(self, state)
            self.after_offer(state, kept)
        self._note_budget()
        res.wall_s = self.clock() - start
        return res

    def after_offer(self, state: State, kept: int) -> None:
        """The `kept` late trials that the time kept for the batch offer left out, in
        what the budget holds after the offer's ladder and races (its estimate keeps
        room for more race runs than a passed first race needs), then the answer settled
        again. The offer stays what was raced: `batch_offer.rebase` keeps its settings."""
        res = self.result
        if not kept or res.interrupted or self._over_budget():
            return
        self.decide(
            "time budget",
            f"after the batch offer, the budget still holds trials: the late stages that "
            f"the time kept for it left out ({kept} trial(s)) run now",
        )
        self._kept = 0
        late = f"{KEPT} {FOR_OFFER}"  # not its race's: the ladder's rungs stay skipped
        res.trials = [t for t in res.trials if t.error != late]
        for _, stage in LATE_STAGES:
            stage(self, state)
        answer.settle(self, state)
        batch_offer.rebase(self)

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
