"""Tune's journal: trials keyed, resumed, refused, run again; the time budget; a resume
on another machine."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, label_of, settings_key
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import TuneOptions
from tfaccel.tune.search import Tuner

from .fakes import (
    H200,
    STEPS,
    FakeClock,
    FakeTrials,
    XlaDefaults,
    options,
    said,
    tuner,
)


def test_a_trials_key_is_every_setting_and_the_plan_but_not_the_window_bound() -> None:
    s = Settings(precision="float32", xla="off", batch_size=256, steps_per_execution=1)
    key = settings_key("resnet50", s, StepPlan())
    for change in ({"input_cast": "compute"}, {"dropout": "philox16"}, {"float8": True}):
        assert settings_key("resnet50", s.replace(**change), StepPlan()) != key
    assert settings_key("resnet50", s, StepPlan(windows=6)) != key
    # Bounding a window's seconds measures the same thing, faster: the key stays.
    assert settings_key("resnet50", s, StepPlan(window_s=3.0)) == key


def test_a_journal_of_another_version_or_kind_is_refused_before_any_trial(
    tmp_path: Path,
) -> None:
    from tfaccel.errors import ConfigFileError

    old = tmp_path / "old.jsonl"
    old.write_text('{"schema": "tfaccel.tune-journal/1", "workload": "w", "result": {}}\n')
    with pytest.raises(ConfigFileError, match="written by another version of tfaccel") as e:
        Journal(old).load("w")
    assert e.value.hint and "--fresh --force" in e.value.hint
    for text in ('[1, 2]\n{"a": 1}\n', '"x"\n\n', "\x00\x01 garbage\nmore\n"):
        other = tmp_path / "other.jsonl"
        other.write_text(text)
        with pytest.raises(ConfigFileError):
            Journal(other).load("w")


def test_a_torn_last_line_is_skipped_and_the_next_trial_starts_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path)
    j.load("w")
    r = TrialResult("k1", "l", {}, "ok", samples_per_s=1.0, windows=(1.0, 1.0))
    j.append("w", r)
    with path.open("a") as fh:
        fh.write('{"schema": "tfaccel.tune-jou')  # an interrupted write
    again = Journal(path)
    assert again.load("w") == 1
    again.append("w", dataclasses.replace(r, key="k2"))
    third = Journal(path)
    assert third.load("w") == 2  # nothing poisoned: the torn line was cut off
    assert len(path.read_text().splitlines()) == 2


def test_a_trial_killed_at_a_shorter_timeout_runs_again_with_a_longer_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    first = Journal(path)
    first.load("w")
    slow = FakeTrials()
    killed = lambda w, s, p, t: TrialResult(  # noqa: E731
        settings_key(w, s, p), label_of(s), s.to_dict(), "timeout", wall_s=t
    )
    opts = options(timeout_s=1.0)
    Tuner("w", H200, opts, first, trial_fn=killed).run()
    second = Journal(path)
    second.load("w")
    longer = options(timeout_s=600.0)
    res = Tuner("w", H200, longer, second, trial_fn=slow).run()
    assert slow.calls and res.baseline is not None and res.baseline.ok


def test_a_workload_revision_keeps_its_old_trials_from_resuming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A built-in workload that trains differently now (bert_hub's optimizer) gets new
    keys; the others keep theirs."""
    from tfaccel import workloads

    s = Settings(precision="float32", xla="off", batch_size=128, steps_per_execution=1)
    now = {w: settings_key(w, s, StepPlan()) for w in ("bert_hub", "gpt2", "resnet50")}
    monkeypatch.setattr("tfaccel.trial.runner.REVISION", {})
    before = {w: settings_key(w, s, StepPlan()) for w in ("bert_hub", "gpt2", "resnet50")}
    assert now["resnet50"] == before["resnet50"]
    assert now["bert_hub"] != before["bert_hub"] and now["gpt2"] != before["gpt2"]
    assert workloads.REVISION["bert_hub"] >= 2


