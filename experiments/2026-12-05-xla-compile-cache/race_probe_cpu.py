"""Does a race run with the best trial's settings load the trial's executable from the
trials' shared persistent XLA cache? Prints each run's compile time and the cache's file
count after it. On the CPU, from experiments/2026-12-04-time-to-target:
  TTT_EXAMPLES=2000 PYTHONPATH=../../src:. python3 ../2026-12-05-xla-compile-cache/race_probe_cpu.py
"""

import json
import tempfile
from pathlib import Path
from typing import Any

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, compile_cache_env, run_trial

TARGET = "entry_points:transformer_classifier"
BEST = Settings(precision="float32", xla="jit", steps_per_execution=5, batch_size=64)
PLAN = StepPlan(warmup=4, windows=2, window=5, window_s=1.0, min_windows=2)
RACE = {"race": {"seconds": 10.0, "lr": None}}


def executables(base: Path) -> list[str]:
    return sorted(p.name for p in (base / "executables").rglob("*") if p.is_file())


def one(name: str, base: Path, extra: dict[str, Any] | None = None) -> None:
    env = compile_cache_env(base)
    trial = run_trial(TARGET, BEST, PLAN, timeout_s=900.0, env_overrides=env, extra=extra)
    line = {
        "run": name,
        "status": trial.status,
        "error": (trial.error or "")[:200],
        "compile_s": trial.compile_s,
        "wall_s": round(trial.wall_s, 1),
        "executables": len(executables(base)),
        "race_points": len(trial.extra.get("race") or []),
    }
    print(json.dumps(line), flush=True)


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="race-cache-"))
    one("trial", base)
    one("trial again", base)
    one("race run", base, RACE)
    one("race run again", base, RACE)
    print(json.dumps({"executables": executables(base)}))


if __name__ == "__main__":
    main()
