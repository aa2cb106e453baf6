"""trial.child: the one-device trial's timing plan (window sizes, early stop)."""

from __future__ import annotations

import pytest


def test_window_bounds() -> None:
    from tfaccel.trial.child import shrink_window, warmup_step_s

    assert shrink_window(20, 1, step_s=0.5, window_s=3.0) == 6
    assert shrink_window(20, 1, step_s=0.05, window_s=3.0) == 20  # fits: unchanged
    assert shrink_window(20, 10, step_s=0.5, window_s=3.0) == 10  # whole executions
    assert shrink_window(20, 10, step_s=1.0, window_s=0.1) == 10  # at least one
    # Marks: (last step of the execution, time, loss); the first one compiles.
    marks = [(0, 30.0, 1.0), (1, 30.5, 1.0), (2, 31.0, 1.0), (3, 31.5, 1.0)]
    assert warmup_step_s(marks) == pytest.approx(0.5)
    assert warmup_step_s(marks[:2]) is None


def test_timing_stops_once_the_windows_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """With min_windows 3 of 5, fit stops after the third window when the windows so far
    are steady (a spread under half the noise floor), and runs all five when not."""
    import types

    from tfaccel.trial import child

    def run(step_s: list[float]) -> tuple[int, child.Plan]:
        now = [0.0]
        monkeypatch.setattr(child.time, "perf_counter", lambda: now[0])
        steps = {"warmup": 2, "windows": 5, "window": 4, "min_windows": 3}
        plan = child.Plan.of(steps, spe=1)
        ran = [0]

        def fit(ds: object, steps_per_epoch: int, callbacks: list, **_: object) -> None:
            (cb,) = callbacks
            cb.set_model(types.SimpleNamespace(stop_training=False))
            for i in range(steps_per_epoch):
                now[0] += step_s[i % len(step_s)]
                cb.on_train_batch_end(i, {"loss": 1.0})
                ran[0] += 1
                if cb.model.stop_training:
                    break

        _, out = child._fit_marks(fit, None, plan, batch=8)
        return ran[0], out

    ran, plan = run([0.1])  # steady: windows of equal time
    assert (ran, plan.windows) == (2 + 3 * 4, 3)
    ran, plan = run([0.1] * 6 + [0.12] * 4 + [0.1] * 12)  # the second window slower
    assert (ran, plan.windows) == (2 + 5 * 4, 5)
    without = child.Plan.of({"warmup": 2, "windows": 5, "window": 4}, spe=1)
    assert without.min_windows is None
    assert without.settled_after(13, {i: 0.1 * i for i in range(14)}, 8) is None
