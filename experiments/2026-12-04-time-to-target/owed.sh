#!/usr/bin/env bash
# What the next lent H200 owes issue 44, in order of worth, detached
# (setsid nohup bash owed.sh &), after the TensorFlow set-up and with keras-io's
# scripts in $EXAMPLES; each part leaves its files under $DEST and a line in
# $DEST/summary.txt, so that a machine taken back part-way keeps what ended.
#  1. the transformer entry point, ten minutes afresh: the budget's end kept for its
#     batch offer's ladder and race;
#  2. the autoencoder's same-wall pair (its tune of 2026-12-05 is committed), seeded;
#  3. the LSTM script's batch 512 race: its tune of 2026-12-05 resumed from the
#     journal it left (benchmarks/results/ttt-bidirectional-lstm-h200/), whose budget
#     ended before that race;
#  4. two seeded same-wall pairs of the LSTM with the settings of step 1;
#  5. the WGAN-GP script at the full ten minutes (the 8-minute run cut its philox trial).
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"; ROOT="$(cd "$HERE/../.." && pwd)"
DEST="${DEST:-/tmp/ttt}"; EXAMPLES="${EXAMPLES:-/tmp/examples}"
RESULTS="$ROOT/benchmarks/results"
mkdir -p "$DEST/lstm"
export MPLBACKEND=Agg
transformer() {
  EXAMPLES="$EXAMPLES" DEST="$DEST/transformer" TARGETS=" " RUNS=none \
    ENTRY_POINTS=transformer_classifier RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
}
autoencoder() {
  WALL=130 bash "$HERE/same_wall.sh" "$EXAMPLES" autoencoder.py \
    "$RESULTS/ttt-autoencoder-h200/tfaccel.json" "$DEST/wall-autoencoder"
}
lstm() {
  cp "$RESULTS/ttt-bidirectional-lstm-h200/journal.jsonl" "$DEST/lstm/bidirectional_lstm_imdb.jsonl"
  EXAMPLES="$EXAMPLES" DEST="$DEST/lstm" TARGETS=bidirectional_lstm_imdb \
    RUNS=none RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
}
lstm_pairs() {
  WALL=130 REPEAT=2 bash "$HERE/same_wall.sh" "$EXAMPLES" bidirectional_lstm_imdb.py \
    "$DEST/lstm/bidirectional_lstm_imdb.json" "$DEST/lstm/wall-bidirectional_lstm_imdb"
}
wgan() {
  EXAMPLES="$EXAMPLES" DEST="$DEST/wgan" TARGETS=wgan_gp RUNS=none \
    RACE=60s BUDGET=10 bash "$HERE/run_gpu.sh"
}
# PARTS: which of them, in this order (a machine taken back part-way resumes with the rest)
for part in ${PARTS:-transformer autoencoder lstm lstm_pairs wgan}; do
  "$part"; echo "$part done" >> "$DEST/summary.txt"
done
touch "$DEST/all-done"
