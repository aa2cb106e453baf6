#!/usr/bin/env bash
# For the next machine, detached (setsid nohup bash run_gpu_4.sh &), after the TF 2.21
# set-up: the full ResNet-50 tune with the search of 2026-12-03 (4x batch ladder with
# its pause, steps_per_execution 25 first, settled windows, budget stop), no budget, its
# wall time against the 10-minute target; then a 10-minute tune of SECOND (a target of
# ../2026-12-02-user-models/run_gpu.sh) if set. Results and done-markers under $DEST.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${DEST:-/tmp/exp-out}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m tfaccel tune resnet50 --batch 256 --max-batch 1024 --format json \
  --output "$DEST/resnet50.json" --journal "$DEST/resnet50.jsonl" \
  > "$DEST/tune-resnet50.json" 2> "$DEST/tune-resnet50.err"
echo "resnet50 exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
touch "$DEST/resnet50.done"
if [ -n "${SECOND:-}" ]; then
  DEST="$DEST" BUDGET=10 TARGETS="$SECOND" EXAMPLES="$ROOT/.gpu-examples" \
    bash "$ROOT/experiments/2026-12-02-user-models/run_gpu.sh"
  touch "$DEST/$SECOND.done"
fi
touch "$DEST/all.done"
