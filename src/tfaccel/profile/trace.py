"""The trace's geometry: step spans, device busy time, memory copies and what overlaps
them, read from the trace events XProf converts."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

MEMCPY_EVENT = re.compile(r"^Memcpy(HtoD|H2D|DtoH|D2H|DtoD|D2D|PtoP|P2P)", re.IGNORECASE)
MEMCPY_EVENT_KIND = {"htod": "H2D", "h2d": "H2D", "dtoh": "D2H", "d2h": "D2H"}
MEMCPY_EVENT_KIND |= {"dtod": "D2D", "d2d": "D2D", "ptop": "P2P", "p2p": "P2P"}
SIZE = re.compile(r"size:(\d+)")


@dataclass
class TraceFacts:
    """What the device trace says directly (CUPTI activity, by correlation id)."""

    launch_call_us: list[float] = field(default_factory=list)  # host CUDA launch calls
    queue_delay_us: list[float] = field(default_factory=list)  # launch call -> start
    kernel_gaps_us: list[float] = field(default_factory=list)  # idle between kernels
    kernels: int = 0
    memcpy_us: dict[str, float] = field(default_factory=dict)
    memcpy_bytes: dict[str, int] = field(default_factory=dict)
    memcpy_exposed_us: float = 0.0  # copy time with no kernel running beside it
    kernel_busy_us: float = 0.0  # time at least one kernel ran
    window_us: float = 0.0  # the profiled steps (the trace's step markers)
    timeline: dict[str, Any] = field(default_factory=dict)  # one step, by stream


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _timeline(
    step_spans: list[tuple[float, float]],
    kernel_spans: dict[Any, list[tuple[float, float]]],
    copies: list[tuple[float, float]],
    thread_names: dict[Any, str],
    resolution_us: float = 5.0,
) -> dict[str, Any]:
    """What each GPU stream did during one full step (the second, or the first if only
    one), as busy intervals in ms from the step's start, merged below the resolution."""
    if not step_spans:
        return {}
    steps = sorted(step_spans)
    window_start, window_end = steps[1] if len(steps) > 2 else steps[0]

    def rel(spans: list[tuple[float, float]]) -> list[list[float]]:
        merged: list[list[float]] = []
        for start, end in _clip(_union(spans), [(window_start, window_end)]):
            if merged and start - merged[-1][1] * 1000.0 - window_start < resolution_us:
                merged[-1][1] = round((end - window_start) / 1000.0, 4)
            else:
                merged.append(
                    [
                        round((start - window_start) / 1000.0, 4),
                        round((end - window_start) / 1000.0, 4),
                    ]
                )
        return merged

    rows = [
        {"name": thread_names.get(key, str(key)), "kind": "kernels", "spans": rel(spans)}
        for key, spans in sorted(kernel_spans.items(), key=lambda item: str(item[0]))
    ]
    rows.append({"name": "memory copies", "kind": "copies", "spans": rel(copies)})
    rows = [row for row in rows if row["spans"]]
    return {"step_ms": round((window_end - window_start) / 1000.0, 3), "rows": rows} if rows else {}


