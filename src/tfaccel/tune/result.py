"""What a tune finds: the hardware it prunes with, its options, and its result."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from tfaccel.hardware.capabilities import precisions, supports
from tfaccel.optimize.settings import Settings
from tfaccel.stats import NOISE_FLOOR
from tfaccel.trial.runner import StepPlan, TrialResult


@dataclass(frozen=True)
class Hardware:
    """What the search prunes with."""

    gpus: int
    compute_capability: str | None

    @property
    def cudnn_layer_norm(self) -> bool:
        """cuDNN's fused layer norms, backward pass included: compute capability 9.0+."""
        return bool(self.gpus) and supports(self.compute_capability, "cudnn_layer_norm")

    @property
    def float8(self) -> bool:
        """FP8 tensor cores: compute capability 8.9+."""
        return bool(self.gpus) and supports(self.compute_capability, "fp8")

    @property
    def flash_attention(self) -> bool:
        """cuDNN's flash attention: compute capability 8.0+."""
        return bool(self.gpus) and supports(self.compute_capability, "flash_attention")

    @property
    def precisions(self) -> list[str]:
        """Every precision this hardware runs well (16-bit only on tensor cores)."""
        return precisions(self.compute_capability if self.gpus else None)

    @property
    def default_precisions(self) -> list[str]:
        """What the search tries unless told otherwise.

        Where bfloat16 runs (capability >= 8.0) it is as fast as float16 on the tensor
        cores and needs no loss scaling, so float16 is left out (`--precisions` brings
        it back); this is the rule of `precision="auto"`.
        """
        found = self.precisions
        if "mixed_bfloat16" in found:
            return [precision for precision in found if precision != "mixed_float16"]
        return found


# What each need of a knob's trial (`optimize.settings.Need`) asks of the machine, the
# one table the search prunes with. The needs only a trial can tell (xla, 16bit,
# gemm_model: of the best settings and the model) are `tune.stages.late`'s. A knob with
# a new hardware need adds its row here (and, for a compute capability, its row in
# `hardware/capabilities`'s table).
HARDWARE_NEEDS: dict[str, Callable[[Hardware], bool]] = {
    "gpu": lambda hw: hw.gpus > 0,
    "one_gpu": lambda hw: hw.gpus == 1,
    "fp8": lambda hw: hw.float8,
    "flash_attention": lambda hw: hw.flash_attention,
}


def hardware_allows(hw: Hardware, needs: Iterable[str]) -> bool:
    """Does the machine meet every hardware need among `needs` (others: not here)?"""
    return all(HARDWARE_NEEDS[need](hw) for need in needs if need in HARDWARE_NEEDS)


@dataclass(frozen=True)
class TuneOptions:
    """How a search runs: where the batch size starts and how far the offer may take
    it, each trial's step plan and timeout, the noise floor and accuracy guard's
    tolerance, the precisions and knobs to try or leave, the time budget, the
    confirmation rounds and the race's length."""

    # The batch size the search keeps (the same-training answer's): None, the user's own
    # (`tfaccel.tune.start_batch`: an entry point's data's, a script's read by its
    # baseline trial, else Keras' 32).
    batch_size: int | None = None
    max_batch: int = 4096
    steps: StepPlan = field(default_factory=StepPlan)
    timeout_s: float = 600.0
    noise_floor: float = NOISE_FLOOR  # a gain must beat 3 % and twice the measured spread
    loss_rtol: float = 0.10  # accuracy guard: mean loss within 10 % of float32's
    spe_choices: tuple[int, ...] = (1, 10, 25)
    precisions: tuple[str, ...] | None = None  # None: the hardware's default_precisions
    skip: tuple[str, ...] = ()  # knobs (SKIPPABLE) the search leaves as they are
    xla_cache_dir: str | None = None  # XLA autotuning results shared by the trials
    # No new trial starts when it would likely end past this many seconds of tuning
    # (the mean trial time so far); the best so far is the result, the journal resumes.
    time_budget_s: float | None = None
    # After the search: this many rounds of Keras' defaults and the best settings once
    # more, back to back in fresh processes, so that the speedup compares two runs of the
    # same hour (a resumed journal may hold runs of another day).
    confirm: int = 0
    # The baseline measured once more after Keras' defaults, in a process of its own:
    # how far figures drift between trials sets the smallest gain that counts.
    repeat_baseline: bool = True
    # Seconds of training each run of the batch offer's race gets (0: no race; the
    # offer stays unproven, and `tfaccel run` does not apply it).
    race_s: float = 60.0


