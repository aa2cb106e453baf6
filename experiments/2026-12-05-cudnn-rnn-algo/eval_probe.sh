#!/usr/bin/env bash
# The same trained weights evaluated under TensorFlow's default cuDNN RNN algorithm and
# under each one TensorFlow's debug variables choose (0 standard, 1 persist static,
# 2 persist dynamic; tensor ops off and on), one process each; one JSON line each.
#   bash eval_probe.sh > eval-results.jsonl   (on the GPU machine, about 3 minutes)
cd "$(dirname "$0")"
w="${TMPDIR:-/tmp}/rnn-eval-probe.weights.h5"
python3 eval_probe.py train default "$w"
python3 eval_probe.py eval default "$w"
for algo in 0 1 2; do for ops in 0 1; do
  TF_DEBUG_CUDNN_RNN=1 TF_DEBUG_CUDNN_RNN_ALGO=$algo TF_DEBUG_CUDNN_RNN_USE_TENSOR_OPS=$ops \
    python3 eval_probe.py eval "algo=$algo tensor_ops=$ops" "$w"
done; done 2>/dev/null