def _clip(
    spans: list[tuple[float, float]], window: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The parts of `spans` (disjoint, sorted) inside `window` (disjoint, sorted)."""
    out = []
    for start, end in spans:
        for window_start, window_end in window:
            lo, hi = max(start, window_start), min(end, window_end)
            if lo < hi:
                out.append((lo, hi))
    return out


def _uncovered(spans: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Total length of `spans` (disjoint, sorted) outside `cover` (disjoint, sorted)."""
    total, j = 0.0, 0
    for start, end in spans:
        covered = 0.0
        while j < len(cover) and cover[j][1] <= start:
            j += 1
        reach = j
        while reach < len(cover) and cover[reach][0] < end:
            covered += min(end, cover[reach][1]) - max(start, cover[reach][0])
            reach += 1
        total += (end - start) - covered
    return total


def trace_facts(trace: Any) -> TraceFacts:
    """Launch calls, queue delays, kernel and copy time from the trace viewer's events.

    A device event (a GPU stream) and the host-side CUDA API call that launched it share
    a correlation id; XProf names the host event after the kernel (or after
    cudaLaunchKernel in older versions), so the id, not the name, makes the match.
    Copies are the device's Memcpy* events, with their sizes from `memcpy_details`.
    """
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    gpu_pids = {
        event.get("pid")
        for event in events
        if event.get("ph") == "M"
        and event.get("name") == "process_name"
        and "/device:GPU" in str(event.get("args", {}).get("name", ""))
    }
    host: dict[Any, float] = {}
    device: dict[Any, float] = {}
    facts = TraceFacts()
    kernel_spans: dict[Any, list[tuple[float, float]]] = {}  # by stream
    copy_spans: list[tuple[float, float]] = []
    thread_names = {
        (event.get("pid"), event.get("tid")): str(event.get("args", {}).get("name", ""))
        for event in events
        if event.get("ph") == "M" and event.get("name") == "thread_name"
    }
    step_spans = [
        (float(event.get("ts", 0)), float(event.get("ts", 0)) + float(event.get("dur") or 0))
        for event in events
        if event.get("ph") == "X"
        and event.get("pid") in gpu_pids
        and thread_names.get((event.get("pid"), event.get("tid"))) == "Steps"
    ]
    for event in events:
        args = event.get("args") or {}
        cid = args.get("correlation_id") or args.get("correlation id")
        if cid is None or event.get("ph") != "X":
            continue
        name = str(event.get("name", ""))
        copy = MEMCPY_EVENT.match(name)
        if event.get("pid") in gpu_pids:
            dur = float(event.get("dur") or 0.0)
            stamp = float(event.get("ts", 0))
            if copy:
                copy_spans.append((stamp, stamp + dur))
                kind = MEMCPY_EVENT_KIND[copy.group(1).lower()]
                facts.memcpy_us[kind] = facts.memcpy_us.get(kind, 0.0) + dur
                size = SIZE.search(str(args.get("memcpy_details", "")))
                if size:
                    facts.memcpy_bytes[kind] = facts.memcpy_bytes.get(kind, 0) + int(size[1])
            elif not name.startswith("Memset"):
                device.setdefault(cid, stamp)
                facts.kernels += 1
                kernel_spans.setdefault((event.get("pid"), event.get("tid")), []).append(
                    (stamp, stamp + dur)
                )
        elif not copy and not name.startswith("Memset"):
            host.setdefault(cid, float(event.get("ts", 0)))
            facts.launch_call_us.append(float(event.get("dur") or 0.0))
    matched = host.keys() & device.keys()
    facts.queue_delay_us = [
        device[correlation] - host[correlation]
        for correlation in matched
        if device[correlation] >= host[correlation]
    ]
    for spans in kernel_spans.values():
        spans.sort()
        facts.kernel_gaps_us += [
            later[0] - earlier[1]
            for earlier, later in itertools.pairwise(spans)
            if later[0] > earlier[1]
        ]
    every_kernel = _union([x for spans in kernel_spans.values() for x in spans])
    copies = _union(copy_spans)
    # Shares are of the profiled steps' wall time: clip to the trace's step markers
    # (without markers, to the span of device activity).
    window = _union(step_spans)
    if not window and (every_kernel or copies):
        spans = every_kernel + copies
        window = [(min(earlier for earlier, _ in spans), max(later for _, later in spans))]
    facts.timeline = _timeline(step_spans, kernel_spans, copies, thread_names)
    every_kernel, copies = _clip(every_kernel, window), _clip(copies, window)
    facts.window_us = sum(later - earlier for earlier, later in window)
    facts.memcpy_exposed_us = _uncovered(copies, every_kernel)
    facts.kernel_busy_us = sum(later - earlier for earlier, later in every_kernel)
    return facts
