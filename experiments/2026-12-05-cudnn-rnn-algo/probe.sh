#!/usr/bin/env bash
# Each cuDNN RNN algorithm TensorFlow can be told to use (TF_DEBUG_CUDNN_RNN=1,
# TF_DEBUG_CUDNN_RNN_ALGO = cudnnRNNAlgo_t: 0 standard, 1 persist static, 2 persist
# dynamic, 3 persist static small-h; TF_DEBUG_CUDNN_RNN_USE_TENSOR_OPS) against
# TensorFlow's default, on keras-io's bidirectional LSTM model; one JSON line each.
#   bash probe.sh > results.jsonl
cd "$(dirname "$0")"
for b in 32; do
  BATCH=$b python3 probe.py default
  for algo in 0 1 2 3; do for ops in 0 1; do
    BATCH=$b TF_DEBUG_CUDNN_RNN=1 TF_DEBUG_CUDNN_RNN_ALGO=$algo TF_DEBUG_CUDNN_RNN_USE_TENSOR_OPS=$ops \
      python3 probe.py "algo=$algo tensor_ops=$ops"
  done; done
done 2>/dev/null
