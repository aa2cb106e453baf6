"""Validate `tfaccel plan`'s memory estimate against TensorFlow's measured peak.

Run on the GPU machine (see benchmarks/README.md). For each model and precision it
compares the predicted peak with `get_memory_info('GPU:0')['peak']` at several batch
sizes, then finds the real largest batch by bisection (OOM = does not fit) and compares
it with the predicted one. Writes one JSON file with the environment recorded.

    python benchmarks/plan_validation.py --model resnet50 --out results.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tfaccel.plan.child import estimate_in_child
from tfaccel.plan.fit import capacity_from_local, predicted_vs_measured
from tfaccel.plan.measure import MeasuredPeak, find_max_batch, measure_peak
from tfaccel.render import to_jsonable

BATCHES = {"resnet50": [64, 256], "bert": [32, 128], "tiny": [64, 256]}


def environment() -> dict[str, object]:
    """tfaccel's environment record plus this script's measurement settings."""
    from tfaccel.environment import environment as base

    return {
        **base(),
        "settings": {
            "jit_compile": False,
            "steps_per_measurement": 2,
            "allocator": "TensorFlow default (BFC)",
        },
    }


def validate(
    model: str,
    precision: str,
    search_max: bool,
    log: list[str],
    result: dict[str, object],
    save: Callable[[], None],
) -> None:
    """Fill `result` step by step, calling `save()` after every measurement."""
    t0 = time.perf_counter()
    est = estimate_in_child(model, precision)
    cap = capacity_from_local(0)
    predicted_max = est.max_batch(cap.bytes, margin=0.0)
    log.append(
        f"{model} {precision}: predicted max batch {predicted_max} "
        f"({est.step_bytes_per_sample / 2**20:.1f} MiB/sample), capacity {cap.source}"
    )
    result.update(
        {
            "model": model,
            "precision": precision,
            "estimate": to_jsonable(est),
            "capacity": to_jsonable(cap),
            "predicted_max_batch": predicted_max,
        }
    )
    save()
    measured: list[MeasuredPeak] = []
    for b in BATCHES.get(model, [16, 64]):
        m = measure_peak(model, precision, b, steps=2, timeout_s=240)
        measured.append(m)
        log.append(
            f"  batch {b}: measured peak {m.peak_bytes} oom={m.oom} err={m.error} "
            f"predicted {est.peak_bytes(b)} ({m.seconds:.0f} s)"
        )
        result["peaks"] = predicted_vs_measured(
            est, [(x.batch, x.peak_bytes) for x in measured if x.peak_bytes]
        )
        result["measurements"] = to_jsonable(measured)
        save()
    if search_max and predicted_max > 0:
        probes: dict[int, MeasuredPeak] = {}

        def fits(b: int) -> bool:
            m = measure_peak(model, precision, b, steps=2, timeout_s=240)
            probes[b] = m
            log.append(
                f"  probe {b}: fits={m.peak_bytes is not None} oom={m.oom} "
                f"err={(m.error or '')[:120]} ({m.seconds:.0f} s)"
            )
            result["probes"] = to_jsonable(list(probes.values()))
            save()
            return m.peak_bytes is not None

        if fits(predicted_max):
            low, high = predicted_max, int(predicted_max * 1.25) + 1
            while high < predicted_max * 2 and fits(high):
                low, high = high, int(high * 1.5)
        else:
            high, low = predicted_max, int(predicted_max * 0.8)
            while low > 1 and not fits(low):
                high, low = low, int(low * 0.7)
        real_max, _ = find_max_batch(fits, low, high, tolerance=0.05, max_probes=3)
        failed_above = [b for b, m in probes.items() if m.peak_bytes is None and b > real_max]
        result["real_max_batch"] = real_max
        result["real_max_batch_bracket"] = [real_max, min(failed_above, default=None)]
        result["max_batch_error_pct"] = 100.0 * (predicted_max - real_max) / real_max
    result["seconds"] = time.perf_counter() - t0
    save()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--no-max", action="store_true", help="skip the largest-batch search")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    if args.out.exists():
        print(f"refusing to overwrite {args.out}", file=sys.stderr)
        return 2
    log: list[str] = []
    results: list[dict[str, object]] = []
    report: dict[str, object] = {
        "schema": "tfaccel.plan-validation/1",
        "environment": environment(),
        "results": results,
        "log": log,
    }

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=1))
        print(log[-1] if log else "", flush=True)

    for model in args.model:
        result: dict[str, object] = {"model": model}
        results.append(result)
        try:
            validate(model, args.precision, not args.no_max, log, result, save)
        except Exception as exc:  # keep what was measured for the other models
            result["error"] = repr(exc)
            save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
