"""One XLA trial of ResNet-50 (bf16, batch 256) twice, each with a fresh cache: XLA's
compilation on one thread (TensorFlow's default), then over every core
(`xla_cache_env`'s parallelism flags). Prints and writes the two side by side.

    python compile_probe.py OUT.json
"""

import json
import os
import sys
import tempfile

from tfaccel.environment import environment
from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, run_trial, xla_cache_env

s = Settings(precision="mixed_bfloat16", xla="jit", batch_size=256, steps_per_execution=1)
rows = []
for name in ("one thread", "every core"):
    with tempfile.TemporaryDirectory() as d:
        env = xla_cache_env(d)
        if name == "one thread":
            env["XLA_FLAGS"] = " ".join(
                f for f in env["XLA_FLAGS"].split() if "compilation_parallelism" not in f
            )
        r = run_trial("resnet50", s, StepPlan(10, 5, 20, 3.0), 600, env_overrides=env)
    rows.append(
        {
            "compile": name,
            "xla_flags": env["XLA_FLAGS"],
            "status": r.status,
            "compile_s": r.compile_s,
            "wall_s": r.wall_s,
            "samples_per_s": r.samples_per_s,
            "spread": r.spread,
            "error": r.error,
        }
    )
    print(rows[-1], flush=True)
out = {"trial": s.to_dict(), "cores": os.cpu_count(), "runs": rows, "environment": environment()}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1, default=str)
