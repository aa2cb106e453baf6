"""The Keras callback (real Keras on CPU, NVML faked) and power limits (NVML faked)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tests.monitor.fake_nvml import MonitorNvml
from tfaccel.errors import GpuError, InputError
from tfaccel.monitor.power import read_power, reset_power_limit, set_power_limit, sweep

keras = pytest.importorskip("keras")
np = pytest.importorskip("numpy")


def _fit(cb: object, epochs: int = 2, steps: int = 6) -> object:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.zeros((steps * 16, 8), "float32")
    y = np.zeros((steps * 16, 4), "float32")
    return model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, callbacks=[cb])


class Ticker:
    """A clock that advances one second per reading, with energy following it."""

    def __init__(self, nv: MonitorNvml) -> None:
        self.t = 0.0
        self.nv = nv

    def __call__(self) -> float:
        self.t += 1.0
        self.nv.state[0]["energy_mj"] = int(self.t * 250_000)  # 250 W
        return self.t


def test_callback_attributes_telemetry_to_epochs(tmp_path: Path) -> None:
    from tfaccel.monitor import GpuMonitorCallback

    nv = MonitorNvml(util=88, temp=70)
    cb = GpuMonitorCallback(
        interval_s=30, batch_size=16, lib=nv, clock=Ticker(nv), log_dir=str(tmp_path / "tb")
    )
    history = _fit(cb)
    logs = history.history  # type: ignore[attr-defined]
    assert logs["gpu0_util_mean"] == [88.0, 88.0]
    assert logs["gpu0_temp_max_c"] == [70.0, 70.0]
    assert all(v > 0 for v in logs["gpu0_energy_j"])
    assert len(cb.epochs) == 2 and cb.epochs[0].steps == 6 and cb.epochs[0].samples == 96
    jps = cb.epochs[0].joules_per_sample()
    assert jps == pytest.approx(cb.epochs[0].gpus[0].energy_j / 96)  # type: ignore[operator]
    assert any((tmp_path / "tb").iterdir())  # TensorBoard scalars were written
    assert cb.sampler is None  # stopped at the end of training


def test_thermal_alert_can_stop_training() -> None:
    from tfaccel.monitor import GpuMonitorCallback

    nv = MonitorNvml(temp=90)
    cb = GpuMonitorCallback(interval_s=30, on_thermal="stop", lib=nv)
    with pytest.warns(RuntimeWarning, match="stopping training: GPU 0 at 90 C"):
        history = _fit(cb, epochs=5)
    assert len(history.history["loss"]) == 1  # type: ignore[attr-defined]


def test_without_a_driver_training_goes_on_without_gpu_metrics() -> None:
    from tests.fakes import FakeNvml
    from tfaccel.monitor import GpuMonitorCallback

    cb = GpuMonitorCallback(lib=FakeNvml(init_error="Driver Not Loaded"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = _fit(cb)
    assert any("GPU telemetry off" in str(w.message) for w in caught)
    assert len(history.history["loss"]) == 2  # type: ignore[attr-defined]
    assert cb.epochs[1].steps == 6 and cb.epochs[1].gpus == ()


def test_callback_rejects_unknown_thermal_action() -> None:
    from tfaccel.monitor import GpuMonitorCallback

    with pytest.raises(InputError, match="on_thermal"):
        GpuMonitorCallback(on_thermal="panic")


def test_read_power() -> None:
    [p] = read_power(MonitorNvml())
    assert (p.limit_w, p.default_limit_w, p.min_limit_w, p.max_limit_w) == (700, 700, 200, 700)


def test_setting_needs_yes_root_and_a_value_in_range() -> None:
    nv = MonitorNvml()
    with pytest.raises(InputError, match="needs explicit confirmation"):
        set_power_limit(0, 400, yes=False, lib=nv, is_root=True)
    with pytest.raises(GpuError, match="needs root"):
        set_power_limit(0, 400, yes=True, lib=nv, is_root=False)
    with pytest.raises(InputError) as caught:
        set_power_limit(0, 900, yes=True, lib=nv, is_root=True)
    assert "Expected 200 to 700 W. Received: 900 W" in caught.value.message
    assert nv.set_calls == []
    assert set_power_limit(0, 400, yes=True, lib=nv, is_root=True) == (700, 400)
    assert nv.set_calls == [(0, 400_000)]
    assert reset_power_limit(0, yes=True, lib=nv, is_root=True) == (400, 700)
    with pytest.raises(InputError, match="GPU index 7 does not exist"):  # exit 2, as monitor
        set_power_limit(7, 400, yes=True, lib=nv, is_root=True)


def test_sweep_restores_after_a_failing_step_and_after_ctrl_c() -> None:
    nv = MonitorNvml()

    def measure(watts: float) -> tuple[float, float, float]:
        if watts == 400:
            raise RuntimeError("trial crashed")
        return 1000.0 * watts / 700, watts * 0.9, 60.0

    res = sweep(0, [300, 400, 500], measure, yes=True, lib=nv, is_root=True)
    assert res.restored and nv.state[0]["limit_mw"] == 700_000
    assert [p.error is None for p in res.points] == [True, False, True]
    assert res.points[0].samples_per_j == pytest.approx((1000 * 300 / 700) / 270)

    def interrupted(watts: float) -> tuple[float, float, float]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(0, [300, 500], interrupted, yes=True, lib=nv, is_root=True)
    assert nv.state[0]["limit_mw"] == 700_000  # restored even so


def test_sweep_reports_a_restore_that_failed() -> None:
    nv = MonitorNvml()
    calls = {"n": 0}

    def measure(watts: float) -> tuple[float, float, float]:
        calls["n"] += 1
        nv.state[0]["set_error"] = "Insufficient Permissions"  # the driver turns hostile
        return 1.0, 1.0, 1.0

    res = sweep(0, [300], measure, yes=True, lib=nv, is_root=True)
    assert not res.restored and "Insufficient Permissions" in (res.restore_error or "")


def test_missing_tensorboard_is_a_warning_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from tfaccel.monitor import GpuMonitorCallback

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorboard" else real(name, *a),
    )
    cb = GpuMonitorCallback(interval_s=30, lib=MonitorNvml(), log_dir=str(tmp_path / "tb"))
    with pytest.warns(RuntimeWarning, match="TensorBoard is not installed"):
        history = _fit(cb)
    assert "gpu0_util_mean" in history.history  # type: ignore[attr-defined]


def test_callback_keeps_keras_batch_hooks_asynchronous(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a backend dispatches batch hooks on threads, the callback does not stop it."""
    from keras.src import backend
    from keras.src.callbacks.callback_list import CallbackList

    from tfaccel.monitor import GpuMonitorCallback

    if not hasattr(backend, "IS_THREAD_SAFE"):
        pytest.skip("this Keras dispatches no batch hooks on threads")
    monkeypatch.setattr(backend, "IS_THREAD_SAFE", True)
    cb = GpuMonitorCallback(interval_s=30, lib=MonitorNvml())
    assert CallbackList([cb])._async_train is True


@pytest.mark.parametrize("limits", [[300, 9000], [300, float("nan")], [300, -5], [100, 300]])
def test_sweep_checks_every_limit_before_setting_the_first(limits: list[float]) -> None:
    nv = MonitorNvml()
    measured: list[float] = []

    def measure(watts: float) -> tuple[float, float, float]:
        measured.append(watts)
        return 1.0, 1.0, 1.0

    with pytest.raises(InputError, match="outside GPU 0's allowed power range") as caught:
        sweep(0, limits, measure, yes=True, lib=nv, is_root=True)
    assert "nothing was changed" in (caught.value.hint or "")
    assert measured == [] and nv.set_calls == []


def test_sweep_of_a_gpu_that_does_not_exist_changes_nothing() -> None:
    nv = MonitorNvml()
    with pytest.raises(InputError, match="GPU index 5 does not exist"):
        sweep(5, [300], lambda w: (1.0, 1.0, 1.0), yes=True, lib=nv, is_root=True)
    assert nv.set_calls == []
