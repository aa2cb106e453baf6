"""Replays the rule of `--min-windows` on the H200 tune journals: how many trials of five
windows would have stopped after three (stats.settled), and how far the median of three
lies from the median of five.

    PYTHONPATH=src python experiments/2026-12-03-tune-wall/settled_windows.py
"""

import glob
import json
import statistics

from tfaccel import stats

files = glob.glob("benchmarks/results/*.journal.jsonl")
files += glob.glob("benchmarks/results/tune-user-models-h200/*.jsonl")
trials = []
for f in files:
    for line in open(f):
        r = json.loads(line)
        w = r.get("result", r).get("windows") or []
        if len(w) >= 5:
            trials.append(w)
early = [w for w in trials if stats.settled(w[:3])]
gaps = sorted(abs(statistics.median(w[:3]) / statistics.median(w) - 1) for w in early)
print(f"{len(trials)} trials of five windows, {len(early)} settled after three")
print(f"|median of 3 / median of 5 - 1|: median {statistics.median(gaps):.2%}, max {gaps[-1]:.2%}")
