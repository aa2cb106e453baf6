"""Every race recorded under benchmarks/results: when the candidate's raw validation
loss first reached the target, when its curve read as the race reads it (the trailing
mean of three evaluations, the untrained start among them: tfaccel.tune.offer.smoothed)
did, and when a trailing mean of three evaluations after the start would have.
    python3 experiments/2026-12-07-race-smoothing/readings.py
"""

import glob
import json
from pathlib import Path


def trailing(curve, after_start=False):
    out = []
    for i, (t, _) in enumerate(curve):
        if after_start and i < 3:
            continue  # the start, and the first two readings after it
        window = [v for _, v in curve[max(0, i - 2) : i + 1]]
        out.append((t, sum(window) / len(window)))
    return out


def first(curve, target):
    return next((t for t, v in curve if v <= target), None)


seen = set()
for path in sorted(glob.glob("benchmarks/results/**/tune.json", recursive=True)):
    for offer in json.loads(Path(path).read_text()).get("races") or []:
        race = offer.get("race") or {}
        cand = [(p[0], p[1]) for p in race.get("candidate") or []]
        if not cand or json.dumps(cand[:3]) in seen:
            continue  # a race a later tune read again from its journal
        seen.add(json.dumps(cand[:3]))
        target = race["target"]
        print(
            f"{Path(path).parent.name:42s} batch {offer['batch_size']:5d} {offer['verdict']:7s}"
            f" target {target:.3g}, same-training run at {race['same_s']:.0f} s; candidate:"
            f" raw {first(cand[1:], target)}, as raced {first(trailing(cand), target)},"
            f" three after the start {first(trailing(cand, True), target)}"
        )
