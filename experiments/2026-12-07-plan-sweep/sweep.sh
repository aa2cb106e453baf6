#!/usr/bin/env bash
# tfaccel plan --spec H200 -- python SCRIPT for keras-io's four scripts of issue 44
# ($EXAMPLES: wgan_gp.py, bidirectional_lstm_imdb.py, mnist_convnet.py, autoencoder.py,
# on learnable data) and every script of the shakedowns, each in a folder of its own
# under the current one; a line each in summary.txt: exit code, script, first line.
#   REPO=/path/to/tfaccel EXAMPLES=/path/to/keras-io-scripts bash sweep.sh
export PYTHONPATH=$REPO/experiments/2026-12-04-time-to-target/learnable_datasets LEARNABLE_SCALE=0.1
for f in $EXAMPLES/*.py $REPO/experiments/2026-12-0[3567]-script-shakedown/*.py; do
  n=$(basename "$(dirname "$f")")-$(basename "$f" .py); rm -rf d-$n; mkdir d-$n; cd d-$n
  timeout 300 tfaccel plan --spec H200 -- python $f > out.txt 2>&1; rc=$?
  echo "$rc $n $(grep -m1 -E 'memory plan|^Error|error:' out.txt | cut -c1-150)" >> ../summary.txt
  cd ..
done
echo ALLDONE >> summary.txt
