"""Sampling, alerts, logs and the Prometheus endpoint, with NVML faked."""

from __future__ import annotations

import csv
import json
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fakes import FakeGpu
from tests.monitor.fake_nvml import MonitorNvml
from tfaccel.errors import InputError
from tfaccel.hardware.nvml import Nvml
from tfaccel.monitor.alerts import Thresholds, evaluate
from tfaccel.monitor.exporter import DEFAULT_ADDR, serve
from tfaccel.monitor.logs import SampleLog
from tfaccel.monitor.metrics import decode_throttle, harmful
from tfaccel.monitor.sampler import Sampler, sample_all, sample_gpu
from tfaccel.monitor.telemetry import summarize_window


def test_sample_reads_and_decodes_everything() -> None:
    nv = MonitorNvml(reasons=0x4 | 0x40, util=97, temp=71)
    with Nvml(nv) as s:
        g = sample_gpu(s, 0, now=100.0)
    assert g.util_gpu_pct == 97 and g.temp_c == 71 and g.temp_slowdown_c == 90
    assert g.temp_shutdown_c == 95
    assert g.power_w == pytest.approx(80.0) and g.power_limit_w == pytest.approx(700.0)
    assert g.throttle == ("sw_power_cap", "hw_thermal_slowdown")
    assert g.pcie_tx_mbs == pytest.approx(2.048)
    assert g.mem_total_mib == pytest.approx(143771)
    assert g.processes == ((4242, "python3", 512.0),)


def test_unsupported_readings_are_none() -> None:
    from tests.fakes import FakeNvml

    with Nvml(FakeNvml()) as s:
        g = sample_gpu(s, 0)
    assert g.error is None and g.name == "NVIDIA H200"
    assert g.util_gpu_pct is None and g.power_w is None and g.throttle == ()


def test_throttle_reasons() -> None:
    assert decode_throttle(0x1) == ("gpu_idle",)
    assert harmful(decode_throttle(0x1 | 0x2)) == ()
    assert harmful(decode_throttle(0x4 | 0x10)) == ("sw_power_cap", "sync_boost")
    assert decode_throttle(0x10000) == ("0x10000",)


def test_alerts() -> None:
    t = Thresholds()
    nv = MonitorNvml(temp=91, reasons=0x40, used=140000 * 2**20, ecc=2)
    with Nvml(nv) as s:
        kinds = {a.kind: a for a in evaluate(sample_gpu(s, 0), t)}
    assert set(kinds) == {"temperature", "throttle", "memory", "ecc"}
    assert kinds["temperature"].severity == "critical"  # past the 90 C slowdown point
    assert "hw_thermal_slowdown" in kinds["throttle"].message
    with Nvml(MonitorNvml(temp=60, reasons=0x1)) as s:
        assert evaluate(sample_gpu(s, 0), t) == []  # idle clocks are not an alert


def test_a_lost_gpu_is_a_sample_and_a_critical_alert() -> None:
    nv = MonitorNvml(n=2)
    nv.state[1]["lost"] = True
    with Nvml(nv) as s:
        snap = sample_all(s, [0, 1], Thresholds())
    assert snap.gpus[0].error is None
    assert snap.gpus[1].error and "GPU is lost" in snap.gpus[1].error
    assert [(a.gpu, a.kind, a.severity) for a in snap.alerts] == [(1, "lost", "critical")]


def test_sampler_thread_never_blocks_readers() -> None:
    nv = MonitorNvml()
    with Sampler(interval_s=0.02, lib=nv) as sampler:
        time.sleep(0.15)
        nv.state[0]["slow_s"] = 0.5  # NVML turns slow
        time.sleep(0.05)
        t0 = time.perf_counter()
        latest = sampler.latest
        assert time.perf_counter() - t0 < 0.05
        assert latest is not None and len(sampler.history()) >= 3
        nv.state[0]["slow_s"] = 0.0
    assert nv.shutdowns == 1


def test_sampler_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="GPU index 3 does not exist"):
        Sampler([3], lib=MonitorNvml()).start()
    with pytest.raises(InputError, match="interval must be positive"):
        Sampler(interval_s=0, lib=MonitorNvml())
    s = Sampler(interval_s=10, lib=MonitorNvml())
    s.start()
    with pytest.raises(InputError, match="already running"):
        s.start()
    s.stop()


