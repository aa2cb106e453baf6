#!/usr/bin/env bash
# Tune the three user-style models and the public example scripts, one after the other,
# each with --time-budget $BUDGET minutes; results under $DEST (default /tmp/exp-out).
#   BUDGET=3 bash experiments/2026-12-02-user-models/run_gpu.sh
# Start it with setsid (setsid nohup bash run_gpu.sh &): a job left in the device call's
# process group ends with the call.
# TARGETS picks some of them (default: all), for example TARGETS="unet text_transformer".
# The public scripts are not part of this repository: put them in $EXAMPLES first
# (mnist_convnet.py, text_classification_with_transformer.py and
# image_classification_with_vision_transformer.py from keras-io's examples).
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/experiments/2026-12-02-user-models"
DEST="${DEST:-/tmp/exp-out}"; BUDGET="${BUDGET:-3}"; EXAMPLES="${EXAMPLES:-$ROOT/.gpu-examples}"
TARGETS="${TARGETS:-unet text_transformer stacked_lstm mnist_convnet text_classification vit}"
mkdir -p "$DEST"
export PYTHONPATH="$ROOT/src:$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tune() {  # name, then tfaccel tune's arguments
  local name="$1"; shift
  case " $TARGETS " in *" $name "*) ;; *) return ;; esac
  local t0=$(date +%s)
  python3 -m tfaccel tune --time-budget "${BUDGET}m" --format json \
    --output "$DEST/$name.json" --journal "$DEST/$name.jsonl" "$@" \
    > "$DEST/tune-$name.json" 2> "$DEST/tune-$name.err"
  echo "$name exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
}
cd "$HERE"
for m in unet text_transformer stacked_lstm; do tune "$m" "user_models:$m"; done
cd "$EXAMPLES"
export PYTHONPATH="$HERE/local_datasets:$PYTHONPATH"  # the environment's own sitecustomize
tune mnist_convnet -- python mnist_convnet.py
tune text_classification -- python text_classification_with_transformer.py
tune vit -- python image_classification_with_vision_transformer.py  # selects jax: refused
touch "$DEST/done"
