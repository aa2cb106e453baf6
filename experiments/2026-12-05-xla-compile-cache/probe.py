"""Where a transformer trial's 50-56 s of XLA compilation go on the GPU, and what the
trials' shared caches save (tfaccel.trial.runner.compile_cache_env): one trial of the
time-to-target transformer entry point (bf16, XLA, steps_per_execution 25, batch 64)
run five ways, each a fresh process, in this order:
  cold:     a new cache folder;
  warm:     the same settings and folder again (TensorFlow's executable cache and XLA's
            autotuning results should both hit);
  prefetch: the same folder, device prefetch on (one more traced tf.function: does the
            executable cache miss, as it does on the CPU when the function's name shifts?);
  no-tune:  a new folder, XLA_FLAGS --xla_gpu_autotune_level=0 (how much is autotuning);
  none:     no caches at all.
Prints one JSON line per run (compile_s, setup_s, samples/s, wall) and the cache
folders' file counts. Run on the GPU machine after the TensorFlow set-up:
  PYTHONPATH=src:experiments/2026-12-04-time-to-target python3 \
      experiments/2026-12-05-xla-compile-cache/probe.py > $OUT/compile.jsonl
"""

import json
import os
import sys
import tempfile
from pathlib import Path

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, compile_cache_env, run_trial

TARGET = "entry_points:transformer_classifier"
BEST = Settings(precision="mixed_bfloat16", xla="jit", steps_per_execution=25, batch_size=64)
PLAN = StepPlan(warmup=10, windows=3, window=20, window_s=3.0, min_windows=3)


def one(name: str, settings: Settings, env: dict[str, str] | None) -> None:
    trial = run_trial(TARGET, settings, PLAN, timeout_s=600.0, env_overrides=env)
    line = {
        "run": name,
        "status": trial.status,
        "error": trial.error,
        "compile_s": trial.compile_s,
        "setup_s": trial.extra.get("setup_s"),
        "samples_per_s": trial.samples_per_s,
        "wall_s": trial.wall_s,
    }
    print(json.dumps(line), flush=True)


def files(folder: Path) -> dict[str, int]:
    return {sub.name: sum(1 for _ in sub.rglob("*") if _.is_file()) for sub in folder.iterdir()}


def main() -> None:
    os.environ.setdefault("TTT_EXAMPLES", "40000")
    base = Path(tempfile.mkdtemp(prefix="compile-probe-"))
    shared = base / "shared"
    one("cold", BEST, compile_cache_env(shared))
    one("warm", BEST, compile_cache_env(shared))
    one("prefetch", BEST.replace(prefetch="device"), compile_cache_env(shared))
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0"
    ).strip()
    one("no-tune", BEST, compile_cache_env(base / "no-tune"))
    del os.environ["XLA_FLAGS"]
    one("none", BEST, None)
    print(json.dumps({"cache_files": {"shared": files(shared)}}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
