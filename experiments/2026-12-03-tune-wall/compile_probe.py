"""One XLA trial of ResNet-50 (bf16, batch 256) per variant of XLA_FLAGS, each with a
fresh cache, back to back; prints and writes them side by side.

    python compile_probe.py OUT.json [VARIANT ...]

Variants: base (tfaccel's trial flags), parallel (+ LLVM compilation over every core),
autotune2 (autotuning without its correctness checks), autotune0 (no autotuning),
again (base flags, reusing the caches of the run before it: what is left of the compile
time when XLA's autotuning results and TensorFlow's persistent executable cache both hit).
Default: base parallel (the run of 2026-12-03).
"""

import json
import os
import sys
import tempfile

from tfaccel.environment import environment
from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, run_trial, xla_cache_env

EXTRA = {
    "base": "",
    "parallel": "--xla_gpu_enable_llvm_module_compilation_parallelism=true "
    f"--xla_gpu_force_compilation_parallelism={os.cpu_count()}",
    "autotune2": "--xla_gpu_autotune_level=2",
    "autotune0": "--xla_gpu_autotune_level=0",
    "again": "",
}
s = Settings(precision="mixed_bfloat16", xla="jit", batch_size=256, steps_per_execution=1)
rows = []
d = tempfile.mkdtemp()
for name in sys.argv[2:] or ["base", "parallel"]:
    if name != "again":  # a fresh cache
        d = tempfile.mkdtemp()
    env = xla_cache_env(d)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {EXTRA[name]}".strip()
    r = run_trial("resnet50", s, StepPlan(10, 5, 20, 3.0), 600, env_overrides=env)
    rows.append(
        {
            "variant": name,
            "xla_flags": env.get("XLA_FLAGS"),
            "tf_xla_flags": env.get("TF_XLA_FLAGS"),
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
