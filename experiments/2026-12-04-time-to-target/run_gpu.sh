#!/usr/bin/env bash
# On the GPU machine, after the TensorFlow set-up (../../tools, ../../../shared/gpu):
# tune keras-io's public example scripts, unmodified, on learnable data (labels from a
# fixed teacher: learnable_datasets/sitecustomize.py) with --time-budget $BUDGET, then
# train each for $WALL seconds under plain python and under tfaccel run (the
# same-training answer) and keep both logs (their val_loss lines).
#   setsid nohup bash experiments/2026-12-04-time-to-target/run_gpu.sh &
# The scripts are not part of this repository: put keras-io's examples/vision/
# mnist_convnet.py and examples/nlp/bidirectional_lstm_imdb.py in $EXAMPLES first.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/experiments/2026-12-04-time-to-target"
DEST="${DEST:-/tmp/ttt}"; BUDGET="${BUDGET:-10}"; WALL="${WALL:-60}"; RACE="${RACE:-45s}"
EXAMPLES="${EXAMPLES:-$ROOT/.gpu-examples}"
TARGETS="${TARGETS:-mnist_convnet bidirectional_lstm_imdb}"
ENTRY_POINTS="${ENTRY_POINTS:-}"  # of entry_points.py, for example transformer_classifier
RUNS="${RUNS:-$TARGETS}"; REPEAT="${REPEAT:-1}"
mkdir -p "$DEST"
{ nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
  python3 -c "import tensorflow as tf, keras; print('tensorflow', tf.__version__, 'keras', keras.__version__)"
  echo "budget $BUDGET race $RACE wall $WALL repeat $REPEAT"; } > "$DEST/environment.txt" 2>&1
export PYTHONPATH="$ROOT/src:$HERE/learnable_datasets${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tune() {  # name, then what to tune
  local t="$1" t0=$(date +%s); shift
  python3 -m tfaccel tune --time-budget "${BUDGET}m" --race "$RACE" --format json \
    --output "$DEST/$t.json" --journal "$DEST/$t.jsonl" --plot "$DEST/$t.png" \
    "$@" > "$DEST/tune-$t.json" 2> "$DEST/tune-$t.err"
  echo "$t tune exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
}
cd "$EXAMPLES"
for t in $TARGETS; do tune "$t" -- python "$t.py"; done
for e in $ENTRY_POINTS; do (cd "$HERE" && tune "$e" "entry_points:$e"); done
for t in $RUNS; do  # for $WALL seconds each (same_wall.sh), with the tune's settings
  [ -f "$DEST/$t.json" ] && WALL="$WALL" REPEAT="$REPEAT" \
    bash "$HERE/same_wall.sh" "$EXAMPLES" "$t.py" "$DEST/$t.json" "$DEST/wall-$t"
done
touch "$DEST/done"