@dataclass(frozen=True)
class Decision:
    stage: str
    text: str


@dataclass(frozen=True)
class Confirmation:
    """One round of `TuneOptions.confirm`: Keras' defaults, then the best, just after."""

    keras_defaults: TrialResult
    best: TrialResult

    @property
    def speedup(self) -> float | None:
        defaults, best = self.keras_defaults, self.best
        if not (defaults.ok and best.ok and defaults.samples_per_s and best.samples_per_s):
            return None
        return best.samples_per_s / defaults.samples_per_s


@dataclass
class TuneResult:
    """A tune's trials, decisions and two answers.

    `best` and `best_settings` are the same-training answer: the fastest settings that
    leave what the model learns as it was (the user's batch size, the same math up to
    the accuracy guard); `tfaccel run` applies them. `batch_offer` is a larger batch on
    top of them, with its learning-rate rule and its race, or None with `batch_note`
    saying why there is none.
    """

    workload: str
    hardware: Hardware
    trials: list[TrialResult] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    baseline: TrialResult | None = None
    keras_defaults: TrialResult | None = None
    # A script that chooses its own compile arguments or dtype policy, measured as
    # written (on Keras' defaults' other settings): a reference, never an answer.
    as_written: TrialResult | None = None
    # a script whose steps run eagerly: its baseline in graph mode (a reference)
    graph_mode: TrialResult | None = None
    # a script under op determinism: Keras' defaults without it (a reference)
    without_determinism: TrialResult | None = None
    best: TrialResult | None = None
    best_settings: Settings | None = None
    resumed: int = 0  # trials this tune took from the journal instead of measuring
    from_journal: list[str] = field(default_factory=list)  # their keys
    wall_s: float = 0.0
    confirmations: list[Confirmation] = field(default_factory=list)
    # The spread of the baseline's figures, each run in a process of its own
    # (TuneOptions.repeat_baseline): gains count beyond twice it.
    drift_between_trials: float | None = None
    # The references ("baseline", "keras_defaults") whose speedup compares the best with
    # a figure of another machine: a resumed journal had no machine with both.
    other_machine: list[str] = field(default_factory=list)
    # (seconds into the tune, samples/s) each time the best so far improved
    best_so_far: list[tuple[float, float]] = field(default_factory=list)
    # A larger batch with its learning-rate rule and race; or why there is none.
    batch_offer: BatchOffer | None = None
    batch_note: str | None = None
    # Every offer a race judged, in the order raced (a descent's losers too).
    races: list[BatchOffer] = field(default_factory=list)
    # Ctrl-C ended the search: the answer is settled from the trials that ended.
    interrupted: bool = False

    def time_to(self, speedup: float) -> float | None:
        """Seconds into the tune at which the best so far first reached `speedup` x
        Keras' defaults (None: never, or no defaults measured)."""
        defaults = self.keras_defaults
        if defaults is None or not defaults.ok or not defaults.samples_per_s:
            return None
        target = speedup * defaults.samples_per_s
        return next((seconds for seconds, ratio in self.best_so_far if ratio >= target), None)

    @property
    def confirmed_speedup(self) -> float | None:
        """The median speedup over Keras' defaults of the confirmation rounds (None
        without a round whose two runs both finished)."""
        ratios = sorted(
            x for confirmation in self.confirmations if (x := confirmation.speedup) is not None
        )
        if not ratios:
            return None
        mid = len(ratios) // 2
        return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2

    @property
    def measured(self) -> list[TrialResult]:
        """The trials this tune measured (not those it took from the journal)."""
        return [trial for trial in self.trials if trial.key not in self.from_journal]

    @property
    def compile_s_total(self) -> float:
        """The compile time of the trials measured in this tune."""
        return sum(trial.compile_s or 0.0 for trial in self.measured)

    @property
    def setup_s_total(self) -> float:
        """The measured trials' time to `fit`: TensorFlow's import, the build, the data."""
        return sum(trial.extra.get("setup_s") or 0.0 for trial in self.measured)

    def speedup(self, over: TrialResult | None) -> float | None:
        if self.best is None or over is None or not over.ok or not self.best.samples_per_s:
            return None
        return self.best.samples_per_s / (over.samples_per_s or math.nan)

    @property
    def graph_mode_gain(self) -> float | None:
        """How many times the baseline's samples/s the script's steps ran in graph mode
        (`graph_mode`), where they run eagerly as written and both ran."""
        graph, base = self.graph_mode, self.baseline
        if graph is None or base is None or not (graph.ok and base.ok):
            return None
        if graph.extra.get("eager"):  # the script's switch was not left out
            return None
        return (graph.samples_per_s or 0.0) / (base.samples_per_s or math.nan)

    @property
    def without_determinism_gain(self) -> float | None:
        """How many times Keras' defaults' samples/s they ran without the script's op
        determinism (`without_determinism`), where both ran and it was left out."""
        free, defaults = self.without_determinism, self.keras_defaults
        if free is None or defaults is None or not (free.ok and defaults.ok):
            return None
        if free.extra.get("determinism"):  # turned on in a way not left out
            return None
        return (free.samples_per_s or 0.0) / (defaults.samples_per_s or math.nan)

    @property
    def largest_fitting_batch(self) -> int | None:
        ok = [trial.settings.get("batch_size") or 0 for trial in self.trials if trial.ok]
        return max(ok) if ok else None


