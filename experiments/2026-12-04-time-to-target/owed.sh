#!/usr/bin/env bash
# What the next lent H200 owes issues 42 and 44, in order of worth, detached
# (setsid nohup bash owed.sh &), after the TensorFlow set-up and with keras-io's
# scripts in $EXAMPLES; each part leaves its files under $DEST and a line in
# $DEST/summary.txt, so that a machine taken back part-way keeps what ended.
#  1. the LSTM script, tuned and raced under the current rules (the next batch below a
#     loser; overfitting told from drifting), with a same-wall pair;
#  2. issue 42's smoke after the restructuring: tune tiny, and the LSTM above through
#     `tune --` and `run` (its pair);
#  3. the autoencoder, raced again (batch 2048 lost; 512 is next), with a pair;
#  4. the transformer entry point, ten minutes afresh: the budget's end now kept for
#     its batch offer's ladder and race.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"; ROOT="$(cd "$HERE/../.." && pwd)"
DEST="${DEST:-/tmp/ttt}"; EXAMPLES="${EXAMPLES:-/tmp/examples}"
mkdir -p "$DEST"
export MPLBACKEND=Agg
EXAMPLES="$EXAMPLES" DEST="$DEST/lstm" TARGETS=bidirectional_lstm_imdb \
  RUNS=bidirectional_lstm_imdb WALL=130 RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
echo "lstm done" >> "$DEST/summary.txt"
mkdir -p "$DEST/tiny" && (cd "$DEST/tiny" && PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" \
  python3 -m tfaccel tune tiny --time-budget 2m --format json > tune.json 2> tune.err
  echo "tiny exit $?" >> "$DEST/summary.txt")
EXAMPLES="$EXAMPLES" DEST="$DEST/autoencoder" TARGETS=autoencoder RUNS=autoencoder \
  WALL=130 RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
echo "autoencoder done" >> "$DEST/summary.txt"
EXAMPLES="$EXAMPLES" DEST="$DEST/transformer" TARGETS=" " RUNS=none \
  ENTRY_POINTS=transformer_classifier RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
echo "transformer done" >> "$DEST/summary.txt"
touch "$DEST/all-done"
