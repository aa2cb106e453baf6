"""The batch offer: the data cap, the learning-rate rule, the race and its verdict, with
trial and race functions standing in for the child processes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tfaccel.optimize.lr_scaling import change_for, rule_for
from tfaccel.optimize.settings import Settings
from tfaccel.render import pyplot
from tfaccel.trial.runner import StepPlan, TrialResult, label_of, settings_key
from tfaccel.tune import offer
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, Race, TuneOptions
from tfaccel.tune.search import Tuner

from .fakes import STEPS, FakeClock, FakeTrials, options, said, tuner

H200 = Hardware(1, "9.0")
ADAM = {"optimizer": "Adam", "learning_rate": 0.001, "examples": 60_000}


def curve(slope_until: float, floor: float, seconds: float = 60.0) -> list[list[float]]:
    """A validation loss from 1.0 falling by 0.05 a second until `slope_until`
    seconds, then flat at `floor` at the most; a point every 5 s."""
    return [[t, max(floor, 1.0 - 0.05 * min(t, slope_until))] for t in range(0, 61, 5)]


HALF_AT_20 = [[t, max(0.5, 1.0 - 0.025 * t)] for t in range(0, 61, 5)]
HALF_AT_10 = [[t, max(0.5, 1.0 - 0.05 * t)] for t in range(0, 61, 5)]


class FakeRace:
    """Races: the same-training run's curve, and the candidate's (keyed by whether the
    run is at the user's batch)."""

    def __init__(self, same: list[list[float]], candidate: list[list[float]]) -> None:
        self.same, self.candidate = same, candidate
        self.calls: list[tuple[Settings, dict[str, Any]]] = []

    def __call__(
        self, w: str, s: Settings, p: StepPlan, t: float, extra: dict[str, Any]
    ) -> TrialResult:
        self.calls.append((s, extra))
        points = self.same if s.batch_size == 64 else self.candidate
        return TrialResult(
            settings_key(w, s, p, extra),
            label_of(s),
            s.to_dict(),
            "ok",
            samples_per_s=1000.0,
            windows=(1000.0,),
            extra={"race": points, "validation": "a held-out 6,000 examples"},
        )


def tune(tmp_path: Path, race: Any, extra: dict[str, Any] | None = None, **opts: Any) -> Any:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    tune_options = options(**opts)
    fake = FakeTrials(extra={"no_race": None, **ADAM, **(extra or {})})
    return Tuner("w", H200, tune_options, j, trial_fn=fake, race_fn=race).run()


def test_a_larger_batch_that_reaches_the_loss_sooner_passes(tmp_path: Path) -> None:
    """The candidate falls twice as fast: on the curves smoothed over three evaluations
    it reaches the same-training run's best loss (0.5, at 30 s of 60) at 20 s, beyond
    the margin: offered as passed. Of the ladder's two rungs (256, 512) the smaller
    is raced first, then the larger, which passes too and is the offer."""
    res = tune(tmp_path, race := FakeRace(same=HALF_AT_20, candidate=HALF_AT_10))
    o = res.batch_offer
    assert o is not None and o.verdict == "passed", o
    assert o.batch == 512 and o.from_batch == 64
    assert o.race is not None and o.race.target == 0.5
    assert (o.race.same_s, o.race.candidate_s) == (30.0, 20.0)
    assert o.race.to_target_speedup == 1.5
    assert "1.50x sooner" in o.why
    # the race ran the same-training answer once and each candidate, with the
    # square-root rule of Adam for 4x and 8x the batch
    (same_s, same_x), (low_s, low_x), (cand_s, cand_x) = race.calls
    assert same_s == res.best_settings and same_x["race"]["lr"] is None
    assert low_s == res.best_settings.replace(batch_size=256)
    assert low_x["race"]["lr"]["scale"] == pytest.approx(2.0)
    assert cand_s == res.best_settings.replace(batch_size=512)
    assert cand_x["race"]["lr"]["rule"] == "sqrt"
    assert cand_x["race"]["lr"]["scale"] == pytest.approx(8**0.5)


def test_a_larger_batch_that_reaches_the_loss_later_is_refused(tmp_path: Path) -> None:
    """More samples per second, but fewer steps: its loss stalls above the target."""
    race = FakeRace(same=curve(12.0, 0.4), candidate=curve(60.0, 0.55))
    res = tune(tmp_path, race)
    o = res.batch_offer
    assert o is not None and o.verdict == "failed"
    assert o.why.startswith("more samples per second, but it did not reach the validation loss 0.4")


def test_a_gain_within_the_margin_is_no_pass(tmp_path: Path) -> None:
    """5 s sooner on 60 s (smoothed): under the 10 % margin."""
    same = [[t, max(0.5, 1.0 - t / 100)] for t in range(0, 61, 5)]  # 0.5 at 50 s
    cand = [[t, max(0.5, 1.0 - t / 90)] for t in range(0, 61, 5)]  # 0.5 at 45 s
    res = tune(tmp_path, FakeRace(same, cand))
    assert res.batch_offer is not None and res.batch_offer.verdict == "failed"
    assert "no sooner beyond the noise (55 s vs 60 s" in res.batch_offer.why


def test_a_model_without_a_validation_loss_is_offered_no_batch_change(tmp_path: Path) -> None:
    """A GAN's own train_step: the trials say no race can judge it; the larger batch's
    speed is said, and no offer made."""
    race = FakeRace(curve(10, 0.5), curve(10, 0.5))
    gan = "GAN has a train_step of its own and no test_step"
    res = tune(tmp_path, race, extra={"no_race": gan})
    assert res.batch_offer is None and not race.calls
    assert res.largest_fitting_batch == 64  # no trial spent on a ladder that cannot be offered
    assert res.batch_note is not None and gan in res.batch_note
    assert "no batch change is offered" in res.batch_note


FAST = [[t, max(0.3, 1.0 - 0.1 * t)] for t in range(0, 61, 5)]  # 0.4 at 6 s


class RaceByBatch(FakeRace):
    """Races whose candidate's curve depends on its batch: {batch: curve}."""

    def __init__(self, same: list[list[float]], by_batch: dict[int, list[list[float]]]) -> None:
        super().__init__(same, [])
        self.by_batch = by_batch

    def __call__(
        self, w: str, s: Settings, p: StepPlan, t: float, extra: dict[str, Any]
    ) -> TrialResult:
        self.candidate = self.by_batch.get(s.batch_size or 64, [])
        return super().__call__(w, s, p, t, extra)


def test_a_smaller_batch_that_passes_stands_where_the_larger_loses(tmp_path: Path) -> None:
    """The ladder kept 256 then 512: the smaller is raced first (the likelier to
    pass, where a budget holds one race only) and gets there sooner; 512 stalls above
    the target (past the critical batch); the same-training run is raced once."""
    race = RaceByBatch(curve(12.0, 0.4), {512: curve(60.0, 0.55), 256: FAST})
    res = tune(tmp_path, race)
    o = res.batch_offer
    assert o is not None and o.verdict == "passed" and o.batch == 256, o
    assert [s.batch_size for s, _ in race.calls] == [64, 256, 512]
    assert race.calls[1][1]["race"]["lr"]["scale"] == pytest.approx(4**0.5)  # 4x the batch
    lines = [d.text for d in res.decisions if d.stage == "batch offer"]
    assert lines[-2].startswith("batch 256 (from 64)") and "; passed: " in lines[-2]
    assert lines[-1].startswith("batch 512 (from 64)") and "; failed: " in lines[-1]
    # both races are kept, as data and as a panel each beside the trials' bars
    import json

    from tfaccel.render.tune import tune_figure
    from tfaccel.tune.output import result_json

    assert [(o.batch, o.verdict) for o in res.races] == [(256, "passed"), (512, "failed")]
    races = json.loads(result_json(res))["races"]
    assert [r["batch_size"] for r in races] == [256, 512] and races[1]["race"]["candidate"]
    fig = tune_figure(res)
    titles = [ax.get_title() for ax in fig.get_axes()]
    assert any(t.startswith("batch 512's race, 60 s each: failed") for t in titles), titles
    bars = fig.get_axes()[0]  # the loser's bar says so; the offer's is orange
    marked = [t for t in bars.texts if t.get_text() == " lost its race"]
    assert len(marked) == 1 and bars.get_yticklabels()[round(marked[0].get_position()[1])]
    assert "batch=512" in bars.get_yticklabels()[round(marked[0].get_position()[1])].get_text()
    assert any(t.startswith("batch 256's race, 60 s each: passed") for t in titles), titles


def test_where_the_smaller_batch_loses_the_larger_is_not_raced(tmp_path: Path) -> None:
    """A batch past the critical one loses where a smaller one wins, so a failed 256
    ends the races: its failure stands, and 512's race is not run."""
    race = RaceByBatch(curve(12.0, 0.4), {512: curve(60.0, 0.55), 256: curve(60.0, 0.5)})
    res = tune(tmp_path, race)
    o = res.batch_offer
    assert o is not None and o.verdict == "failed" and o.batch == 256
    assert [s.batch_size for s, _ in race.calls] == [64, 256]


def test_races_resume_from_the_journal(tmp_path: Path) -> None:
    race = FakeRace(HALF_AT_20, HALF_AT_10)
    first = tune(tmp_path, race)
    assert len(race.calls) == 3  # the same-training run, batch 256, batch 512
    again = tune(tmp_path, race)
    assert len(race.calls) == 3  # every run from the journal
    assert again.batch_offer is not None and again.batch_offer.verdict == "passed"
    assert first.batch_offer is not None and again.batch_offer.race == first.batch_offer.race


def test_no_race_leaves_the_offer_unproven(tmp_path: Path) -> None:
    race = FakeRace(curve(10, 0.5), curve(10, 0.5))
    res = tune(tmp_path, race, race_s=0.0)
    assert res.batch_offer is not None and res.batch_offer.verdict == "unproven"
    assert res.batch_offer.why.startswith("not raced: the race is off (--race 0)")
    assert not race.calls


def test_a_failed_race_run_leaves_the_offer_unproven(tmp_path: Path) -> None:
    race = FakeRace(curve(10, 0.5), [])

    def fails(w: str, s: Settings, p: StepPlan, t: float, x: dict[str, Any]) -> TrialResult:
        r = race(w, s, p, t, x)
        if s.batch_size == 64:
            return r
        return dataclasses.replace(r, status="error", error="OOM in evaluate", samples_per_s=None)

    res = tune(tmp_path, fails)
    o = res.batch_offer
    assert o is not None and o.verdict == "unproven"
    assert "the race did not finish" in o.why and "OOM in evaluate" in o.why


def test_the_data_caps_the_ladder() -> None:
    assert offer.largest_batch(64, 4096, None) == (4096, None)
    assert offer.largest_batch(64, 4096, 10**7) == (4096, None)
    largest, why = offer.largest_batch(32, 4096, 1024)
    assert largest == 64 and why is not None and "1,024 examples" in why
    assert offer.largest_batch(64, 4096, 100)[0] == 64  # never below the user's own
    # 480 examples at 16: the cap, 30, leaves no room for the ladder's first rung (32)
    assert offer.largest_batch(16, 4096, 480) == (
        16,
        "no batch above the script's 16: twice it is past 30, and the data's 480 examples "
        "would make an epoch of fewer than 16 steps beyond it",
    )


@pytest.mark.parametrize(
    ("optimizer", "rule", "scale"),
    [("SGD", "linear", 8.0), ("Adam", "sqrt", 8**0.5), ("AdamW", "sqrt", 8**0.5)],
)
def test_the_learning_rate_rule_follows_the_optimizer(
    optimizer: str, rule: str, scale: float
) -> None:
    change = change_for(8.0, optimizer, steps_per_epoch=117)
    assert (change.rule, change.warmup_steps) == (rule, 117)
    assert change.scale == pytest.approx(scale)


def test_an_unknown_optimizer_gets_the_cautious_rule_and_a_schedule_stays() -> None:
    assert rule_for("MyOptimizer")[0] == "sqrt"
    assert "more cautious" in rule_for(None)[1]
    kept = change_for(4.0, "Adam", schedule="CosineDecay")
    assert (kept.rule, kept.scale) == ("none", 1.0)
    assert "CosineDecay" in kept.note
    assert change_for(4.0, "SGD").warmup_steps == 500  # an epoch of unknown length
    assert change_for(4.0, "SGD", steps_per_epoch=3).warmup_steps == 10


def test_the_offer_names_the_scripts_callbacks_that_set_the_rate() -> None:
    """Read by the baseline (`lr_setters`), said with the rule, kept in the settings
    file's learning_rate (which `tfaccel run --batch-offer` loads back)."""
    from tfaccel.optimize.lr_scaling import LrChange

    facts = {"optimizer": "Adam", "learning_rate": 0.001, "examples": 4096}
    baseline = TrialResult("b", "l", {"batch_size": 32}, "ok", extra=facts)
    same = TrialResult("s", "l", {"batch_size": 32}, "ok", samples_per_s=100.0)
    plain = offer.lr_change(same, 128, 32, baseline).said()
    assert (
        plain
        == "learning rate x2 (Adam: square-root rule (adaptive optimizer)), warmed up over 32 steps"
    )
    baseline.extra["lr_setters"] = ["ReduceLROnPlateau", "LearningRateScheduler"]
    change = offer.lr_change(same, 128, 32, baseline)
    assert change.said() == plain + (
        " (the script's ReduceLROnPlateau, LearningRateScheduler sets the rate as it always does)"
    )
    assert LrChange(**json.loads(json.dumps(change.to_dict()))).said() == change.said()
    made = offer.make(
        same,
        TrialResult("c", "l", {"batch_size": 128}, "ok", samples_per_s=300.0),
        Settings(batch_size=128),
        baseline,
    )
    assert "ReduceLROnPlateau" in made.summary


def test_the_warm_up_lasts_an_epoch_of_the_fits_own_steps() -> None:
    """A generator's fit of steps_per_epoch=100 at batch 32: an epoch is 3,200
    examples, 25 steps at batch 128 (without it: 500, longer than such a training)."""
    facts = {"optimizer": "SGD", "learning_rate": 0.01}
    baseline = TrialResult("b", "l", {"batch_size": 32}, "ok", extra=facts)
    same = TrialResult("s", "l", {"batch_size": 32}, "ok", samples_per_s=100.0)
    assert offer.lr_change(same, 128, 32, baseline).warmup_steps == 500
    baseline.extra["epoch_examples"] = 3200
    assert offer.lr_change(same, 128, 32, baseline).warmup_steps == 25


def test_one_lucky_evaluation_counts_a_third() -> None:
    """A plateau at 1.2 with one evaluation at 1.14: on the curves smoothed over three
    evaluations the target is 1.18, which a candidate whose plateau is 1.18 reaches."""
    same = [(0.0, 2.0), (5.0, 1.2), (10.0, 1.2), (15.0, 1.2), (20.0, 1.14), (25.0, 1.2)]
    cand = [(0.0, 2.0), (5.0, 1.18), (10.0, 1.18), (15.0, 1.18), (20.0, 1.18), (25.0, 1.18)]
    race = offer.race_of(25.0, "", same, cand)
    assert race.target == pytest.approx(1.18) and race.same_s == 20.0
    assert race.candidate_s == 15.0
    diverged = [(0.0, 2.0), (5.0, float("nan")), (10.0, float("nan"))]
    assert offer.race_of(25.0, "", same, diverged).candidate_s is None


def test_both_answers_in_the_text_the_json_the_settings_file_and_the_plot(
    tmp_path: Path,
) -> None:
    import json

    from rich.console import Console

    from tfaccel.render.tune import offer_lines, tune_figure, tune_text
    from tfaccel.tune.output import result_json, settings_document

    res = tune(tmp_path, FakeRace(HALF_AT_20, HALF_AT_10))
    console = Console(width=120, record=True)
    tune_text(res, console)
    text = console.export_text()
    assert "same training: mixed_bfloat16 xla=jit batch=64 spe=25" in text
    assert "batch offer (passed): batch 512 (from 64), learning rate x2.83" in text
    assert "1.50x sooner" in text and "tfaccel run --batch-offer" in text
    res.workload = "script: python fit.py --epochs 3 (fit call 2)"
    assert "  tfaccel run --batch-offer -- python fit.py --epochs 3 applies it" in (
        offer_lines(res)
    )
    res.workload = "mymodels:build"  # an entry point: tune does not know its script
    assert "  tfaccel run --batch-offer -- python YOUR_TRAINING_SCRIPT.py applies it" in (
        offer_lines(res)
    )
    doc = json.loads(result_json(res))
    assert doc["same_training_speedup_over_keras_defaults"] == res.speedup(res.keras_defaults)
    offer_doc = doc["batch_offer"]
    assert offer_doc["to_target_speedup_over_same_training"] == 1.5
    assert offer_doc["learning_rate"]["rule"] == "sqrt" and offer_doc["verdict"] == "passed"
    assert doc["to_target_speedup_over_keras_defaults"] == pytest.approx(
        1.5 * doc["same_training_speedup_over_keras_defaults"]
    )
    settings = settings_document(res)
    assert settings["answer"] == "same_training" and settings["apply_batch_offer"] is False
    assert settings["settings"]["batch_size"] == 64
    assert settings["batch_offer"]["batch_size"] == 512
    assert settings["batch_offer"]["raced_fit"] is None  # no script's fit: any applies it
    assert res.batch_offer is not None
    res.batch_offer.trial.extra["measured"] = "model.fit at fit.py:12"  # as a script's trial
    assert settings_document(res)["batch_offer"]["raced_fit"] == "fit.py:12"
    fig = tune_figure(res)
    race_ax = fig.subfigs[1].axes[0]
    assert race_ax.get_title().endswith("passed, 1.50x sooner to the target")
    named = [line.get_label() for line in race_ax.get_lines() if line.get_label()[0] != "_"]
    assert named[:1] == ["same training (batch 64)"]


def test_no_offer_is_said_in_the_text(tmp_path: Path) -> None:
    from rich.console import Console

    from tfaccel.render.tune import tune_text

    res = tune(tmp_path, FakeRace([], []), extra={"no_race": "its data is synthetic"})
    console = Console(width=200, record=True)
    tune_text(res, console)
    text = console.export_text()
    assert "batch offer: none: its data is synthetic: no batch change" in text
    assert text.count("batch offer: none:") == 1  # with the answers, not among the decisions too


def test_the_noise_scale_caps_the_ladder() -> None:
    largest, why = offer.largest_batch(64, 4096, 10**6, noise_scale=120.0)
    assert largest == 960 and why is not None and "gradient noise scale, about 120" in why
    assert offer.largest_batch(64, 4096, 10**6, noise_scale=4.0)[0] == 64  # none to offer


def test_a_noise_scale_below_the_users_batch_is_said_as_such() -> None:
    """A regression target fitted from far away can read well under 1: no "batches up
    to 0", and the figure keeps its digits."""
    largest, why = offer.largest_batch(100, 4096, 10**4, noise_scale=0.37)
    assert largest == 100
    assert why == (
        "no batch above the script's 100: the gradient noise scale, about 0.37 early in "
        "training, predicts that batches far beyond it save few steps (it grows as the "
        "loss falls: 8x is left for that)"
    )


class Unsaturated(FakeTrials):
    """Batches past 512 still gain (fits up to 4,096): a ladder of 256, 1,024 and 2,048."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if not r.ok or (s.batch_size or 64) <= 512:
            return r
        rate = (r.samples_per_s or 0.0) * ((s.batch_size or 64) / 512) ** 0.3
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


@pytest.mark.parametrize(
    ("wins", "raced", "offered"),
    [
        ({1024: FAST, 256: FAST}, [1024, 2048], 1024),  # the middle passes, the top fails
        ({256: FAST}, [1024, 256], 256),  # the middle fails: the half below
        ({256: FAST, 1024: FAST, 2048: FAST}, [1024, 2048], 2048),
    ],
)
def test_three_rungs_are_raced_by_bisection(
    tmp_path: Path, wins: dict[int, Any], raced: list[int], offered: int
) -> None:
    """A ladder of 256, 1,024 and 2,048: the middle rung is raced first, then the rung
    above it where it passes or the one below where it fails; two races, not three, and
    the largest batch that passed is the offer. The same-training run is raced once."""
    slow = curve(60.0, 0.55)  # stalls above the target
    race = RaceByBatch(curve(12.0, 0.4), {b: wins.get(b, slow) for b in (256, 1024, 2048)})
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    fake = Unsaturated(oom_above=4096, extra={"no_race": None, **ADAM})
    res = Tuner("w", H200, options(max_batch=4096), j, trial_fn=fake, race_fn=race).run()
    ladder = sorted({s.batch_size for s in fake.calls if (s.batch_size or 64) > 64})
    assert ladder == [256, 1024, 2048]
    assert [s.batch_size for s, _ in race.calls] == [64, *raced]
    o = res.batch_offer
    assert o is not None and o.verdict == "passed" and o.batch == offered, o
    assert [r.batch for r in res.races] == raced


def _three_rungs(folder: Path, budget_s: float) -> tuple[Any, RaceByBatch, Tuner]:
    """A tune whose ladder is 256, 1,024 and 2,048 (trials of 40 s, race runs of 100 s)
    and whose batch 256 alone wins its race."""
    slow = curve(60.0, 0.55)
    race = RaceByBatch(curve(12.0, 0.4), {256: FAST, 1024: slow, 2048: slow})
    clock = FakeClock()
    fake = Unsaturated(oom_above=4096, extra={"no_race": None, **ADAM})
    opts = options(max_batch=4096, time_budget_s=budget_s, race_s=60.0)
    t = clocked_tuner(folder, opts, clock, clock.taking(40.0, fake), clock.taking(100.0, race))
    res = t.run()
    ladder = {s.batch_size for s in fake.calls if (s.batch_size or 64) > 64}
    assert sorted(ladder) == [256, 1024, 2048] and clock.now <= budget_s
    return res, race, t


@pytest.mark.parametrize(("budget_s", "raced"), [(650.0, [256]), (760.0, [1024, 256])])
def test_a_budget_that_holds_one_race_races_the_lowest_rung(
    tmp_path: Path, budget_s: float, raced: list[int]
) -> None:
    """Three rungs and a budget left for one race only: the lowest rung, the likeliest
    to pass, is raced, not the middle one; racing 1,024 first (it stalls) left 256
    unraced and the offer unproven. A budget that holds two candidates' races bisects,
    the middle rung first."""
    res, race, _ = _three_rungs(tmp_path, budget_s)
    assert [s.batch_size for s, _ in race.calls] == [64, *raced]
    o = res.batch_offer
    assert o is not None and o.batch == 256 and o.verdict == "passed", o


def test_a_middle_rung_whose_race_the_journal_holds_is_read_first(tmp_path: Path) -> None:
    """With the budget spent, the lowest rung is next; but a middle rung whose race the
    journal holds costs nothing, and the bisection reads it first."""
    from tfaccel.tune.stages import batch_offer

    res, _, t = _three_rungs(tmp_path, 650.0)
    assert res.best is not None
    offers = [
        offer.make(res.best, trial, Settings(**trial.settings), res.baseline)
        for trial in res.trials
        if trial.ok and (trial.settings.get("batch_size") or 64) > 64
    ]
    assert [o.batch for o in offers] == [256, 1024, 2048]
    assert batch_offer._next_rung(t, offers, 0, 2) == 0
    key = batch_offer._race_key(t, offers[1].settings, offers[1].lr)[0]
    t.journal.results[key] = TrialResult(key, "race", {}, "ok", samples_per_s=1.0)
    assert batch_offer._next_rung(t, offers, 0, 2) == 1


def test_a_pass_stands_where_the_next_race_is_unproven(tmp_path: Path) -> None:
    """The middle rung passes, the race above it ends in an error (unproven): the pass
    is the offer, and nothing more is raced."""

    class Broken(RaceByBatch):
        def __call__(
            self, w: str, s: Settings, p: StepPlan, t: float, extra: dict[str, Any]
        ) -> TrialResult:
            r = super().__call__(w, s, p, t, extra)
            return (
                dataclasses.replace(r, status="error", error="CUDA error")
                if (s.batch_size == 2048)
                else r
            )

    race = Broken(curve(12.0, 0.4), {1024: FAST, 2048: FAST, 256: FAST})
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    fake = Unsaturated(oom_above=4096, extra={"no_race": None, **ADAM})
    res = Tuner("w", H200, options(max_batch=4096), j, trial_fn=fake, race_fn=race).run()
    assert [s.batch_size for s, _ in race.calls] == [64, 1024, 2048]
    o = res.batch_offer
    assert o is not None and o.verdict == "passed" and o.batch == 1024, o
    assert [(r.batch, r.verdict) for r in res.races] == [(1024, "passed"), (2048, "unproven")]


def test_the_offer_stops_near_the_critical_batch(tmp_path: Path) -> None:
    race = FakeRace(HALF_AT_20, HALF_AT_10)
    res = tune(tmp_path, race, extra={"noise_scale": 40.0})
    sizes = [s.batch_size for s, _ in race.calls]
    assert sizes == [64, 256]  # 8 x 40 = 320 caps the ladder: 256, and no 512
    assert any("gradient noise scale, about 40" in d.text for d in res.decisions)


def test_a_noise_scale_that_could_not_be_read_is_said(tmp_path: Path) -> None:
    """On the H200 the autoencoder's baseline gave no estimate and its ladder ran to the
    data's cap without a word; now the tune says why the cap is missing."""
    why = "the gradient norms at batches 64 and 512 did not differ as noise would"
    res = tune(tmp_path, FakeRace(HALF_AT_20, HALF_AT_10), extra={"noise_scale_why": why})
    said = [d.text for d in res.decisions if d.stage == "batch offer"]
    assert said[0].startswith("batches up to 3750: the data's 60,000 examples")
    assert said[1].startswith(f"no gradient noise scale: {why}; nothing but the data caps")


def test_a_candidate_that_reaches_the_loss_and_drifts_away_fails() -> None:
    """Sooner to the target, then away from it (a learning rate too large): no pass."""
    same = [(float(t), max(0.5, 1.0 - 0.025 * t)) for t in range(0, 61, 5)]
    # down to 0.5 by 10 s, there until 25 s, then away
    cand = [(float(t), max(1.0 - 0.05 * t, 0.5 + 0.05 * (t - 25))) for t in range(0, 61, 5)]
    race = offer.race_of(60.0, "", same, cand)
    assert race.candidate_s is not None and race.candidate_s < race.same_s  # type: ignore[operator]
    found = offer.BatchOffer(
        Settings(batch_size=512), TrialResult("k", "l", {}, "ok"), 64, 2.0, change_for(8, "SGD")
    )
    judged = offer.judged(found, race, 5.0)
    assert judged.verdict == "failed" and "drifts away" in judged.why


def _judged_with_train(train: list[float]) -> offer.BatchOffer:
    """The drifting candidate above, with its training loss at each point."""
    same = [(float(t), max(0.5, 1.0 - 0.025 * t)) for t in range(0, 61, 5)]
    cand = [
        (float(t), max(1.0 - 0.05 * t, 0.5 + 0.05 * (t - 25)), None if t == 0 else train[t // 5])
        for t in range(0, 61, 5)
    ]
    race = offer.race_of(60.0, "", same, cand)
    found = offer.BatchOffer(
        Settings(batch_size=512), TrialResult("k", "l", {}, "ok"), 64, 2.0, change_for(8, "Adam")
    )
    return offer.judged(found, race, 5.0)


def test_a_candidate_whose_training_loss_still_falls_overfits_and_passes() -> None:
    """Its validation loss rises late in the race while its training loss keeps
    falling (the H200's bidirectional LSTM at 16x its batch: it trained ~25 epochs of
    the data in the race): it did reach the trained model sooner, and the overfitting
    is said, with what to do about it."""
    judged = _judged_with_train([1.0 - 0.07 * i for i in range(13)])
    assert judged.verdict == "passed", judged.why
    assert "it overfits" in judged.why and "EarlyStopping" in judged.why


def test_a_candidate_whose_training_loss_rises_too_diverges_and_fails() -> None:
    falls_then_rises = [0.9, 0.7, 0.55, 0.5, 0.5, 0.52, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    judged = _judged_with_train(falls_then_rises)
    assert judged.verdict == "failed" and "drifts away" in judged.why


def test_run_says_how_many_epochs_the_offer_needed(tmp_path: Path) -> None:
    from tfaccel.tune.output import read_answer

    doc = {
        "schema": "tfaccel.settings/1",
        "answer": "same_training",
        "settings": {"precision": "float32"},
        "batch_offer": {
            "batch_size": 512,
            "from_batch_size": 32,
            "learning_rate": change_for(16, "Adam").to_dict(),
            "verdict": "passed",
            "why": "reaches it 5.8x sooner",
            "epochs_to_target": 5.2,
        },
    }
    path = tmp_path / "tfaccel.json"
    path.write_text(json.dumps(doc))
    answer = read_answer(path, batch_offer=True)
    assert answer.settings.batch_size == 512
    assert any("after about 5.2 epochs: a script that trains" in n for n in answer.notes)
    doc["batch_offer"]["epochs_to_target"] = 3941.13  # a toy model's race: whole epochs
    path.write_text(json.dumps(doc))
    notes = read_answer(path, batch_offer=True).notes
    assert any("after about 3,941 epochs: a script that trains" in n for n in notes)


def test_the_epochs_to_target_are_the_scripts_own(tmp_path: Path) -> None:
    """The candidate reached the target (its curve smoothed over three evaluations)
    after 20 s at 1,000 samples/s: 20,000 examples. Of an endless dataset (`.repeat()`)
    fed with steps_per_epoch=300 at batch 64, an epoch is 19,200 examples: about 1.04
    epochs (no count of the data: none was given before); of 5,000 examples without
    steps_per_epoch, 4."""
    from tfaccel.tune.stages.batch_offer import _epochs

    t = tuner(tmp_path, FakeTrials())
    race = offer.race_of(60.0, "", HALF_AT_20, HALF_AT_10)
    candidate = TrialResult("c", "l", {"batch_size": 256}, "ok", samples_per_s=1000.0)
    assert race.candidate_s == 20.0
    for facts, epochs in (({"epoch_examples": 19200}, 20000 / 19200), ({"examples": 5000}, 4.0)):
        t.result.baseline = TrialResult("b", "l", {}, "ok", 1.0, extra=facts)
        assert _epochs(t, race, candidate) == pytest.approx(epochs)


@pytest.mark.parametrize("fit_epochs", [3, 10**9])
def test_a_pass_beyond_the_scripts_epochs_is_said(tmp_path: Path, fit_epochs: int) -> None:
    """A small data set (5,000 examples): the passed candidate reached its target after
    more epochs of it than the script's fit trains (3). Applied to the script as
    written, its training ends first: said (and not where the fit trains more)."""
    race = FakeRace(same=HALF_AT_20, candidate=HALF_AT_10)
    res = tune(tmp_path, race, extra={"examples": 5_000, "fit_epochs": fit_epochs})
    o = res.batch_offer
    assert o is not None and o.verdict == "passed" and o.epochs_to_target
    said = [d.text for d in res.decisions if "the script's fit trains" in d.text]
    if fit_epochs == 3:
        assert o.epochs_to_target == pytest.approx(4.0)  # 20 s at 1,000/s: 20,000 examples
        assert said == [
            f"in its race, batch {o.batch} reached the target after about 4.0 "
            "epochs; the script's fit trains 3: applied to it as written, it ends before "
            "that loss (more epochs, or stop on the validation loss, for the time the race "
            "saved)"
        ]
    else:
        assert said == []


def test_a_ladder_the_budget_left_no_time_for_is_said_so(tmp_path: Path) -> None:
    """Every same-training trial ran, then the budget ended: the offer's note says the
    ladder was not tried, not that no larger batch ran faster."""
    clock = FakeClock()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    fake = FakeTrials(extra={"no_race": None, **ADAM})
    opts = options()
    everything = Tuner("w", H200, opts, j, trial_fn=fake, race_fn=FakeRace([], [])).run()
    same = [s for s in fake.calls if s.batch_size == 64]
    (tmp_path / "b").mkdir()
    j = Journal(tmp_path / "b" / "j.jsonl")
    j.load("w")
    # no race to run (race_s 0): no time is kept for the offer (as it is where one can be)
    budget = TuneOptions(
        batch_size=64, steps=STEPS, time_budget_s=100.0 * len(same) + 50, race_s=0.0
    )
    slow = clock.taking(100.0, FakeTrials(extra=fake.extra))
    res = Tuner("w", H200, budget, j, trial_fn=slow, clock=clock).run()
    assert everything.batch_offer is not None and res.batch_offer is None
    assert res.batch_note == (  # 50 s left, a trial of 100 s
        "not tried: the time budget leaves too little for a ladder trial (about 50 s more: "
        "a longer --time-budget)"
    )


def test_the_batch_offer_comes_after_every_same_training_stage(tmp_path: Path) -> None:
    """Every knob that keeps the training as it was is measured at the user's batch
    first; the ladder then starts from that answer, as an offer (4x while it pays, 2x
    after a 4x step that did not fit), and never replaces it."""
    fake = FakeTrials(extra={"no_race": None})  # a model a race could judge (none here)
    res = tuner(tmp_path, fake, race_s=0.0).run()
    sizes = [s.batch_size for s in fake.calls]
    first_offer = next(i for i, b in enumerate(sizes) if b != 64)
    assert all(b != 64 for b in sizes[first_offer:])
    assert res.best_settings is not None and res.best_settings.batch_size == 64
    assert fake.calls[first_offer] == res.best_settings.replace(batch_size=256)
    assert [b for b in sizes[first_offer:]] == [256, 1024, 512]
    assert said(res, "batch offer")[:3] == [
        "batch 256: +52% over batch 64",
        "batch 1024: oom (does not fit)",
        "batch 512: +23% over batch 256",
    ]
    # not raced (the race is off), the offer is the rung the races would try first
    assert res.batch_offer is not None and res.batch_offer.verdict == "unproven"
    assert res.batch_offer.summary.startswith("batch 256 (from 64)")
    assert "1.52x the samples/s" in res.batch_offer.summary


def test_no_batch_past_the_data(tmp_path: Path) -> None:
    """A training set of 2,048 examples: an epoch of at least 16 steps caps the offer at
    batch 128 (2x the user's 64); one of 1,024 leaves no larger batch to offer."""
    for examples, sizes in ((2048, [128]), (1024, [])):
        fake = FakeTrials(extra={"examples": examples, "no_race": None})
        (tmp_path / str(examples)).mkdir()
        res = tuner(tmp_path / str(examples), fake, race_s=0.0).run()
        assert [s.batch_size for s in fake.calls if s.batch_size != 64] == sizes
    assert res.batch_offer is None and res.batch_note is not None
    assert "1,024 examples would make an epoch of fewer than 16 steps" in res.batch_note


def clocked_tune(
    folder: Path,
    budget_s: float,
    race_s: float,
    trial_s: float,
    race_run_s: float,
    fake: Any = None,
    race: Any = None,
) -> tuple[Any, list[str], FakeClock]:
    """A tune under a time budget whose trials and race runs take the seconds given
    (a FakeClock); its result, the stages of the trials it ran, and the clock."""
    folder.mkdir(exist_ok=True)
    clock = FakeClock()
    stages: list[str] = []
    res = clocked_tuner(
        folder,
        options(time_budget_s=budget_s, race_s=race_s),
        clock,
        clock.taking(trial_s, fake or FakeTrials(extra={"no_race": None, **ADAM})),
        clock.taking(race_run_s, race or FakeRace(HALF_AT_20, HALF_AT_10)),
        on_trial=lambda stage, r, s: stages.append(stage) if r is None else None,
    ).run()
    return res, stages, clock


def clocked_tuner(
    folder: Path, opts: TuneOptions, clock: FakeClock, trial_fn: Any, race_fn: Any, **kw: Any
) -> Tuner:
    """A Tuner of workload "w" on the H200 whose journal is in `folder` and whose clock
    is `clock` (the trial and race functions advance it: `FakeClock.taking`)."""
    j = Journal(folder / "j.jsonl")
    j.load("w")
    return Tuner("w", H200, opts, j, trial_fn=trial_fn, race_fn=race_fn, clock=clock, **kw)


def test_a_time_budget_keeps_its_end_for_the_batch_offer(tmp_path: Path) -> None:
    """Trials of 100 s, a budget that holds the same-training stages and either the late
    knobs or the offer's ladder and race: the late knobs give way (said, with what they
    cost), the offer is raced and passes; with no race to run (race_s 0) nothing is kept,
    the late knobs run, and the ladder finds no time."""

    def run(folder: str, race_s: float, budget_s: float) -> tuple[Any, list[str]]:
        # 7 same-training trials before the late stages, then 3 ladder trials and 3
        # race runs (kept: 3 x 100 s + 3 x (60 + 1.25 x 100) s); a race run: setting
        # up, and the race's 60 s
        res, stages, _ = clocked_tune(tmp_path / folder, budget_s, race_s, 100.0, 160.0)
        return res, stages

    res, stages = run("kept", 60.0, 1650.0)
    assert stages[7:13] == ["batch offer"] * 3 + ["race"] * 3  # 256, then 512: both pass
    assert res.batch_offer is not None and res.batch_offer.verdict == "passed"
    kept = said(res, "time budget")
    assert kept[0].startswith("7 trial(s) not run: the budget's last 855 s were kept for")
    # the ladder and races took 780 s of the 855 kept: the late stages run in what is left
    assert kept[1].startswith("after the batch offer, the budget still holds trials")
    assert stages[13:] == ["xla_options"]  # the 170 s left hold one of the seven
    assert not any(t.error and "time kept" in t.error for t in res.trials)
    res, stages = run("none", 0.0, 1370.0)
    assert "batch offer" not in stages and stages[7:] == [
        "xla_options",
        "xla_options",
        "allocator + prefetch",
        "dropout",
        "float8",
        "attention",
    ]  # the last late knob's trial (einsum) is past the budget
    assert res.batch_offer is None and res.batch_note == (
        "not tried: the time budget leaves too little for a ladder trial (about 30 s more: "
        "a longer --time-budget)"
    )


class LateWin(FakeTrials):
    """Keras' defaults (990/s) within the noise of the baseline (970/s), which
    steps_per_execution 25 beats (1,010/s) without beating the defaults beyond it; a
    late knob (cuBLASLt) runs twice as fast. The ladder's batches keep their figures."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if s.batch_size != 64:
            return r
        plain = s.precision == "float32" and s.xla == "off"
        rate = (
            2000.0
            if s.xla_options
            else 990.0
            if s.xla == "auto"
            else (1010.0 if s.steps_per_execution == 25 else 970.0)
            if plain
            else 500.0
        )
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


def test_an_answer_settled_again_after_the_late_stages_is_said(tmp_path: Path) -> None:
    """The answer is settled before the batch offer (Keras' defaults: said), and again
    after the late stages that the offer's time had held back: where a late knob then
    wins, that is said too, so that the log does not end on "nothing to change" (the
    H200's LSTM: `persist_dynamic` +34 % after the offer)."""
    fake = LateWin(extra={"no_race": None, **ADAM})
    res, _, _ = clocked_tune(tmp_path / "t", 1650.0, 60.0, 100.0, 160.0, fake)
    answer = said(res, "answer")
    assert answer[0].startswith("Keras' defaults: nothing the search tried beats them")
    assert answer[1].startswith("settled again after the late stages: ")
    assert "+102.0% vs tf32 xla=auto batch=64 spe=1, beyond the noise" in answer[1]
    assert res.best_settings is not None and res.best_settings.xla_options


def test_the_ladder_leaves_time_for_the_race_of_what_it_found(tmp_path: Path) -> None:
    """A model whose trials take a minute (its XLA compilation) under a budget that
    holds the same-training stages, one rung and a race, not three rungs and a race: the
    ladder stops at its first rung (said), which is raced and passes. Three rungs would
    have left the candidate unraced: a faster batch that proves nothing."""
    # 7 same-training trials (420 s), then what is left of 805 s: a rung of 60 s leaves
    # the 270 s kept for the race (2 x (60 + 1.25 x 60)); a second one would not
    res, stages, clock = clocked_tune(tmp_path / "t", 805.0, 60.0, 60.0, 130.0)
    assert stages[7:10] == ["batch offer", "race", "race"]
    assert stages[10:] == ["xla_options"]  # the 65 s the races left hold one more trial
    o = res.batch_offer
    assert o is not None and o.verdict == "passed" and o.batch == 256, o
    # the rung the race's time left out is said once, with why
    assert said(res, "batch offer")[1:3] == [
        "batch 256: +52% over batch 64",
        "the ladder stopped at batch 256: the budget's last 270 s are kept for its race (the "
        "same-training run and the candidate)",
    ]
    assert clock.now <= 805.0


def test_race_runs_measured_longer_than_reckoned_reckon_the_next(tmp_path: Path) -> None:
    """Trials of 40 s reckon a race run at 60 + 1.25 x 40 = 110 s; these take 180 s
    (their evaluations, say). After the first race (batch 256 passed), batch 512's run is
    reckoned at the 180 s measured, which the 140 s left do not hold: it is not started
    (said), 256's pass stands, and the tune ends inside its budget. A budget that holds
    it races it."""
    race = RaceByBatch(curve(12.0, 0.4), {512: FAST, 256: FAST})
    res, _, clock = clocked_tune(tmp_path / "short", 1180.0, 60.0, 40.0, 180.0, race=race)
    assert [s.batch_size for s, _ in race.calls] == [64, 256]
    assert clock.now <= 1180.0
    o = res.batch_offer
    assert o is not None and o.batch == 256 and o.verdict == "passed"
    assert said(res, "batch offer")[-1].startswith("batch 512 (from 64)")
    assert "not raced: the time budget was reached" in said(res, "batch offer")[-1]
    race = RaceByBatch(curve(12.0, 0.4), {512: FAST, 256: FAST})
    res, _, clock = clocked_tune(tmp_path / "long", 1220.0, 60.0, 40.0, 180.0, race=race)
    assert [s.batch_size for s, _ in race.calls] == [64, 256, 512] and clock.now <= 1220.0
    o = res.batch_offer
    assert o is not None and o.batch == 512 and o.verdict == "passed"


def test_a_race_run_read_again_counts_once_in_the_reckoning(tmp_path: Path) -> None:
    """The same-training run is read from the journal again for each later race of a
    bisection: its time counts once, beside the candidates' (100 s besides its race
    and 20 s besides theirs: 60 s on average, not 73)."""
    from tfaccel.tune.stages import batch_offer

    t = tuner(tmp_path, FakeTrials(), race_s=60.0)

    def run(key: str) -> TrialResult:
        return TrialResult(key, key, {}, "ok", samples_per_s=1.0)

    for key, wall in (("same", 160.0), ("512", 80.0), ("same", 160.0)):
        batch_offer._count_race_run(t, run(key), wall)
    assert batch_offer._race_run_s(t) == pytest.approx(60.0 + 60.0)


def test_a_race_starts_only_where_both_its_runs_fit(tmp_path: Path) -> None:
    """Ladder trials that take 150 s where the rest take 40 (compiling at a larger
    batch) leave 170 s, where a race is reckoned at two runs of 60 + 1.25 x mean: the
    same-training run is not started, as the candidate's would not fit after it (it
    once ran alone, a minute and more spent on a race that could not be judged)."""

    class SlowLadder(FakeTrials):
        def __call__(self, w: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
            if s.batch_size != 64:
                clock.now += 110.0
            return super().__call__(w, s, steps, timeout)

    race = RaceByBatch(curve(12.0, 0.4), {512: curve(60.0, 0.55), 256: FAST})
    clock = FakeClock()
    fake = SlowLadder(extra={"no_race": None, **ADAM})
    opts = options(time_budget_s=1180.0, race_s=60.0)
    trial_fn, race_fn = clock.taking(40.0, fake), clock.taking(100.0, race)
    res = clocked_tuner(tmp_path, opts, clock, trial_fn, race_fn).run()
    assert race.calls == [] and clock.now <= 1180.0
    o = res.batch_offer
    assert o is not None and o.batch == 256 and o.verdict == "unproven"
    assert o.why.startswith("not raced: the time budget was reached")


def _tune_of_a_minute_a_trial(tmp_path: Path, budget_s: float) -> tuple[Any, FakeTrials]:
    tmp_path.mkdir()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    clock = FakeClock()
    opts = options(time_budget_s=budget_s, race_s=60.0)
    fake = FakeTrials(extra={"no_race": None, **ADAM})
    res = Tuner(
        "w", H200, opts, j, trial_fn=clock.taking(60.0, fake), clock=clock, race_fn=FakeRace([], [])
    ).run()
    return res, fake


def test_a_budget_with_no_room_for_a_rung_and_its_race_says_so(tmp_path: Path) -> None:
    """Trials of a minute and races of 60 s: a rung and its race are reckoned at 60 + 2
    x (60 + 1.25 x 60) = 330 s. After 420 s of same-training trials, a budget of 710 s
    leaves 290: keeping them for the offer would only put the late stages off (it once
    kept them, then the ladder found them short), so none is kept, said; the late
    trials run; no ladder trial runs, and the note says about how much more it needed.
    A budget of 760 s leaves 340: kept, and the ladder's rung runs."""
    res, fake = _tune_of_a_minute_a_trial(tmp_path / "short", 710.0)
    assert all(s.batch_size == 64 for s in fake.calls)
    assert len(fake.calls) == 11  # the seven same-training trials and four late ones
    assert res.batch_offer is None
    assert said(res, "time budget")[0] == (
        "none kept for the batch offer: the 290 s left cannot hold a ladder trial and its "
        "race (about 330 s); the late stages have them"
    )
    # 50 s left where 330 s are wanted
    assert res.batch_note == (
        "not tried: the time budget leaves too little for a ladder trial and its race "
        "(about 280 s more: a longer --time-budget, or a shorter --race)"
    )
    res, fake = _tune_of_a_minute_a_trial(tmp_path / "long", 760.0)
    assert [s.batch_size for s in fake.calls].count(256) == 1
    assert said(res, "time budget")[0].startswith(
        "7 trial(s) not run: the budget's last 340 s were kept for the batch offer's"
    )
    assert res.batch_offer is not None and res.batch_offer.batch == 256


def test_a_resumed_tune_reckons_its_budget_with_the_journaled_trials_times(
    tmp_path: Path,
) -> None:
    """A tune resumed from its journal runs none of its same-training trials again, and
    its budget's estimates (a ladder trial's time, a race run's) take the times the
    journal recorded for them: reckoned with none, a ladder trial and its race look
    nearly free, and start in whatever the budget has left."""
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    fake = FakeTrials(extra={"no_race": None, **ADAM})

    def a_minute(*args: Any, **kwargs: Any) -> TrialResult:
        return dataclasses.replace(fake(*args, **kwargs), wall_s=60.0)

    Tuner("w", H200, options(race_s=0.0, max_batch=64), j, trial_fn=a_minute).run()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    calls = len(fake.calls)
    clock = FakeClock()
    opts = options(time_budget_s=200.0, race_s=60.0)
    race = FakeRace(HALF_AT_20, HALF_AT_10)
    resumed = Tuner("w", H200, opts, j, trial_fn=a_minute, race_fn=race, clock=clock).run()
    assert resumed.resumed > 0 and len(fake.calls) == calls  # nothing ran again
    # a rung of 60 s and two race runs of 60 + 1.25 x 60 s, from 0 s used of 200
    assert resumed.batch_note == (
        "not tried: the time budget leaves too little for a ladder trial and its race "
        "(about 130 s more: a longer --time-budget, or a shorter --race)"
    )


def test_a_candidate_that_touches_the_target_once_and_climbs_fails() -> None:
    """Its training loss falls throughout, but its validation loss reaches the target in
    one smoothed evaluation only, then climbs away: the noise of one evaluation is no
    proof it got there (a CPU race of SGD at 64x its batch did this), so no pass."""
    same = [(float(t), max(0.5, 1.0 - 0.025 * t)) for t in range(0, 61, 5)]  # 0.5 at 20 s
    dip = [1.0, 0.7, 0.5, 0.45, 0.55, 0.7, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    falling = [1.0 - 0.07 * i for i in range(13)]
    cand = [(5.0 * i, value, None if i == 0 else falling[i]) for i, value in enumerate(dip)]
    race = offer.race_of(60.0, "", same, cand)
    assert race.candidate_s == 20.0 and race.same_s is not None and race.same_s > 25
    found = offer.BatchOffer(
        Settings(batch_size=2048), TrialResult("k", "l", {}, "ok"), 32, 2.0, change_for(64, "SGD")
    )
    judged = offer.judged(found, race, 5.0)
    assert judged.verdict == "failed"  # said as what it is: overfitting, not a large rate
    assert judged.why.endswith(
        "it holds the target for one evaluation only, then its validation loss rises while "
        "its training loss still falls (it overfits): one evaluation at the target is no "
        "proof it got there"
    )


def test_a_race_whose_same_training_run_learns_nothing_proves_nothing() -> None:
    """Both runs at chance (a model that cannot fit its data, or a race too short): the
    target is the first reading, which both "reach" at once; no verdict either way."""
    chance = [(float(t), 0.6932 + 0.002 * (t % 10 == 5)) for t in range(0, 61, 5)]
    race = offer.race_of(60.0, "", chance, chance)
    assert race.same_s == 0.0 and race.candidate_s == 0.0
    found = offer.BatchOffer(
        Settings(batch_size=256), TrialResult("k", "l", {}, "ok"), 64, 1.1, change_for(4, "Adam")
    )
    judged = offer.judged(found, race, 5.0)
    assert judged.verdict == "unproven"
    assert "never fell below its first reading (0.6932) in the 60 s race" in judged.why


def test_a_race_to_numerical_zero_says_so() -> None:
    """A task the same-training run solves outright: the verdict stands, and says its
    target is about zero; an ordinary target says nothing of it."""
    found = offer.BatchOffer(
        Settings(batch_size=256), TrialResult("k", "l", {}, "ok"), 64, 3.0, change_for(4, "Adam")
    )
    same = [(float(t), 0.69 * 10.0 ** (-t / 5)) for t in range(0, 61, 5)]
    fast = [(float(t), 0.69 * 10.0 ** (-t / 2.5)) for t in range(0, 61, 5)]
    judged = offer.judged(found, offer.race_of(60.0, "", same, fast), 5.0)
    assert judged.verdict == "passed"
    assert "drove the validation loss to about zero" in judged.why
    same = [(float(t), 0.69 - 0.004 * t) for t in range(0, 61, 5)]
    fast = [(float(t), 0.69 - 0.008 * t) for t in range(0, 61, 5)]
    judged = offer.judged(found, offer.race_of(60.0, "", same, fast), 5.0)
    assert judged.verdict == "passed" and "about zero" not in judged.why


def test_an_offers_other_settings_are_checked_as_settings(tmp_path: Path) -> None:
    from tfaccel.errors import ConfigFileError
    from tfaccel.tune.output import read_answer

    def offered(other: Any) -> Any:
        doc = {
            "schema": "tfaccel.settings/1",
            "answer": "same_training",
            "settings": {"precision": "tf32", "rnn_algorithm": "persist_dynamic"},
            "batch_offer": {
                "batch_size": 512,
                "from_batch_size": 32,
                "learning_rate": change_for(16, "Adam").to_dict(),
                "verdict": "passed",
                "why": "reaches it 3x sooner",
                "other_settings": other,
            },
        }
        path = tmp_path / "tfaccel.json"
        path.write_text(json.dumps(doc))
        return read_answer(path, batch_offer=True)

    assert offered(None).settings.rnn_algorithm == "persist_dynamic"  # an older file
    with pytest.raises(ConfigFileError, match="Unknown rnn_algorithm"):
        offered({"rnn_algorithm": "fastest"})
    with pytest.raises(ConfigFileError, match="malformed"):
        offered({"batch_size": 1024})
    with pytest.raises(ConfigFileError, match="malformed"):
        offered(["rnn_algorithm"])


def test_an_offer_of_a_replayed_same_training_trial_differs_only_where_it_does() -> None:
    """The same-training trial read back from a journal has its settings as JSON gives
    them (lists for tuples, no field added since): no difference is made of that."""
    answer = Settings(precision="tf32", xla_options=("cublaslt",), rnn_algorithm="persist_dynamic")
    line = json.loads(json.dumps(answer.to_dict()))
    del line["device_arrays"]  # a journal written before the field
    same = TrialResult("k", "same", line, "ok", samples_per_s=1000.0)
    rung = answer.replace(batch_size=512, rnn_algorithm="default")
    cand = TrialResult("k2", "rung", rung.to_dict(), "ok", samples_per_s=4000.0)
    made = offer.make(dataclasses.replace(same, extra=ADAM), cand, rung, None)
    assert made.other_settings == {"rnn_algorithm": "default"}


def test_ctrl_c_during_a_race_leaves_the_offer_unproven_and_the_answer_settled(
    tmp_path: Path,
) -> None:
    class CtrlC(FakeRace):
        def __call__(self, *args: Any) -> TrialResult:
            raise KeyboardInterrupt

    res = tune(tmp_path, CtrlC(same=HALF_AT_20, candidate=HALF_AT_10))
    assert res.interrupted and res.best is not None
    o = res.batch_offer
    assert o is not None and o.verdict == "unproven"
    assert o.why.startswith("not raced: interrupted (Ctrl-C or SIGTERM)")


class FasterAllocator(FakeTrials):
    """CUDA's asynchronous allocator (with device prefetch, one trial) pays 1.2x."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if not r.ok or s.allocator == "default":
            return r
        rate = (r.samples_per_s or 0.0) * 1.2
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


def test_the_time_the_races_leave_runs_the_late_stages_and_the_offer_stays_as_raced(
    tmp_path: Path,
) -> None:
    """The late knobs gave way to the time kept for the offer; the races end with room
    left: the late stages run then, the allocator wins and joins the same-training
    answer, and the offer keeps the settings it was raced with (`run --batch-offer`
    applies those) and its speed-up of the answer it was raced against."""
    from tfaccel.tune.output import read_answer, settings_document, to_target_over_defaults

    fake = FasterAllocator(extra={"no_race": None, **ADAM})
    res, stages, clock = clocked_tune(tmp_path / "t", 1830.0, 60.0, 100.0, 160.0, fake)
    assert stages.index("allocator + prefetch") > stages.index("race") and clock.now <= 1830.0
    o, answer = res.batch_offer, res.best_settings
    assert o is not None and o.verdict == "passed" and answer is not None
    assert answer.allocator == "cuda_malloc_async" and o.settings.allocator == "default"
    assert o.other_settings == {"allocator": "default", "prefetch": "auto"}
    path = tmp_path / "tfaccel.json"
    path.write_text(json.dumps(settings_document(res)))
    assert read_answer(path, batch_offer=True).settings == o.settings
    raced_against = (o.trial.samples_per_s or 0.0) / o.samples_speedup
    same = res.speedup(res.keras_defaults)
    assert same is not None and res.keras_defaults is not None
    assert res.best is not None and raced_against < (res.best.samples_per_s or 0.0)
    expected = raced_against / (res.keras_defaults.samples_per_s or 1.0) * 1.5
    assert to_target_over_defaults(res) == pytest.approx(expected) and expected > same


def _drawn(race: Race, verdict: str) -> tuple[Any, Any]:
    """A figure and its axes with `race` drawn as tune's plot draws a batch 128's
    (from 32) race."""
    from types import SimpleNamespace

    from tfaccel.render.tune import race_axes

    shown = SimpleNamespace(
        race=race, from_batch=32, batch=128, verdict=verdict, lr=change_for(4.0, "Adam")
    )
    fig = pyplot().figure()
    ax = fig.add_subplot()
    race_axes(ax, shown)
    return fig, ax


@pytest.mark.parametrize(("first", "scale"), [(13.5, "log"), (0.5, "linear")])
def test_a_race_whose_first_reading_dwarfs_the_rest_is_drawn_on_a_log_scale(
    first: float, scale: str
) -> None:
    """A first reading (the initial weights') of 13.5 beside losses of 0.05-0.2 drew
    both runs as one flat line at the bottom of a linear axis."""
    same = [[0.0, first], [2.0, 0.2], [4.0, 0.1], [6.0, 0.08]]
    candidate = [[0.0, first], [2.0, 0.15], [4.0, 0.07], [6.0, 0.06]]
    race = offer.race_of(6.0, "the script's validation_data", same, candidate)
    fig, ax = _drawn(race, "passed")
    assert ax.get_yscale() == scale
    assert ax.get_ylabel().endswith("(log scale)") is (scale == "log")
    pyplot().close(fig)


def test_a_race_request_without_setters_keeps_its_journal_key() -> None:
    """A race's journal key is of its learning-rate dict: one of no callbacks is written
    as before `setters` existed, so a resumed tune finds the races of older journals."""
    plain = change_for(4.0, "Adam", steps_per_epoch=30).to_dict()
    assert set(plain) == {"rule", "scale", "warmup_steps", "optimizer", "note"}
    named = change_for(4.0, "Adam", steps_per_epoch=30, setters=("ReduceLROnPlateau",))
    assert named.to_dict()["setters"] == ["ReduceLROnPlateau"]


# The bidirectional LSTM script's race of batch 128 on an H100 (2026-12-06,
# benchmarks/results/ttt-bidirectional-lstm-h100-again): (seconds, validation loss) of
# each run, and the candidate's training loss.
LSTM_SAME = [(0, 0.6928), (5, 0.5272), (10, 0.5275), (15, 0.5028), (20, 0.4626), (25, 0.3159),
             (30, 0.4342), (35, 0.3167), (40, 0.2875), (45, 0.2638), (50, 0.2336), (55, 0.221),
             (60, 0.259)]  # fmt: skip
LSTM_128 = [(0, 0.6928, None), (5, 0.5029, 0.494), (10, 0.3588, 0.3748), (15, 0.5473, 0.2401),
            (20, 0.2545, 0.144), (25, 0.2376, 0.0925), (30, 0.2459, 0.0362), (35, 0.3301, 0.0143),
            (40, 0.3046, 0.015), (45, 0.3531, 0.0019), (50, 0.3817, 0.0041),
            (55, 0.422, 0.0029), (60, 0.4131, 0.0007)]  # fmt: skip


def test_a_candidate_that_came_close_and_overfit_says_how_close() -> None:
    """One evaluation of the candidate (0.2376 at 25 s) is under the target (0.2379, the
    same-training run's best mean of three), but its mean of three never is (0.2460 at
    30 s): it fails, and says how close it came and that it then overfit, so that a
    user reading the plot's dip knows why it is no pass."""
    race = offer.race_of(60.0, "", LSTM_SAME, LSTM_128)
    assert race.target == pytest.approx(0.2379, abs=1e-4) and race.candidate_s is None
    found = offer.BatchOffer(
        Settings(batch_size=128), TrialResult("k", "l", {}, "ok"), 32, 3.7, change_for(4, "Adam")
    )
    judged = offer.judged(found, race, 5.0)
    assert judged.verdict == "failed"
    assert judged.why.endswith(
        "(its best, 0.246 at 30 s, 3% above it; each reading the mean of up to 3 "
        "evaluations, as the target's); then its validation loss rose while its training "
        "loss fell: it overfits"
    )


def test_a_races_plot_draws_the_curves_the_race_judges() -> None:
    """The LSTM's batch 128 (above) drawn: each run's line is its mean of three, which
    the verdict reads, so the failed candidate's line stays above the dotted target
    where one of its dots dips under it; the dots are the evaluations."""
    race = offer.race_of(60.0, "the script's validation_data", LSTM_SAME, LSTM_128)
    fig, ax = _drawn(race, "failed")
    candidate = [line for line in ax.get_lines() if line.get_label().startswith("batch 128")]
    (line,) = candidate
    (dots,) = [x for x in ax.get_lines() if x.get_color() == line.get_color() and x is not line]
    assert race.target is not None
    assert min(line.get_ydata()) > race.target > min(dots.get_ydata())
    assert list(line.get_ydata()) == [v for _, v in offer.smoothed(race.candidate)]
    assert "lines: the mean of up to 3 evaluations" in ax.get_xlabel()
    pyplot().close(fig)
