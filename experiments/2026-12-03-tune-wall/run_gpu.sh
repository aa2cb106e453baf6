#!/usr/bin/env bash
# On the GPU machine, detached (setsid nohup bash run_gpu.sh &): the compile probe, the
# full ResNet-50 tune, then a 10-minute tune of a user-style model; results under $DEST,
# a done-marker per part.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/experiments/2026-12-03-tune-wall"
DEST="${DEST:-/tmp/wall-out}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$DEST"
python3 "$HERE/compile_probe.py" "$DEST/compile-probe.json" > probe.log 2>&1
touch probe.done
t0=$(date +%s)
python3 -m tfaccel tune resnet50 --batch 256 --max-batch 1024 --format json \
  --output "$DEST/resnet50.json" --journal "$DEST/resnet50.jsonl" \
  > tune-resnet50.json 2> tune-resnet50.err
echo "resnet50 exit $? wall $(( $(date +%s) - t0 )) s" >> summary.txt
touch resnet50.done
for m in ${USER_MODELS:-text_transformer}; do
  DEST="$DEST" BUDGET=10 TARGETS="$m" bash "$ROOT/experiments/2026-12-02-user-models/run_gpu.sh"
  touch "$m.done"
done
