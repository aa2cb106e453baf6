"""A tune replayed from a GPU journal under the current rules, on any machine: every
trial and race the journal holds is read from it (as a resumed tune on that machine
would), and one it lacks comes back as an error ("not in the journal"), so the answer
is what the journal's own figures decide. For asking what today's rules make of a
journal measured under older ones, without a GPU:
  PYTHONPATH=src python3 experiments/2026-12-04-time-to-target/replay.py \
      JOURNAL "script: python bidirectional_lstm_imdb.py"
(copy the journal first: the replay appends its errors to it).
"""

import json
import sys
from pathlib import Path
from typing import Any

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, label_of, settings_key
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, TuneOptions
from tfaccel.tune.search import Tuner

MISSING: list[str] = []


def absent(w: str, s: Settings, st: StepPlan, x: dict[str, Any] | None = None) -> TrialResult:
    MISSING.append(("race " if x else "") + label_of(s))
    key = settings_key(w, s, st, x)
    return TrialResult(key, label_of(s), s.to_dict(), "error", None, error="not in the journal")


def main(path: Path, workload: str) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    last = [row for row in rows if row.get("workload") == workload][-1]
    j = Journal(path, fingerprint=last.get("fingerprint"), machine=last.get("machine"))
    j.load(workload)
    opts = TuneOptions(time_budget_s=1e6, race_s=60.0)
    tuner = Tuner(
        workload,
        Hardware(1, "9.0"),
        opts,
        j,
        trial_fn=lambda w, s, st, t: absent(w, s, st),
        race_fn=lambda w, s, st, t, x: absent(w, s, st, x),
    )
    res = tuner.run()
    for decision in res.decisions:
        print(f"- {decision.stage}: {decision.text}")
    print(f"answer: {res.best.label if res.best else None}")
    print(f"not in the journal: {MISSING}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
