#!/usr/bin/env bash
# (c) of issue 44: one script for $WALL seconds under plain python, then under
# tfaccel run with a tune's settings file, $REPEAT times; each log's validation and
# training losses at the epochs' ends (under DETERMINISTIC=1, the training's are the
# same in both runs where the settings keep the training).
# Both runs of pair i are seeded alike (LEARNABLE_SEED=i, learnable_datasets): the
# same initial weights and shuffle, so that the pair differs only in the settings.
# DETERMINISTIC=1 turns on TensorFlow's op determinism in both (cuDNN's training is not
# deterministic: otherwise each pair also differs by that noise). Plain python runs
# first; ORDER=run puts `tfaccel run` first, ORDER=alternate in the even pairs, so that
# an order effect (a warmer GPU, the driver's kernel cache filled by the first) is not
# taken for the settings'.
#   bash same_wall.sh EXAMPLES_DIR SCRIPT.py SETTINGS.json DEST
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; HERE="$ROOT/experiments/2026-12-04-time-to-target"
EXAMPLES="$1"; SCRIPT="$2"; SETTINGS="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"; DEST="$4"
WALL="${WALL:-130}"; REPEAT="${REPEAT:-1}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src:$HERE/learnable_datasets${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$EXAMPLES"
for_wall() {  # log, command...
  local log="$1"; shift
  setsid "$@" > "$log" 2>&1 &
  local pid=$! t0=$(date +%s)
  while kill -0 "$pid" 2>/dev/null && (( $(date +%s) - t0 < WALL )); do sleep 1; done
  kill -INT -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
  echo "$(basename "$log"): $(( $(date +%s) - t0 )) s, val_loss by epoch:" \
    $(tr '\r' '\n' < "$log" | grep -o 'val_loss: [0-9.]*' | cut -d' ' -f2) \
    "; loss:" $(tr '\r' '\n' < "$log" | grep 'val_loss' | grep -o ' - loss: [0-9.]*' | cut -d' ' -f4) \
    | tee -a "$DEST/summary.txt"
}
[ "${DETERMINISTIC:-}" = 1 ] && export LEARNABLE_DETERMINISTIC=1
for i in $(seq 1 "$REPEAT"); do
  export LEARNABLE_SEED="$i"
  plain=(for_wall "$DEST/plain-$i.log" python3 "$SCRIPT")
  run=(for_wall "$DEST/run-$i.log" python3 -m tfaccel run --config "$SETTINGS" -- python "$SCRIPT")
  if [ "${ORDER:-}" = run ] || { [ "${ORDER:-}" = alternate ] && (( i % 2 == 0 )); }; then
    "${run[@]}"; "${plain[@]}"
  else "${plain[@]}"; "${run[@]}"; fi
done
