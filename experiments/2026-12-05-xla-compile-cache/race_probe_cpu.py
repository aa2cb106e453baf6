"""Does a race run with the best trial's settings load the trial's executable from the
trials' shared persistent XLA cache? Prints each run's compile time and the cache's file
count after it. On the CPU, from experiments/2026-12-04-time-to-target:
  TTT_EXAMPLES=2000 PYTHONPATH=../../src:. python3 ../2026-12-05-xla-compile-cache/race_probe_cpu.py
"""
import json, os, sys, tempfile
from pathlib import Path
from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, compile_cache_env, run_trial

TARGET = "entry_points:transformer_classifier"
S = Settings(precision="float32", xla="jit", steps_per_execution=5, batch_size=64)
PLAN = StepPlan(warmup=4, windows=2, window=5, window_s=1.0, min_windows=2)
base = Path(tempfile.mkdtemp(prefix="cc-")); env = compile_cache_env(base)
def count(): return sum(1 for _ in (base / "executables").rglob("*") if _.is_file())
def one(name, settings, extra=None):
    t = run_trial(TARGET, settings, PLAN, timeout_s=900.0, env_overrides=env, extra=extra)
    print(json.dumps({"run": name, "status": t.status, "err": (t.error or "")[:200], "compile_s": t.compile_s,
          "wall_s": round(t.wall_s, 1), "files": count(), "points": len(t.extra.get("race") or [])}), flush=True)
one("trial", S)
one("trial again", S)
one("race run", S, {"race": {"seconds": 10.0, "lr": None}})
one("race run again", S, {"race": {"seconds": 10.0, "lr": None}})
print(sorted(p.name for p in (base / "executables").rglob("*") if p.is_file()))
