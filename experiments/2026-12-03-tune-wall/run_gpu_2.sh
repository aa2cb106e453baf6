#!/usr/bin/env bash
# On the GPU machine, detached (setsid nohup bash run_gpu_2.sh &), the second session of
# 2026-12-03: the compile probe split into its parts (fresh caches, the same caches again,
# no autotuning), then a 10-minute tune of the user-style text transformer; results under
# $DEST, a done-marker per part.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/experiments/2026-12-03-tune-wall"
DEST="${DEST:-/tmp/wall-out}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$DEST"
python3 "$HERE/compile_probe.py" "$DEST/compile-probe-2.json" base again autotune0 > probe.log 2>&1
touch probe.done
DEST="$DEST" BUDGET=10 TARGETS="${USER_MODELS:-text_transformer}" \
  bash "$ROOT/experiments/2026-12-02-user-models/run_gpu.sh"
touch tune.done
