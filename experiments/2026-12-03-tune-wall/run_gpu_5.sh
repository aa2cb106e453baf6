#!/usr/bin/env bash
# For the next machine, detached (setsid nohup bash run_gpu_5.sh &), after the TF 2.21
# set-up: the whole ResNet-50 search with the search of 2026-12-03 (second part:
# steps_per_execution and input_cast in one trial, the allocator and device prefetch
# left out on long steps, trials ending at their result), its wall time against the
# 10-minute target; then 10-minute tunes of $SECOND (targets of
# ../2026-12-02-user-models/run_gpu.sh, in the order given). Each part leaves one
# archive, $DEST/NAME.tgz (its result, journal, log, settings), and a line in summary.txt.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${DEST:-/tmp/exp-out}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
pack() {  # name: one archive of the part's files
  (cd "$DEST" && tar czf "$1.tgz" $(ls | grep -E "^(tune-)?$1(\.|-tune)" | grep -v tgz))
}
t0=$(date +%s)
python3 -m tfaccel tune resnet50 --batch 256 --max-batch 1024 --format json \
  --output "$DEST/resnet50.json" --journal "$DEST/resnet50.jsonl" \
  > "$DEST/tune-resnet50.json" 2> "$DEST/tune-resnet50.err"
echo "resnet50 exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
pack resnet50
for m in ${SECOND:-}; do
  DEST="$DEST" BUDGET=10 TARGETS="$m" EXAMPLES="$ROOT/.gpu-examples" \
    bash "$ROOT/experiments/2026-12-02-user-models/run_gpu.sh"
  pack "$m"
done
touch "$DEST/all.done"
