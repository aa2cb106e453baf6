"""The whole search: its order, its answer (never below Keras' defaults), the confirmation
rounds, the trial estimate, the plot, and the tables that extend it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, beats
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import TuneResult
from tfaccel.tune.search import Tuner, estimate_trials

from .fakes import (
    H200,
    FakeTrials,
    XlaDefaults,
    options,
    said,
    same,
    tuner,
)


def test_finds_the_fastest_combination(tmp_path: Path) -> None:
    res = tuner(tmp_path, FakeTrials()).run()
    assert res.best_settings is not None
    s = res.best_settings
    # the same-training answer keeps the user's batch; the larger one is an offer
    assert (s.precision, s.xla, s.batch_size, s.steps_per_execution) == (
        "mixed_bfloat16",
        "jit",
        64,
        25,
    )
    # synthetic data cannot show what a larger batch does to the training: no batch
    # change could be offered, so no larger batch is tried, and the note says why
    assert res.batch_offer is None and res.batch_note is not None
    assert res.batch_note == "its data is synthetic: no batch change is offered, so none is tried"
    assert res.baseline is not None and res.baseline.settings["xla"] == "off"
    assert res.keras_defaults is not None and res.keras_defaults.settings["xla"] == "auto"
    assert res.speedup(res.baseline) is not None and res.speedup(res.baseline) > 5  # type: ignore[operator]
    assert res.largest_fitting_batch == 64
    assert res.compile_s_total > 60
    # steps_per_execution (the longest first) and input_cast, in one trial: it won, so
    # neither alone nor the shorter execution is tried.
    assert said(res, "steps_per_execution + input_cast") == [
        "spe=25, input_cast=compute, together: +32% kept"
    ]
    assert said(res, "steps_per_execution") == said(res, "input_cast") == []
    # and each decision names what it was compared with
    full = [d.text for d in res.decisions if d.stage == "steps_per_execution + input_cast"]
    assert full[0].endswith(", against mixed_bfloat16 xla=jit batch=64 spe=1")


def test_rare_gpu_knobs_come_last(tmp_path: Path) -> None:
    stages: list[str] = []
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = options()
    t = Tuner(
        "w",
        H200,
        opts,
        j,
        trial_fn=FakeTrials(),
        on_trial=lambda st, r, s: stages.append(st) if r is None else None,
    )
    t.run()
    assert [x for x in stages if x != "batch offer"][-8:] == [
        "steps_per_execution + input_cast",
        "xla_options",
        "xla_options",
        "allocator + prefetch",  # one trial: a `together` group
        "dropout",
        "float8",
        "attention",
        "einsum",
    ]


def test_a_knobs_row_alone_makes_tune_try_it(tmp_path: Path, monkeypatch: Any) -> None:
    """Adding a knob is its module and its row of KNOBS: the late stage, the --skip
    names, the layer counts and the progress bar's total follow the row. Here a row
    that tries `cache_dataset` (a field no stage knows) on models with Dense layers."""
    import tfaccel.tune.search as search
    from tfaccel.optimize.settings import Knob, TuneTry
    from tfaccel.tune.stages import late

    row = Knob("cache_dataset", tune=TuneTry((True,), needs=("gpu",), layers="Dense layer"))
    for module in (search, late):  # what the table is, as each reads it
        monkeypatch.setattr(module, "LATE_KNOBS", (*module.LATE_KNOBS, row))
    before = estimate_trials(H200, options())

    def run(dense_layers: int | None) -> tuple[list[Settings], TuneResult]:
        trials = FakeTrials(extra={"cache_dataset_layers": dense_layers})
        j = Journal(tmp_path / f"j{dense_layers}.jsonl")
        j.load("w")
        res = Tuner("w", H200, options(), j, trial_fn=trials).run()
        return same(trials.calls), res

    calls, _ = run(3)
    assert calls[-1].cache_dataset is True and not any(s.cache_dataset for s in calls[:-1])
    calls, res = run(0)
    assert not any(s.cache_dataset for s in calls)
    assert ("cache_dataset", "not tried: the model has no Dense layer") in [
        (d.stage, d.text) for d in res.decisions
    ]
    for module in (search, late):
        monkeypatch.setattr(module, "LATE_KNOBS", module.LATE_KNOBS[:-1])
    assert estimate_trials(H200, options()) == before - 1


def test_the_persistent_rnn_algorithm_is_withheld_and_said(tmp_path: Path) -> None:
    """cuDNN's persistent algorithm is no same-training setting (its training losses
    pass the guard, its validation loss did not keep up): tune does not try it on a
    model of cuDNN LSTM layers and says why there; on a model without any, it says
    only that; the progress bar's total does not count it."""
    from tfaccel.optimize.settings import KNOB_NAMED

    withheld = KNOB_NAMED["rnn_algorithm"].tune
    assert withheld is not None and withheld.withheld

    def run(lstm_layers: int) -> tuple[list[Settings], list[str]]:
        trials = FakeTrials(extra={"rnn_algorithm_layers": lstm_layers})
        j = Journal(tmp_path / f"j{lstm_layers}.jsonl")
        j.load("w")
        res = Tuner("w", H200, options(), j, trial_fn=trials).run()
        return trials.calls, [d.text for d in res.decisions if d.stage == "rnn_algorithm"]

    calls, said = run(2)
    assert all(s.rnn_algorithm == "default" for s in calls)
    assert said == [f"not tried: {withheld.withheld} (a settings file may still set it)"]
    assert "validated worse" in said[0]
    calls, said = run(0)
    assert all(s.rnn_algorithm == "default" for s in calls)
    assert said == ["not tried: the model has no cuDNN LSTM or GRU layer"]


