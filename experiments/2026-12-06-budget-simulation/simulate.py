"""A tune under a time budget, replayed on a simulated clock from a GPU journal: each
trial the journal holds takes its recorded wall time and returns its recorded figures
(as if measured now, not resumed); a trial it lacks takes the wall time and rate given
on the command line (a ladder rung) or the mean of the journal's trials at its best
same-training rate less 5 % (a trial that would not be kept); each race run takes
--race-wall seconds and returns curves in which the candidate reaches the loss sooner.
So it shows where the budget goes under today's rules, and whether a ladder and its
race fit, without a GPU. `--twin tf32=float32`: a trial the journal lacks at TF32 takes
its float32 twin's figures where the journal has them, XLA "auto" read as "off" where
only that is recorded (for a model on which the two tie and that Keras compiles without
XLA, as the caller must know: keras-io's LSTM, 441 against 450 samples/s on an H200):
  PYTHONPATH=src python3 experiments/2026-12-06-budget-simulation/simulate.py \\
      JOURNAL WORKLOAD --budget 600 --race 60 --race-wall 100 \\
      --rung 256:36825:85 --rung 1024:48368:85 --rung 2048:51974:85
"""

import argparse
import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, label_of, settings_key
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, TuneOptions
from tfaccel.tune.search import Tuner


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def curve(half_s: float, seconds: float) -> list[list[float]]:
    """A validation loss falling from 0.7 to 0.3 with a half-life of `half_s`."""
    steps = [seconds * i / 30 for i in range(31)]
    return [[t, 0.3 + 0.4 * math.exp(-t / half_s), 0.3 + 0.4 * math.exp(-t / half_s)] for t in steps]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("journal", type=Path)
    p.add_argument("workload")
    p.add_argument("--budget", type=float, default=600.0)
    p.add_argument("--race", type=float, default=60.0)
    p.add_argument("--race-wall", type=float, default=100.0)
    p.add_argument("--rung", action="append", default=[], help="BATCH:RATE:WALL_S")
    p.add_argument("--batch", type=int, default=None, help="tune --batch (the journal's)")
    p.add_argument("--twin", default=None, help="PRECISION=RECORDED, e.g. tf32=float32")
    a = p.parse_args()
    rows = [json.loads(x) for x in a.journal.read_text().splitlines() if x.strip()]
    last = [row for row in rows if row.get("workload") == a.workload][-1]
    recorded = Journal(a.journal, fingerprint=last.get("fingerprint"), machine=last.get("machine"))
    recorded.load(a.workload)
    repeats = {key: list(runs) for (key, _), runs in recorded.repeats.items()}
    rungs = {int(b): (float(r), float(w)) for b, r, w in (x.split(":") for x in a.rung)}
    known = [t for t in recorded.results.values() if "race" not in t.extra]  # trials, not races
    mean_wall = sum(t.wall_s for t in known) / len(known)
    own = known[0].settings.get("batch_size")  # the baseline's: same-training trials
    best_rate = max(t.samples_per_s or 0.0 for t in known if t.settings.get("batch_size") == own)
    clock, log = Clock(), []
    seen: set[str] = set()

    def twin(w: str, s: Settings, st: StepPlan) -> str | None:
        """The journal's key of `s` at the recorded precision `--twin` names, or None."""
        if not a.twin or s.precision != a.twin.split("=")[0]:
            return None
        recorded_as = s.replace(precision=a.twin.split("=")[1])
        # XLA "auto" as Keras resolved it on a model it compiles without XLA: "off"
        for each in (recorded_as, recorded_as.replace(xla="off")):
            if settings_key(w, each, st) in recorded.results:
                return settings_key(w, each, st)
        return None

    def trial(w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        key = settings_key(w, s, st)
        if key in recorded.results and key not in seen:
            seen.add(key)
            r = recorded.results[key]
        elif key in repeats and repeats[key]:
            r = repeats[key].pop(0)
        elif twin(w, s, st) is not None and twin(w, s, st) not in seen:
            twin_key = twin(w, s, st)
            seen.add(twin_key)
            r = dataclasses.replace(recorded.results[twin_key], key=key, label=label_of(s))
            log.append(f"  (its {a.twin.split('=')[1]} twin's figures: {label_of(s)})")
        else:
            rate, wall = rungs.get(s.batch_size or 0, (best_rate * 0.95, mean_wall))
            # a script's trial carries the script's facts (the baseline's, as recorded)
            r = TrialResult(key, label_of(s), s.to_dict(), "ok", rate, 0.01, (rate,) * 5,
                            losses=known[0].losses, wall_s=wall, extra=dict(known[0].extra))
            log.append(f"  (not in the journal: {label_of(s)}, {wall:.0f} s)")
        clock.now += r.wall_s
        log.append(f"{clock.now:6.0f} s  {label_of(s)}: {r.samples_per_s or 0:,.0f}/s")
        return r

    def race(w: str, s: Settings, st: StepPlan, t: float, x: dict[str, Any]) -> TrialResult:
        clock.now += a.race_wall
        own = x["race"]["lr"] is None
        log.append(f"{clock.now:6.0f} s  race {label_of(s)}")
        points = curve(20.0 if own else 10.0, a.race)
        key = settings_key(w, s, st, x)
        return TrialResult(key, label_of(s), s.to_dict(), "ok", 1.0, wall_s=a.race_wall,
                           extra={"race": points, "validation": "simulated"})

    with tempfile.TemporaryDirectory() as d:
        j = Journal(Path(d) / "j.jsonl", fingerprint=last.get("fingerprint"), machine=last.get("machine"))
        j.load(a.workload)
        opts = TuneOptions(time_budget_s=a.budget, race_s=a.race, batch_size=a.batch)
        res = Tuner(a.workload, Hardware(1, "9.0"), opts, j, trial_fn=trial, race_fn=race,
                    clock=clock).run()
    print("\n".join(log))
    for decision in res.decisions:
        print(f"- {decision.stage}: {decision.text}")
    offer = res.batch_offer
    print(f"answer: {res.best.label if res.best else None}; offer: "
          f"{offer.verdict + ' ' + str(offer.batch) if offer else res.batch_note}; "
          f"simulated wall {clock.now:.0f} s")


if __name__ == "__main__":
    main()
