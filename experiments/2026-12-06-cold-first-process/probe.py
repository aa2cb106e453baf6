"""Why a tune's first process runs keras-io's WGAN-GP baseline about 30 % slower than
the next (H100s, 2026-12-06: 2,444-2,540 samples/s, then 3,580-3,638, three tunes;
windows within 1 % in each process). The baseline trial (float32, no XLA, the script's
own batch) run three times in fresh processes, four ways, each with a CUDA driver
kernel cache of its own that starts empty (CUDA_CACHE_PATH):
  default:    as tune runs it;
  threshold2: TF_AUTOTUNE_THRESHOLD=2 (TensorFlow autotunes each convolution until one
              algorithm wins twice: a first timing taken while kernels were compiled
              would not decide alone);
  no-autotune: TF_CUDNN_USE_AUTOTUNE=0 (cuDNN's heuristics choose: does the first
              process still differ?);
  warm-first: the default's cache folder again, one process (a warm driver cache alone).
If `default` shows the split and `threshold2` does not, TensorFlow's one-shot autotuning
in a cold process is the cause, and the threshold a same-training knob to measure.
One JSON line per run. On the GPU machine, after the TensorFlow set-up, with keras-io's
wgan_gp.py in $EXAMPLES:
  PARTS=cold_probe bash experiments/2026-12-04-time-to-target/owed.sh   (or, in $EXAMPLES:
  PYTHONPATH=$REPO/src:$REPO/experiments/2026-12-04-time-to-target/learnable_datasets \
      python3 $REPO/experiments/2026-12-06-cold-first-process/probe.py > cold.jsonl)
(about 3 minutes of runs of about 15 s each).
"""

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from tfaccel.optimize.settings import Settings
from tfaccel.script.command import parse_command
from tfaccel.script.run import ScriptTrial
from tfaccel.trial.runner import StepPlan, run_trial

SCRIPT = shlex.split(os.environ.get("PROBE_SCRIPT", "python wgan_gp.py"))
BASELINE = Settings(precision="float32", xla="off", steps_per_execution=1, batch_size=None)
MODES = {
    "default": {},
    "threshold2": {"TF_AUTOTUNE_THRESHOLD": "2"},
    "no-autotune": {"TF_CUDNN_USE_AUTOTUNE": "0"},
}


def one(mode: str, run: int, env: dict[str, str]) -> None:
    trial = run_trial(
        ScriptTrial(parse_command(SCRIPT)), BASELINE, StepPlan(), 600.0, env_overrides=env
    )
    line = {"mode": mode, "run": run, "status": trial.status, "error": trial.error}
    line.update(samples_per_s=trial.samples_per_s, windows=trial.windows)
    line.update(compile_s=trial.compile_s, setup_s=trial.extra.get("setup_s"))
    print(json.dumps(line), flush=True)


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="cold-probe-"))
    for mode, env in MODES.items():
        cache = {"CUDA_CACHE_PATH": str(base / mode), "CUDA_CACHE_MAXSIZE": str(4 << 30)}
        for run in (1, 2, 3):
            one(mode, run, {**env, **cache})
    one("warm-first", 1, {"CUDA_CACHE_PATH": str(base / "default")})


if __name__ == "__main__":
    sys.exit(main())
