"""A tune's figures from its journal and its settings file, for a run whose printed
result (`--format json` on stdout) did not come back from the GPU machine.

    python journal_summary.py JOURNAL.jsonl SETTINGS.json OUT.json [ENV.json]

The journal holds every trial in order with its wall time; the tune runs them one
after another, so the sum of the trial walls up to a trial is when it ended (within
the parent's bookkeeping: 814 s of trials against 815 s measured around a whole
ResNet-50 tune). Keras' defaults are the journal's second trial (the baseline first).
"""

import json
import sys


def summary(journal: str, settings: str) -> dict:
    records = [json.loads(line) for line in open(journal) if line.strip()]
    trials = [r["result"] for r in records]
    chosen = json.load(open(settings))
    defaults = trials[1]
    rows, at, best_so_far = [], 0.0, 0.0
    seconds_to_1_5x = None
    for t in trials:
        at += t["wall_s"] or 0.0
        rate = t["samples_per_s"] if t["status"] == "ok" else None
        best_so_far = max(best_so_far, rate or 0.0)
        if seconds_to_1_5x is None and best_so_far >= 1.5 * defaults["samples_per_s"]:
            seconds_to_1_5x = round(at, 1)
        rows.append(
            {
                "label": t["label"],
                "status": t["status"],
                "samples_per_s": rate,
                "spread": t["spread"],
                "windows": len(t["windows"]),
                "compile_s": t["compile_s"],
                "wall_s": t["wall_s"],
                "ended_at_s": round(at, 1),
            }
        )
    best = chosen["measured"]["samples_per_s"]
    return {
        "workload": records[0]["workload"],
        "trials": rows,
        "keras_defaults": {"label": defaults["label"], "samples_per_s": defaults["samples_per_s"]},
        "best": {"settings": chosen["settings"], "samples_per_s": best},
        "speedup_over_keras_defaults": round(best / defaults["samples_per_s"], 3),
        "seconds_to_1_5x_keras_defaults": seconds_to_1_5x,
        "trial_wall_s_total": round(at, 1),
        "compile_s_total": round(sum(t["compile_s"] or 0.0 for t in trials), 1),
    }


if __name__ == "__main__":
    doc = summary(sys.argv[1], sys.argv[2])
    if len(sys.argv) > 4:
        doc["environment"] = json.load(open(sys.argv[4]))
    json.dump(doc, open(sys.argv[3], "w"), indent=1)
    print(json.dumps({k: v for k, v in doc.items() if k not in ("trials", "best", "environment")}))