def test_noise_rule() -> None:
    def r(rate: float, spread: float) -> TrialResult:
        windows = (rate * (1 - spread / 2), rate, rate * (1 + spread / 2))  # that spread
        return TrialResult("k", "l", {}, "ok", samples_per_s=rate, windows=windows)

    assert beats(r(104, 0.01), r(100, 0.01), 0.03)[0] is True
    assert beats(r(102, 0.01), r(100, 0.01), 0.03)[0] is False  # below the 3 % floor
    assert beats(r(110, 0.08), r(100, 0.01), 0.03)[0] is False  # within 2 x spread (16 %)
    assert beats(TrialResult("k", "l", {}, "oom"), r(1, 0), 0.03)[0] is False


def test_estimated_trials_covers_a_full_search(tmp_path: Path) -> None:
    fake = FakeTrials(oom_above=10**9)  # batch grows to max_batch
    t = tuner(tmp_path, fake)
    estimate = t.estimated_trials()
    t.run()
    assert len(t.result.trials) <= estimate  # an upper bound for the progress bar
    # Here the offer's batch ladder (six trials allowed, one per doubling) and its races
    # (seven: the same-training run, then each of six batches) do not run (synthetic
    # data: nothing to judge the training by); no two knobs fell just short, so nothing
    # is tried together, and the guard let philox16's masks pass, so
    # Keras' masks computed once are not tried, and steps_per_execution 25 and
    # input_cast won in one trial, so neither 10 nor input_cast alone is tried; and the
    # data are not a script's numpy arrays, so none is kept in GPU memory, and there is
    # no script's validation to evaluate at a larger batch.
    assert estimate - len(t.result.trials) == 19


