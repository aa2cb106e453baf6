"""A Prometheus endpoint (prometheus-client) serving the sampler's latest snapshot.

It binds to 127.0.0.1 unless told otherwise: GPU telemetry is not published to the
network by accident.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tfaccel.errors import InputError
from tfaccel.monitor.metrics import METRICS, Snapshot

DEFAULT_ADDR = "127.0.0.1"


class SnapshotCollector:
    """A prometheus-client collector that reads the latest snapshot when scraped."""

    def __init__(self, latest: Callable[[], Snapshot | None]) -> None:
        self.latest = latest

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        snap = self.latest()
        if snap is None:
            return
        for metric in METRICS:
            fam = GaugeMetricFamily(metric.prom, metric.help, labels=["gpu", "name"])
            for gpu in snap.gpus:
                value = getattr(gpu, metric.attr)
                if value is not None:
                    fam.add_metric([str(gpu.index), gpu.name or ""], float(value))
            yield fam
        gauge_up = GaugeMetricFamily("tfaccel_gpu_up", "1 if the GPU answers NVML", labels=["gpu"])
        throttled = GaugeMetricFamily(
            "tfaccel_gpu_throttled", "1 per active clock event reason", labels=["gpu", "reason"]
        )
        for gpu in snap.gpus:
            gauge_up.add_metric([str(gpu.index)], 0.0 if gpu.error else 1.0)
            for reason in gpu.throttle:
                throttled.add_metric([str(gpu.index), reason], 1.0)
        yield gauge_up
        yield throttled
        alerts = GaugeMetricFamily("tfaccel_gpu_alerts", "Active alerts", labels=["gpu", "kind"])
        for alert in snap.alerts:
            alerts.add_metric([str(alert.gpu), alert.kind], 1.0)
        yield alerts


def serve(latest: Callable[[], Snapshot | None], port: int, addr: str = DEFAULT_ADDR) -> Any:
    """Start the HTTP endpoint in a thread; returns the server (call .shutdown())."""
    if not 0 < port < 65536:
        raise InputError("Invalid port", expected="1..65535", received=port)
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(latest))
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise InputError(
            f"Cannot listen on {addr}:{port}", expected="a free port", received=str(exc)
        ) from exc
    return server