def test_resume_runs_no_finished_trial_twice(tmp_path: Path) -> None:
    first = FakeTrials()
    res1 = tuner(tmp_path, first).run()
    again = FakeTrials()
    res2 = tuner(tmp_path, again).run()
    assert again.calls == []
    assert res2.resumed == len(res1.trials)
    assert res2.best_settings == res1.best_settings


def test_trials_of_an_edited_entry_point_are_measured_again(tmp_path: Path) -> None:
    def run(fingerprint: str | None) -> tuple[FakeTrials, Journal]:
        j = Journal(tmp_path / "j.jsonl", fingerprint=fingerprint)
        j.load("w")
        trials = FakeTrials()
        Tuner("w", H200, options(), j, trial_fn=trials).run()
        return trials, j

    first, _ = run("sha256:aaaa model.py")
    same, j = run("sha256:aaaa model.py")
    assert same.calls == [] and j.stale == 0
    edited, j = run("sha256:bbbb model.py")
    assert len(edited.calls) == len(first.calls) and j.stale == len(first.calls)
    # and the newest measurements are the ones a later run with that file replays
    again, j = run("sha256:bbbb model.py")
    assert again.calls == [] and j.stale == len(first.calls)


def test_failed_trials_are_run_again_and_out_of_memory_is_kept(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    for key, status in (("a", "error"), ("b", "oom"), ("c", "timeout"), ("d", "ok")):
        j.append("w", TrialResult(key, key, {}, status, samples_per_s=1.0))
    again = Journal(tmp_path / "j.jsonl")
    assert again.load("w") == 3 and set(again.results) == {"b", "c", "d"}
    assert again.retried == 1


def test_interrupted_tune_keeps_finished_trials(tmp_path: Path) -> None:
    class Boom(FakeTrials):
        def __call__(self, *a: object) -> TrialResult:  # type: ignore[override]
            if len(self.calls) == 3:
                raise KeyboardInterrupt
            return super().__call__(*a)  # type: ignore[arg-type]

    with contextlib.suppress(KeyboardInterrupt):
        tuner(tmp_path, Boom()).run()
    j = Journal(tmp_path / "j.jsonl")
    assert j.load("w") == 3
    rest = FakeTrials()
    tuner(tmp_path, rest).run()
    assert len(rest.calls) > 0 and all(
        settings_key("w", s, STEPS) not in {k for k in list(j.results)[:3]} for s in rest.calls
    )


def test_time_budget_stops_new_trials_and_resume_goes_on(tmp_path: Path) -> None:
    """Each fake trial takes 100 s of a fake clock; with a 550 s budget no trial starts
    that would likely end past it. The best so far is the result, the journal resumes."""
    clock = FakeClock()

    def make(fake: FakeTrials, budget: float | None) -> Tuner:
        j = Journal(tmp_path / "j.jsonl")
        j.load("w")
        opts = options(time_budget_s=budget)
        return Tuner("w", H200, opts, j, trial_fn=clock.taking(100.0, fake), clock=clock)

    first = FakeTrials()
    res = make(first, 550.0).run()
    assert len(first.calls) == 5  # 5 x 100 s; a sixth would end at 600 s
    assert res.best is not None and res.best.ok
    budget = [d for d in res.decisions if d.stage == "time budget"]
    assert budget and "9.2-minute budget" in budget[0].text and "again" in budget[0].text
    j = Journal(tmp_path / "j.jsonl")
    assert j.load("w") == 5  # skipped trials are not journaled
    rest = FakeTrials()
    full = make(rest, None).run()
    assert len(rest.calls) > 0 and not any(d.stage == "time budget" for d in full.decisions)
    assert full.best_settings is not None and full.best_settings.input_cast == "compute"


def test_a_trial_running_at_the_budgets_end_is_stopped_there(tmp_path: Path) -> None:
    """A trial that hangs (the U-Net's batch 2048 on the H200 filled the GPU and reached
    no timed window in six minutes; here the steps_per_execution trial) gets what is
    left of the budget, not --timeout; the resumed tune runs it again."""
    now = [0.0]
    timeouts: list[float] = []

    class Hangs(FakeTrials):
        def __call__(self, w: str, s: Settings, p: StepPlan, t: float) -> TrialResult:
            timeouts.append(t)
            if s.steps_per_execution == 1:
                now[0] += 60.0
                return super().__call__(w, s, p, t)
            now[0] += t
            key = settings_key(w, s, p)
            return TrialResult(
                key, label_of(s), s.to_dict(), "timeout", error=f"killed after {t:.0f} s", wall_s=t
            )

    def make(budget: float | None) -> Tuner:
        j = Journal(tmp_path / "j.jsonl")
        j.load("w")
        opts = options(time_budget_s=budget, timeout_s=600.0)
        return Tuner("w", H200, opts, j, trial_fn=Hangs(oom_above=4096), clock=lambda: now[0])

    res = make(600.0).run()
    # baseline and defaults (--timeout: they run whatever the budget), each precision
    # with and without XLA (60 s each, each given what is left of the budget), then
    # steps_per_execution: given the last 240 s
    assert timeouts == [600.0, 600.0, 480.0, 420.0, 360.0, 300.0, 240.0]
    assert now[0] == 600.0
    (stopped,) = said(res, "steps_per_execution + input_cast")
    assert stopped.endswith("timeout (killed after 240 s: stopped at the time budget)")
    assert res.best_settings is not None and res.best_settings.precision == "mixed_bfloat16"
    now[0] = 0.0
    timeouts.clear()
    make(None).run()
    assert timeouts[0] == 600.0  # the stopped trial, run again first


def test_a_budget_shorter_than_the_first_trial_still_measures_it(tmp_path: Path) -> None:
    """The budget bounds trials only once the baseline and Keras' defaults were
    measured: both run to their end past a shorter budget, and the answer is at least
    Keras' defaults (here they are faster than the baseline: they are the answer)."""
    now = [0.0]
    timeouts: list[float] = []

    class Slow(FakeTrials):
        def __call__(self, w: str, s: Settings, p: StepPlan, t: float) -> TrialResult:
            timeouts.append(t)
            now[0] += 45.0
            return super().__call__(w, s, p, t)

    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = options(time_budget_s=30.0, timeout_s=600.0)
    res = Tuner("w", H200, opts, j, trial_fn=Slow(), clock=lambda: now[0]).run()
    assert timeouts == [600.0, 600.0]  # the baseline and the defaults; nothing after
    assert res.best is not None and res.best is res.keras_defaults
    (note,) = said(res, "time budget")
    assert "not run: the 30-second budget was reached" in note


def test_counting_flops_leaves_the_journal_key_alone() -> None:
    s = Settings(precision="float32", xla="off", batch_size=256, steps_per_execution=1)
    plain = settings_key("resnet50", s, StepPlan())
    assert settings_key("resnet50", s, StepPlan(), {"count_flops": True}) == plain


class OtherMachine(FakeTrials):
    """The same GPU model on another host: every trial 5 % slower; cuBLASLt +4 %."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        rate = (r.samples_per_s or 0) * 0.95 * (1.04 if "cublaslt" in s.xla_options else 1.0)
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), spread=0.0)


def _journal_without_gpu_knobs(tmp_path: Path, machine: str | None) -> Path:
    """A finished tune's journal (measured on `machine`) without its last stage's trials,
    as a tune stopped by its time budget leaves it."""
    path = tmp_path / "j.jsonl"
    j = Journal(path, machine=machine)
    j.load("w")
    Tuner(
        "w",
        H200,
        options(),
        j,
        trial_fn=FakeTrials(),
    ).run()
    lines = path.read_text().splitlines()
    keep = [x for x in lines if '"xla_options": []' in x and '"allocator": "default"' in x]
    keep = [x for x in keep if '"prefetch": "auto"' in x]
    assert 0 < len(keep) < len(lines)
    if machine is None:  # a journal of a version before machines were recorded
        keep = [x.replace(', "machine": null', "") for x in keep]
    path.write_text("\n".join(keep) + "\n")
    return path


@pytest.mark.parametrize("first", ["host-a/boot-1/gpus=all", None])
def test_a_resume_on_another_machine_measures_its_reference_again(
    tmp_path: Path, first: str | None
) -> None:
    path = _journal_without_gpu_knobs(tmp_path, first)
    here = "host-b/boot-7/gpus=all"
    j = Journal(path, machine=here)
    j.load("w")
    trials = OtherMachine()
    res = Tuner("w", H200, options(), j, trial_fn=trials).run()
    # The first new trial (cuBLASLt) met a best of the other machine: that best ran here
    # right after it, and cuBLASLt's +4 % over it is kept (against the other machine's
    # figure it read -1 %, under the threshold).
    assert trials.calls[0].xla_options == ("cublaslt",)
    best_before = trials.calls[1]
    assert best_before == trials.calls[0].replace(xla_options=())
    assert res.best_settings is not None and "cublaslt" in res.best_settings.xla_options
    again = said(res, "resume")
    assert len(again) == 1 and "measured again on this machine" in again[0]
    assert "xla_options" in [d.stage for d in res.decisions]
    assert said(res, "xla_options")[0] == "cublaslt: +4% kept"
    # The journal keeps the other machine's figure and adds this one's.
    key = settings_key("w", best_before, STEPS)
    j2 = Journal(path, machine=here)
    j2.load("w")
    theirs, ours = j2.results[key], j2.on(key, here)
    assert not j2.here(key) and ours is not None and ours is not theirs
    assert ours.samples_per_s == pytest.approx(0.95 * (theirs.samples_per_s or 0))
    # A resume on this machine now measures nothing again.
    replay = FakeTrials()
    Tuner("w", H200, options(), j2, trial_fn=replay).run()
    assert replay.calls == []


def test_measuring_again_keeps_to_the_time_budget(tmp_path: Path) -> None:
    """A resume on another machine whose budget is spent by its first new trial does not
    measure the reference again: it compares with the other machine's figure and says
    so, and counts the run it left out."""
    path = _journal_without_gpu_knobs(tmp_path, "host-a/boot-1/gpus=all")
    j = Journal(path, machine="host-b/boot-7/gpus=all")
    j.load("w")
    clock = FakeClock()
    trials = OtherMachine()
    opts = options(time_budget_s=150.0)
    slow = clock.taking(100.0, trials)
    res = Tuner("w", H200, opts, j, trial_fn=slow, clock=clock).run()
    assert len(trials.calls) == 1 and trials.calls[0].xla_options == ("cublaslt",)
    notes = said(res, "resume")
    assert len(notes) == 1 and "its earlier figure is used" in notes[0]
    budget = next(d.text for d in res.decisions if d.stage == "time budget")
    assert "trial(s) not run" in budget and "2.5-minute budget" in budget


def test_a_resume_on_the_same_machine_measures_nothing_again(tmp_path: Path) -> None:
    machine = "host-a/boot-1/gpus=all"
    path = _journal_without_gpu_knobs(tmp_path, machine)
    j = Journal(path, machine=machine)
    j.load("w")
    trials = FakeTrials()
    res = Tuner("w", H200, options(), j, trial_fn=trials).run()
    assert not [d for d in res.decisions if d.stage == "resume"]
    assert all(
        s.xla_options or s.allocator != "default" or s.prefetch != "auto" for s in trials.calls
    )


def test_machine_id_names_host_boot_and_visible_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel.environment import machine_id

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    one = machine_id()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert one.endswith("/gpus=1") and machine_id() != one
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert machine_id().endswith("/gpus=all")


def test_the_speedup_over_keras_defaults_compares_figures_of_one_machine(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    a = Journal(path, machine="host-a")
    a.load("w")
    first = Tuner(
        "w",
        H200,
        options(),
        a,
        trial_fn=FakeTrials(),
    )
    res = first.run()
    assert res.best is not None and res.keras_defaults is not None
    # Another machine measured both again (a confirmation there): best 5 % slower,
    # defaults 10 % slower.
    g = Journal(path, machine="host-g")
    g.load("w")
    for r, f in ((res.best, 0.95), (res.keras_defaults, 0.90)):
        rate = (r.samples_per_s or 0) * f
        g.append_again("w", dataclasses.replace(r, samples_per_s=rate, windows=(rate,)))
    for here, factor in (("host-a", 1.0), ("host-g", 0.95 / 0.90), ("host-new", 1.0)):
        j = Journal(path, machine=here)
        j.load("w")
        assert j.machines(res.best.key) == ["host-a", "host-g"]
        replay = FakeTrials()
        again = Tuner("w", H200, options(), j, trial_fn=replay).run()
        assert replay.calls == []
        # this machine's figures where it has both; else the first machine that has both
        want = (res.speedup(res.keras_defaults) or 0) * factor
        assert again.speedup(again.keras_defaults) == pytest.approx(want)


def test_a_speedup_across_two_machines_is_named_as_such(tmp_path: Path) -> None:
    """Resumed on another machine, the tune's new best is measured here while Keras'
    defaults and the baseline stay the other machine's figures: the speedups over them
    compare two machines, and the result, its text and tfaccel.json say so; a
    confirmation measures the defaults and the best here."""
    from rich.console import Console

    from tfaccel.render.tune import tune_text
    from tfaccel.tune.output import settings_document

    path = _journal_without_gpu_knobs(tmp_path, "host-a/boot-1/gpus=all")
    for confirm in (0, 1):
        j = Journal(path, machine=f"host-b/boot-{confirm}/gpus=all")
        j.load("w")
        opts = options(confirm=confirm)
        res = Tuner("w", H200, opts, j, trial_fn=OtherMachine()).run()
        assert res.best_settings is not None and "cublaslt" in res.best_settings.xla_options
        assert res.other_machine == ["baseline", "keras_defaults"]
        assert settings_document(res)["measured"]["speedups_across_machines"] == [
            "baseline",
            "keras_defaults",
        ]
        console = Console(record=True, width=200)
        tune_text(res, console)
        text = console.export_text()
        assert "measured on another machine than the best's" in text
        hint = "--confirm 1 measures both here, back to back" in text
        assert hint is (confirm == 0)
        if confirm:
            assert len(res.confirmations) == 1 and res.confirmed_speedup is not None
    # Resumed on the first machine with every trial in the journal: one machine, no flag.
    path2 = tmp_path / "one.jsonl"
    a = Journal(path2, machine="host-a")
    a.load("w")
    first = Tuner(
        "w",
        H200,
        options(),
        a,
        trial_fn=FakeTrials(),
    )
    assert first.run().other_machine == []
    again = Journal(path2, machine="host-a")
    again.load("w")
    replay = Tuner(
        "w",
        H200,
        options(),
        again,
        trial_fn=FakeTrials(),
    )
    assert replay.run().other_machine == []


def test_a_time_budget_keeps_the_largest_win_first(tmp_path: Path) -> None:
    clock = FakeClock()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = options(time_budget_s=4 * 60.0)
    timed = clock.taking(60.0, XlaDefaults())
    res = Tuner("w", H200, opts, j, trial_fn=timed, clock=clock).run()
    assert len(res.trials) == 4  # baseline, defaults, bf16 + XLA, batch 256
    assert res.best_settings is not None and res.best_settings.precision == "mixed_bfloat16"
    assert res.speedup(res.keras_defaults) is not None
    assert res.speedup(res.keras_defaults) > 2  # type: ignore[operator]


def test_the_count_from_the_journal_is_what_this_tune_took_from_it(tmp_path: Path) -> None:
    """A journal holding other trials of the workload (another step plan) gives this
    tune nothing: 0 from the journal; the same tune again takes every trial from it."""
    first = tuner(tmp_path, FakeTrials()).run()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    other = dataclasses.replace(STEPS, windows=STEPS.windows + 1)
    opts = TuneOptions(batch_size=64, steps=other)
    assert Tuner("w", H200, opts, j, trial_fn=FakeTrials()).run().resumed == 0
    again = tuner(tmp_path, FakeTrials()).run()
    assert first.resumed == 0 and again.resumed == len(again.trials) > 0
    # what a resumed tune says it measured is what it measured now: nothing here
    assert first.compile_s_total > 0 and again.measured == [] and again.compile_s_total == 0