def test_confirmation_runs_defaults_and_best_back_to_back(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    trials = FakeTrials()
    opts = options(confirm=2)
    t = Tuner("w", H200, opts, j, trial_fn=trials)
    res = t.run()
    defaults = Settings(precision="tf32", xla="auto", batch_size=64, steps_per_execution=1)
    assert same(trials.calls)[-4:] == [defaults, res.best_settings] * 2
    assert [c.best.samples_per_s for c in res.confirmations] == [res.best.samples_per_s] * 2
    assert res.confirmed_speedup == pytest.approx(res.speedup(res.keras_defaults))
    assert any(d.stage == "confirm" and "2 round(s)" in d.text for d in res.decisions)
    # The confirmations are not journaled: a resumed tune runs them again, and only them.
    journaled = len((tmp_path / "j.jsonl").read_text().splitlines())
    assert journaled == len(res.trials)
    j2 = Journal(tmp_path / "j.jsonl")
    j2.load("w")
    again = FakeTrials()
    res2 = Tuner("w", H200, opts, j2, trial_fn=again).run()
    assert again.calls == [defaults, res.best_settings] * 2
    assert res2.confirmed_speedup == pytest.approx(res.confirmed_speedup)


def test_confirmation_median_and_failed_rounds() -> None:
    from tfaccel.tune.result import Confirmation, TuneResult

    def r(rate: float | None) -> TrialResult:
        if rate is None:
            return TrialResult("k", "l", {}, "oom", error="OOM")
        return TrialResult("k", "l", {}, "ok", samples_per_s=rate)

    res = TuneResult("w", H200)
    assert res.confirmed_speedup is None
    res.confirmations = [Confirmation(r(100), r(250)), Confirmation(r(100), r(None))]
    assert res.confirmations[1].speedup is None
    assert res.confirmed_speedup == pytest.approx(2.5)
    res.confirmations.append(Confirmation(r(100), r(240)))
    assert res.confirmed_speedup == pytest.approx(2.45)  # the median of two


def test_the_report_shows_each_confirmation_round() -> None:
    from rich.console import Console

    from tfaccel.render.tune import tune_text
    from tfaccel.tune.result import Confirmation, TuneResult

    def r(label: str, rate: float | None) -> TrialResult:
        if rate is None:
            return TrialResult(label, label, {}, "timeout", error="killed at 600 s")
        return TrialResult(
            label,
            label,
            {},
            "ok",
            samples_per_s=rate,
            windows=(rate,),
            compile_s=30.0,
            extra={"setup_s": 6.0},
        )

    best = r("mixed_bfloat16 xla=jit batch=2048 spe=1", 4400)
    defaults = r("tf32 xla=auto batch=128 spe=1", 1800)
    res = TuneResult("bert_hub", H200, trials=[defaults, best], best=best, keras_defaults=defaults)
    res.confirmations = [
        Confirmation(r("d", 1850), r("b", 4500)),
        Confirmation(r("d", 1850), r("b", None)),
    ]
    console = Console(record=True, width=160)
    tune_text(res, console)
    text = console.export_text()
    assert "2.44x Keras defaults (1,800/s" in text  # the search's runs
    assert "confirmation 1, back to back: 2.43x Keras defaults (4,500/s against 1,850/s)" in text
    assert "confirmation 2: b: timeout (killed at 600 s)" in text
    # where the tune's time went, besides the timed steps
    assert "60 s of it compiling, 12 s starting (import, build, data)" in text


def test_sixteen_bit_xla_comes_right_after_the_defaults_and_the_batch_offer_last(
    tmp_path: Path,
) -> None:
    """Best first: what wins on tensor-core GPUs is measured before what rarely does;
    a batch change, which changes the training, after all that keeps it."""
    fake = XlaDefaults(extra={"no_race": None})
    res = tuner(tmp_path, fake, race_s=0.0).run()
    order = [(s.precision, s.xla, s.batch_size) for s in fake.calls[:8]]
    assert order[:3] == [
        ("float32", "off", 64),  # the baseline
        ("tf32", "auto", 64),  # Keras' defaults
        ("mixed_bfloat16", "jit", 64),  # 16-bit + XLA next
    ]
    no_xla = [i for i, s in enumerate(fake.calls) if s.xla == "off" and i > 0]
    assert no_xla and min(no_xla) == 3  # without XLA: next, at the user's batch
    assert all(fake.calls[i].batch_size == 64 for i in no_xla)
    offer = [i for i, s in enumerate(fake.calls) if s.batch_size != 64]
    assert offer and min(offer) > max(no_xla)
    # the time the best so far first reached 1.5x Keras' defaults is reported
    assert res.time_to(1.5) is not None and res.best_so_far[0][1] < res.best_so_far[-1][1]


class DefaultsWin(FakeTrials):
    """A machine where nothing beats Keras' defaults beyond the noise: the baseline is
    as fast as the defaults within it, and every other setting is slower."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        rate = (
            1000.0
            if s.xla == "auto"
            else 990.0
            if s == Settings(precision="float32", xla="off", batch_size=64, steps_per_execution=1)
            else 500.0
        )
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


def test_the_answer_is_never_below_keras_defaults(tmp_path: Path) -> None:
    res = tuner(tmp_path, DefaultsWin()).run()
    assert res.best is res.keras_defaults
    assert res.best_settings is not None and res.best_settings.xla == "auto"
    assert res.speedup(res.keras_defaults) == 1.0
    answer = said(res, "answer")
    assert len(answer) == 1 and answer[0].startswith("Keras' defaults: nothing the search")
    assert "nothing to change" in answer[0]
    # the baseline within their noise: the search started from the defaults, not from it
    start = said(res, "keras defaults")
    assert start == [
        "+1% against the baseline, within the noise (3%): the search starts from Keras' "
        "defaults, as the script runs them"
    ]
    spe = [t.settings for t in res.trials if t.settings["steps_per_execution"] != 1]
    assert spe and all((s["precision"], s["xla"]) == ("tf32", "auto") for s in spe)


class BaselineWins(FakeTrials):
    """XLA slows this model down: Keras' defaults (XLA auto) run 20 % below the
    float32 baseline, which the search then starts from."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        rate = 800.0 if s.xla != "off" else 1000.0 if s.precision == "float32" else 500.0
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


def test_the_search_starts_from_the_baseline_only_beyond_the_noise(tmp_path: Path) -> None:
    """Keras' defaults are where the search starts (what the script runs as written);
    the float32 baseline replaces them only where it is faster beyond the noise."""
    res = tuner(tmp_path, BaselineWins(), race_s=0.0).run()
    start = said(res, "keras defaults")
    assert start == [
        "-20% against the baseline, slower beyond the noise (3%): the search starts "
        "from the baseline"
    ]
    assert res.best_settings is not None and res.best_settings.precision == "float32"
    assert res.best_settings.xla == "off"


def test_the_plot_reads_each_trial_against_keras_defaults(tmp_path: Path) -> None:
    from tfaccel.render import pyplot
    from tfaccel.render.tune import tune_figure, tune_plot
    from tfaccel.tune.result import TuneResult

    def r(key: str, rate: float | None, status: str = "ok") -> TrialResult:
        windows = [rate * 0.98, rate, rate * 1.01] if rate else []
        return TrialResult(key, key, {}, status, samples_per_s=rate, windows=windows)

    base, defaults, best = r("base", 3_458.0), r("defaults", 11_833.0), r("best", 304_255.0)
    failed = r("float8", None, "error")
    res = TuneResult(
        "script", H200, [base, defaults, best, failed], best=best, keras_defaults=defaults
    )
    fig = tune_figure(res)
    ax = fig.axes[0]
    dashed = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert dashed == [11_833.0]  # Keras' defaults
    assert ax.get_legend().get_texts()[0].get_text() == "Keras defaults"
    texts = [t.get_text() for t in ax.texts]
    assert "  25.71x defaults" in texts and " error" in texts
    assert ax.get_xlim()[1] > 304_255.0 * 1.01  # room for the speed-up's text
    pyplot().close(fig)
    # no defaults measured: no line, no speed-up
    fig = tune_figure(TuneResult("script", H200, [failed]))
    assert not [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert fig.axes[0].get_legend() is None
    pyplot().close(fig)
    assert tune_plot(res, tmp_path / "t.png").stat().st_size > 0


def test_the_plots_speedup_label_is_clear_of_its_legend() -> None:
    """A long best bar at the bottom put its "Nx defaults" label under the legend."""
    from tfaccel.render import pyplot
    from tfaccel.render.tune import tune_figure
    from tfaccel.tune.result import TuneResult

    def r(key: str, rate: float) -> TrialResult:
        return TrialResult(key, key, {}, "ok", samples_per_s=rate, windows=(rate, rate))

    trials = [r("base", 3_000.0), r("defaults", 6_000.0), r("mid", 7_000.0), r("best", 14_000.0)]
    res = TuneResult("w", H200, trials, best=trials[-1], keras_defaults=trials[1])
    fig = tune_figure(res)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    label = next(t for t in ax.texts if "x defaults" in t.get_text()).get_window_extent(renderer)
    assert not legend.overlaps(label)
    pyplot().close(fig)


@pytest.mark.parametrize("met", [True, False])
def test_a_new_hardware_need_is_one_row(tmp_path: Path, monkeypatch: Any, met: bool) -> None:
    """A knob whose trial needs something new of the machine: its row in KNOBS names the
    need, and one row of tune.result.HARDWARE_NEEDS says what it asks; the late stage
    and the trial estimate both follow that row."""
    import tfaccel.tune.search as search
    from tfaccel.optimize.settings import Knob, TuneTry
    from tfaccel.tune import result
    from tfaccel.tune.stages import late

    opts = options()
    before = estimate_trials(H200, opts)
    row = Knob("cache_dataset", tune=TuneTry((True,), needs=("hbm3e",)))  # type: ignore[arg-type]
    for module in (search, late):
        monkeypatch.setattr(module, "LATE_KNOBS", (*module.LATE_KNOBS, row))
    monkeypatch.setitem(result.HARDWARE_NEEDS, "hbm3e", lambda hw: met and hw.gpus > 0)
    trials = FakeTrials()
    assert estimate_trials(H200, opts) - before == (1 if met else 0)
    tuner(tmp_path, trials).run()
    assert any(s.cache_dataset for s in trials.calls) is met


class CtrlCAt(FakeTrials):
    """Ctrl-C pressed during the `at`-th trial (1: the baseline)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        if len(self.calls) + 1 == self.at:
            self.calls.append(s)
            raise KeyboardInterrupt
        return super().__call__(workload, s, steps, timeout)


def test_ctrl_c_ends_the_search_with_the_answer_of_the_trials_that_ended(
    tmp_path: Path,
) -> None:
    fake = CtrlCAt(at=4)
    res = tuner(tmp_path, fake).run()
    assert res.interrupted
    assert len(fake.calls) == 4  # nothing ran after the interrupted trial
    measured = [t for t in res.trials if t.status == "ok"]
    assert res.best is not None and res.best in measured
    assert res.best.samples_per_s == max(t.samples_per_s or 0 for t in measured)
    assert all(
        t.error.startswith("interrupted (Ctrl-C or SIGTERM)")
        for t in res.trials
        if t.status == "skipped"
    )
    assert said(res, "interrupted") == [
        "stopped (Ctrl-C or SIGTERM): no more trials; the answer is settled from those that "
        "ended, and the same command goes on from the journal"
    ]
    # the journal holds the trials that ended, so the same command goes on from them
    again = CtrlCAt(at=0)
    res2 = tuner(tmp_path, again).run()
    assert not res2.interrupted and res2.resumed == 3


def test_ctrl_c_before_the_references_ended_stops_at_once(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        tuner(tmp_path, CtrlCAt(at=1)).run()


def test_an_interrupted_tune_says_its_answer_and_exits_as_ctrl_c_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    from tfaccel.cli import tune as tune_cli
    from tfaccel.cli._common import Format
    from tfaccel.tune import Outputs

    res = tuner(tmp_path, CtrlCAt(at=4)).run()
    outputs = Outputs(tmp_path / "tfaccel.json", tmp_path / "tune.png")
    with pytest.raises(typer.Exit) as stopped:
        tune_cli._render(res, outputs, Format.text)
    assert stopped.value.exit_code == 130
    assert "interrupted" in capsys.readouterr().out
    assert (tmp_path / "tune.png").exists()


def test_sigterm_ends_a_tune_as_ctrl_c_does_unless_it_was_ignored() -> None:
    import os
    import signal

    from tfaccel.cli.tune import _stop_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _stop_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before  # restored
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with _stop_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)  # ignored, as it was
    finally:
        signal.signal(signal.SIGTERM, before)