@dataclass(frozen=True)
class Race:
    """Two trainings of the user's model from the same initial weights, for the same
    training time: the same-training answer and a batch offer. Each curve holds
    (seconds of training, validation loss) points, evaluation time left out."""

    seconds: float  # each run's training time
    validation: str  # where the validation loss comes from, in words
    same: tuple[tuple[float, float], ...]
    candidate: tuple[tuple[float, float], ...]
    target: float | None  # the best validation loss the same-training run reached
    same_s: float | None  # seconds each run needed to reach `target` (None: never)
    candidate_s: float | None
    error: str | None = None  # why a run did not finish, where one did not
    # Each run's smoothed validation loss at the race's end (NaN: it diverged).
    same_end: float | None = None
    candidate_end: float | None = None
    # The candidate's (seconds, training loss) points, where its run recorded them:
    # they tell a run that diverges (training loss rising too) from one that overfits.
    candidate_train: tuple[tuple[float, float], ...] = ()

    @property
    def to_target_speedup(self) -> float | None:
        """How many times sooner the candidate reached the target (None: it did not)."""
        if not self.same_s or self.candidate_s is None:
            return None
        return self.same_s / max(self.candidate_s, 1e-9)


@dataclass(frozen=True)
class BatchOffer:
    """A batch larger than the user's, on top of the same-training answer: more samples
    per second, but fewer optimizer steps per epoch, so other training. `tfaccel run`
    applies it only when asked to, and only where its race passed."""

    settings: Settings
    trial: TrialResult
    from_batch: int
    samples_speedup: float  # its samples/s over the same-training answer's
    lr: Any  # tfaccel.optimize.lr_scaling.LrChange
    verdict: Literal["passed", "failed", "unproven"] = "unproven"
    why: str = ""  # the verdict in words
    race: Race | None = None
    # Epochs of the training data the candidate needed to reach the race's target
    # (None: unknown, or it did not reach it): a script that trains fewer ends first.
    epochs_to_target: float | None = None
    # The settings besides the batch size where the offer differs from the
    # same-training answer settled after it (a late knob that won after the races:
    # `batch_offer.rebase`), or that an older tune's file records.
    other_settings: dict[str, Any] = field(default_factory=dict)

    @property
    def batch(self) -> int:
        return int(self.settings.batch_size or self.from_batch)

    @property
    def summary(self) -> str:
        head = (
            f"batch {self.batch} (from {self.from_batch}), {self.lr.said()}: "
            f"{self.samples_speedup:.2f}x the samples/s of the same-training answer"
        )
        return f"{head}; {self.verdict}: {self.why}" if self.why else head