def test_csv_and_jsonl_logs_append(tmp_path: Path) -> None:
    nv = MonitorNvml(temp=88)
    with Nvml(nv) as s:
        snap = sample_all(s, [0], Thresholds())
    for name in ("s.csv", "s.jsonl"):
        for _ in range(2):  # a second run appends, never truncates
            log = SampleLog(tmp_path / name)
            log.write(snap)
            log.close()
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert len(rows) == 2 and rows[0]["temp_c"] == "88.0" and "88 C" in rows[0]["alerts"]
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["temp_c"] == 88
    with pytest.raises(InputError, match="Unknown log format"):
        SampleLog(tmp_path / "s.txt")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_prometheus_endpoint_binds_loopback_and_serves_metrics() -> None:
    nv = MonitorNvml(temp=66, reasons=0x4)
    with Sampler(interval_s=10, lib=nv) as sampler:
        port = _free_port()
        server = serve(lambda: sampler.latest, port)
        try:
            assert server.server_address[0] == DEFAULT_ADDR == "127.0.0.1"
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        finally:
            server.shutdown()
    text = body.decode()
    assert 'tfaccel_gpu_temperature_celsius{gpu="0",name="NVIDIA H200"} 66.0' in text
    assert 'tfaccel_gpu_throttled{gpu="0",reason="sw_power_cap"} 1.0' in text
    assert 'tfaccel_gpu_up{gpu="0"} 1.0' in text


def test_window_energy_and_throttled_time() -> None:
    nv = MonitorNvml()
    snaps = []
    with Nvml(nv) as s:
        for t in range(5):
            nv.state[0]["energy_mj"] = 1000 * 300 * t  # 300 W
            nv.state[0]["reasons"] = 0x4 if t >= 3 else 0x1
            snaps.append(sample_all(s, [0], Thresholds(), now=float(t)))
    [w] = summarize_window(snaps, 0.0, 4.0)
    assert w.energy_j == pytest.approx(1200.0)
    assert w.throttled_s == pytest.approx(2.0)
    assert w.throttle_reasons == {"sw_power_cap": 2.0}


def test_visible_indices_follow_cuda_visible_devices() -> None:
    from tfaccel.hardware.capabilities import visible_indices

    uuids = ["GPU-aaaa-1", "GPU-bbbb-2", "GPU-cccc-3"]
    assert visible_indices(uuids, "") == []
    assert visible_indices(uuids, "1") == [1]
    assert visible_indices(uuids, "2,0") == [2, 0]
    assert visible_indices(uuids, "GPU-bbbb,0") == [1, 0]
    assert visible_indices(uuids, "0,7,1") == [0]  # CUDA stops at the first bad entry
    assert visible_indices(uuids, "-1") == []
    assert visible_indices(uuids, "GPU-,1") == []  # a prefix that names several GPUs


def test_visible_sampler_watches_the_gpus_cuda_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    nv = MonitorNvml(3)
    nv.gpus = [FakeGpu(uuid=f"GPU-{i}{i}{i}") for i in range(3)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with Sampler("visible", interval_s=0.05, lib=nv) as sampler:
        snap = sampler.latest
    assert snap is not None and [g.index for g in snap.gpus] == [2]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with Sampler("visible", interval_s=0.05, lib=nv) as sampler:
        snap = sampler.latest
    assert snap is not None and [g.index for g in snap.gpus] == [0, 1, 2]
    with pytest.raises(InputError, match="Unknown GPU selection"):
        Sampler("all", lib=nv)


def test_light_samples_skip_the_slow_queries() -> None:
    """PCIe throughput blocks 20 ms per call in NVML; a training sampler leaves it out."""
    slow: list[str] = []

    class Counting(MonitorNvml):
        def nvmlDeviceGetPcieThroughput(self, h: int, kind: int) -> int:
            slow.append("pcie")
            return super().nvmlDeviceGetPcieThroughput(h, kind)

        def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list:
            slow.append("processes")
            return []

    nv = Counting()
    with Nvml(nv) as s:
        full = sample_gpu(s, 0)
        assert sorted(slow) == ["pcie", "pcie", "processes"]
        slow.clear()
        light = sample_gpu(s, 0, light=True)
    assert full.pcie_tx_mbs is not None and light.pcie_tx_mbs is None
    assert slow == []
    assert light.temp_c == full.temp_c and light.power_w == full.power_w
    assert light.throttle == full.throttle
