#!/usr/bin/env bash
# For the next machine, detached (setsid nohup bash run_gpu_3.sh &), after the TF 2.21
# set-up: a 10-minute tune of FIRST (default unet), the floor smoke once every floor part
# is in /tmp/floorparts (send them while the tune runs; touch /tmp/floorparts/complete
# after the last), then a 10-minute tune of SECOND if set. A done-marker per part under
# $DEST. The public scripts (mnist_convnet, text_classification) need .gpu-examples
# carried along.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${DEST:-/tmp/exp-out}"
mkdir -p "$DEST"
tune() {
  DEST="$DEST" BUDGET=10 TARGETS="$1" EXAMPLES="$ROOT/.gpu-examples" \
    bash "$ROOT/experiments/2026-12-02-user-models/run_gpu.sh"
  touch "$DEST/$1.done"
}
tune "${FIRST:-unet}"
while [ ! -f /tmp/floorparts/complete ]; do sleep 5; done
DEST=/tmp/floor-out bash "$ROOT/experiments/2026-12-03-floor-gpu/smoke.sh" > "$DEST/floor.log" 2>&1
touch "$DEST/floor.done"
if [ -n "${SECOND:-}" ]; then tune "$SECOND"; fi
touch "$DEST/all.done"
