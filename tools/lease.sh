#!/usr/bin/env bash
# The GPU evidence for issues 4-8 in one resumable driver, for a two-GPU machine.
#
#   bash tools/lease.sh SECONDS
#
# The work runs in a driver detached from the device call (its own session, output to
# files), so a tune longer than one 10-minute call goes on between back-to-back calls;
# each call starts the driver if none runs (it resumes from the done-markers and the
# tune journals), waits up to SECONDS, and packs what is there into $OUT: lease.tgz, one
# trace-*.tgz per profile, lease.log. Should the machine kill the driver at a call's
# end, the next call starts it again and loses only the jobs in flight.
#
# Phases, each a list of job names (defaults below, or LEASE_BEFORE/_Q0/_Q1/_AFTER):
#   before: jobs that need both GPUs, one after the other;
#   workers: GPU 0 runs LEASE_Q0 and GPU 1 runs LEASE_Q1, side by side;
#   after: jobs that need both GPUs, and pairs "a+b" (a on GPU 0, b on GPU 1 at once).
#
# Before: the set-up in tools/README.md (TF parts, .gpu/bin/setup.sh, the wheels).
set -u
LIMIT="${1:-540}"
T0=$(date +%s)
R="${LEASE_DIR:-/tmp/lease}"
OUT="${OUT:-$PWD/gpu-out}"
REPO="$PWD"
mkdir -p "$R" "$OUT"
if [ -z "${LEASE_NO_TFENV:-}" ]; then
  # A machine that came back fresh has no TensorFlow: starting the driver there would
  # run every job at once to its failure and mark it done.
  [ -e /tmp/tfenv.sh ] || { echo "lease: no /tmp/tfenv.sh: this machine is not set up" \
    "(send the parts and run .gpu/bin/setup.sh first); nothing started"; exit 3; }
  source /tmp/tfenv.sh
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/cuda-cache NCCL_NVLS_ENABLE=0
export TF_CPP_MIN_LOG_LEVEL=2 MPLBACKEND=Agg
PY=python3
TF="$PY -m tfaccel"

job() {  # job NAME COMMAND...: run once; output in $R/NAME.log
  local name="$1"; shift
  [ -e "$R/done.$name" ] && return 0
  echo "[$(($(date +%s) - T0))s] start $name (GPU ${CUDA_VISIBLE_DEVICES:-all})" | tee -a "$R/lease.log"
  local t=$(date +%s)
  if [ -n "${LEASE_DRY:-}" ]; then  # LEASE_DRY=1: print each job's command, run none
    echo "$*" > "$R/$name.log"
  else
    ( cd "$R" && eval "$@" ) > "$R/$name.log" 2>&1
  fi
  local rc=$?
  echo "[$(($(date +%s) - T0))s] end $name rc=$rc in $(($(date +%s) - t))s" | tee -a "$R/lease.log"
  echo "$rc" > "$R/done.$name"
}

B="$PWD/benchmarks"
X="$PWD/experiments/2026-12-probes"  # one-off probes
declare -A CMD
ORDER=()
add() { ORDER+=("$1"); CMD[$1]="$2"; }
tune_cmd() {  # workload start-batch max-batch
  echo "$TF tune $1 --batch $2 --max-batch $3 --timeout 400 --output tfaccel-$1.json --force \
    ${LEASE_TUNE_BUDGET:+--time-budget ${LEASE_TUNE_BUDGET}m} \
    ${LEASE_TUNE_CONFIRM:+--confirm $LEASE_TUNE_CONFIRM} ${LEASE_TUNE_SKIP:+--skip $LEASE_TUNE_SKIP} \
    --journal tune-$1.jsonl --plot tune-$1.png --format json > tune-$1.out.json"
}
# One queue in priority order; each GPU's worker takes the next job nobody took.
profile_cmd() {  # config
  echo "$TF profile --start 20 --steps 10 --logdir prof-$1 --format json \
    --html profile-$1.html -- $PY $B/profile_r50.py --config $1 > profile-$1.json"
}
add tune-resnet50 "$(tune_cmd resnet50 256 1024)"
R50CAST='{"workload": "resnet50", "steps": {"warmup": 10, "windows": 5, "window": 20},
  "settings": {"precision": "mixed_bfloat16", "xla": "jit", "batch_size": 512,
  "steps_per_execution": 10, "input_cast": "compute"}}'
add trial-r50-cast-b512 "$PY -m tfaccel.trial.child '$R50CAST'"
# tfaccel profile's advice, applied: each pair runs in the same lease.
for c in tuned-prefetch tuned; do add "profile-$c" "$(profile_cmd $c)"; done
add gpt2-xla-flags "$PY $X/gpt2_xla_flags.py --out gpt2-xla-flags.json \
  ${LEASE_GPT2_SETTINGS:+--settings $LEASE_GPT2_SETTINGS}"
# GPT-2 generation with bf16 weights and without XLA's dot strength reduction (see
# gpt2_xla_flags.py), against the mixed policy and XLA's defaults.
add gpt2-b1 "$PY $X/gpt2_xla_flags.py --out gpt2-b1.json --batches 1 \
  --precisions mixed_bfloat16,bfloat16 --settings default,no-dsr"
add gpt2-b16 "$PY $X/gpt2_xla_flags.py --out gpt2-b16.json --batches 16 \
  --precisions bfloat16 --settings default,no-dsr"
# bf16 + no-dsr (1,889 tokens/s at batch 1) against tfaccel's decoding loop (a cache per
# layer, no re-stack) and command buffers, now that kernel launches set the pace.
add gpt2-loop-b1 "$PY $X/gpt2_xla_flags.py --out gpt2-loop-b1.json --batches 1 \
  --precisions bfloat16 --settings no-dsr,no-dsr-all --loops keras_hub,tfaccel"
add gpt2-loop-b16 "$PY $X/gpt2_xla_flags.py --out gpt2-loop-b16.json --batches 16 \
  --precisions bfloat16 --settings no-dsr --loops keras_hub,tfaccel"
add matmul-vs-torch "$PY $X/matmul_vs_torch.py --out matmul-vs-torch.json"
add monitor-overhead "$PY $B/monitor_overhead.py --out monitor-overhead.json"
for c in slow-input slow-input-fixed; do add "profile-$c" "$(profile_cmd $c)"; done
add profile-tuned-cast "$(profile_cmd tuned-cast)"
add profile-bert-tuned "$TF profile --start 20 --steps 10 --logdir prof-bert-tuned --format json \
  --html profile-bert-tuned.html -- $PY $B/profile_r50.py --workload bert_hub --config tuned \
  --batch 256 > profile-bert-tuned.json"
add tune-bert_hub "$(tune_cmd bert_hub 128 2048)"  # 512: 33.9 GB, 1024: 65.9 GB on the H200
add bench-workloads "$TF bench gpt2 conv3d remat --out bench-workloads.json --force --format json \
  > bench-workloads.out.json"
# The bench's own GPT-2 rows with XLA's small products kept as GEMMs (bf16 weights are a
# row of their own), and checkpointing's saving alone.
add bench-gpt2-gemv "$TF bench gpt2 --xla-options gemv_as_gemm --out bench-gpt2-gemv.json --force \
  --format json > bench-gpt2-gemv.out.json"
# ... and with CUDA graphs over XLA's while loops too (tfaccel's loop: 1,981 tokens/s at
# batch 1 in gpt2_xla_flags.py); the bench's own rows had not measured them.
add bench-gpt2-graphs "$TF bench gpt2 --xla-options gemv_as_gemm,command_buffers \
  --out bench-gpt2-graphs.json --force --format json > bench-gpt2-graphs.out.json"
add bench-remat "$TF bench remat --out bench-remat.json --force --format json > bench-remat.out.json"
# tfaccel's fused decoding step against KerasHub's loop and tfaccel's plain one, one child
# process each, batch 1 and 16, in the configuration of bench-gpt2-graphs.
add gpt2-fused "$PY $X/gpt2_xla_flags.py --out gpt2-fused.json --batches 1,16 \
  --precisions bfloat16 --settings no-dsr-all --loops keras_hub,tfaccel,fused"
# The fused step inside KerasHub's generate (fuse_generation), as users call it, beside
# KerasHub's own generate and the fused greedy loop.
add gpt2-fused-generate "$PY $X/gpt2_xla_flags.py --out gpt2-fused-generate.json \
  --batches 1,16 --precisions bfloat16 --settings no-dsr-all \
  --loops keras_hub,fused,fused_generate"
add tune-gpt2 "$(tune_cmd gpt2 32 128)"
# Dropout's masks under XLA (tfaccel.optimize.dropout): the attention probabilities' and
# the hidden states' dropout at BERT-base's shapes, forward and backward, each kind of
# mask side by side in one process; then the GPU test of the masks.
add dropout-micro "$PY $X/dropout_rng.py --out dropout-rng.json --micro-batch 256"
add pytest-dropout "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/optimize/test_dropout.py -rs"
# KerasHub BERT-base, one trial: the tune's best settings plus every knob under its
# threshold (BERTKNOBS), with the JSON members in $1 on top, its output to $2.
BERTXLA='"xla_options": ["cublaslt", "cudnn_layer_norm"], "dropout": "philox16"'
BERTKNOBS="\"precision\": \"mixed_bfloat16\", \"xla\": \"jit\", \"batch_size\": 2048, $BERTXLA"
bert_trial() {  # extra-settings out
  echo "$PY -m tfaccel.trial.child '{\"workload\": \"bert_hub\", \"steps\": {\"warmup\": 10, \
\"windows\": 5, \"window\": 20, \"window_s\": 3.0}, \"settings\": {$BERTKNOBS, $1}}' > $2"
}
# FP8 matrix products (tfaccel.optimize.float8): the GPU test that XLA forms an FP8 GEMM,
# then BERT-base with every knob measured so far, float8 among them, one trial (lease I,
# by hand: 4,608 seq/s, 2.48x the same lease's Keras defaults).
add pytest-float8 "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/optimize/test_float8.py -rs"
add bert-float8 "$(bert_trial '"float8": true, "steps_per_execution": 25' bert-float8.out)"
# cuDNN's flash attention from TensorFlow through XlaCustomCallV2 (XLA no longer rewrites
# attention into it; tfaccel.optimize.attention): does it compile and match, with a bias,
# with dropout; how fast at BERT-base's attention shapes, forward and backward, against
# XLA's own kernels (lease J: it compiles and matches; its dropout crashes). Then its GPU
# tests. (Lease J's queue also held BERT-base training with attention="cudnn" against
# Keras' attention; since then training calls with dropout, all of BERT's, keep Keras'
# attention, so that pair would time one thing twice and is gone.)
add cudnn-attention "$PY $X/cudnn_attention_probe.py --out cudnn-attention.json --batch 256"
add pytest-attention "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/optimize/test_attention.py -rs"
# cuDNN's dropout crashed TensorFlow's own XLA path (lease J, a segmentation fault at the
# first execution). The probe again without it (cuDNN's attention against XLA's, timed:
# 1.68 ms against 1.63 ms, lease K), and with TensorFlow's XLA through PjRt, in case that
# path gave cuDNN's dropout what it lacks (it crashed there too, lease K); then BERT-base
# with cuDNN's attention (only if the probe's dropout ran: it did not) and Keras' own
# through PjRt (4,452 seq/s, lease K), in the tune's best settings and the knobs under its
# threshold at 25 steps an execution.
PJRT="--tf_xla_use_device_api_for_xla_launch=true --tf_xla_enable_device_api_for_gpu=true"
add cudnn-attention-nodrop "$PY $X/cudnn_attention_probe.py --out cudnn-attention-nodrop.json \
  --batch 256 --no-dropout"
add cudnn-attention-pjrt "TF_XLA_FLAGS='$PJRT' $PY $X/cudnn_attention_probe.py \
  --out cudnn-attention-pjrt.json --batch 256"
add bert-pjrt-cudnn "grep -q '\"two_calls_differ\": true' cudnn-attention-pjrt.log && \
  TF_XLA_FLAGS='$PJRT' $(bert_trial '"attention": "cudnn", "steps_per_execution": 25' bert-pjrt-cudnn.out)"
add bert-pjrt-keras "TF_XLA_FLAGS='$PJRT' $(bert_trial '"steps_per_execution": 25' bert-pjrt-keras.out)"
# Where BERT's attention core spends its time: Keras' own (BERT's training: dropout 0.1),
# with philox16's masks, without dropout, and through cuDNN, timed and traced kernel by
# kernel at batch 256; then the first two again with XLA's Triton GEMMs off.
add attention-kernels "$PY $X/attention_kernels.py --out attention-kernels.json --batch 256 \
  --trace-dir prof-attention-kernels && XLA_FLAGS=--xla_gpu_enable_triton_gemm=false \
  $PY $X/attention_kernels.py --out attention-kernels-cublas.json --batch 256 \
  --variants keras_drop,keras_nodrop"
# Where float8's time goes: BERT-base at batch 512 with every knob, float8 on and off,
# profiled, and the two traces side by side (FP8 GEMMs against the passes they add).
for f in true false; do
  add "profile-bert-f8-$f" "$TF profile --start 20 --steps 10 --logdir prof-bert-f8-$f \
    --format json --html profile-bert-f8-$f.html -- $PY $B/profile_r50.py --workload bert_hub \
    --config tuned --settings '{$BERTXLA, \"float8\": $f}' > profile-bert-f8-$f.json"
done
# BERT-base in the tune's best settings (lease K: bf16 + XLA + batch 2048 + cuBLASLt +
# philox16), profiled kernel by kernel, with XLA's optimized programs dumped beside the
# trace (the kernels are named after their fusions; only the programs after XLA's
# passes are kept).
add profile-bert-best "XLA_FLAGS='--xla_dump_to=prof-bert-best-hlo --xla_dump_hlo_as_text' \
  $TF profile --start 20 --steps 10 --logdir prof-bert-best --format json \
  --html profile-bert-best.html -- $PY $B/profile_r50.py --workload bert_hub --config tuned \
  --batch 2048 --settings '{\"xla_options\": [\"cublaslt\"], \"dropout\": \"philox16\"}' \
  > profile-bert-best.json; rc=\$?; find prof-bert-best-hlo -type f \
  ! -name '*after_optimizations.txt' -delete; exit \$rc"
# EinsumDense projections as 2-D GEMMs (tfaccel.optimize.einsum): BERT-base's four
# attention projections of one layer, forward and backward, Keras' einsum against the
# flat one side by side (lease L's profile: Keras' per-sequence kernel gradients and
# their sums took 72 of a 453 ms step); then its GPU test; then the tune's best with it,
# profiled like profile-bert-best, to see what is left.
add einsum-projections "$PY $X/einsum_projections.py --out einsum-projections.json --batch 256"
add pytest-einsum "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/optimize/test_einsum.py -rs"
add profile-bert-flat "$TF profile --start 20 --steps 10 --logdir prof-bert-flat --format json \
  --html profile-bert-flat.html -- $PY $B/profile_r50.py --workload bert_hub --config tuned \
  --batch 2048 --settings '{\"xla_options\": [\"cublaslt\"], \"dropout\": \"philox16\", \
\"einsum\": \"flat\"}' > profile-bert-flat.json"
add profile-bert-f8-diff "$TF profile diff prof-bert-f8-false prof-bert-f8-true --format json \
  > profile-bert-f8-diff.json"
# BERT-base training with each kind of mask, one child each, in the tune's best settings.
add dropout-bert "$PY $X/dropout_rng.py --out dropout-bert.json --micro-batch 0 \
  --bert-layers 12 --rounds ${LEASE_DROPOUT_ROUNDS:-1}"
add profile-gpt2 "$PY $X/profile_gpt2.py --logdir prof-gpt2 && $TF profile analyze prof-gpt2 \
  --format json --html profile-gpt2.html > profile-gpt2.json"
# What a token costs once the weights are bf16 and the small products GEMMs (1,889/s).
add profile-gpt2-bf16 "$PY $X/profile_gpt2.py --logdir prof-gpt2-bf16 --precision bfloat16 \
  --xla-options gemv_as_gemm && $TF profile analyze prof-gpt2-bf16 --format json \
  --html profile-gpt2-bf16.html > profile-gpt2-bf16.json"
SCALE="--precision mixed_bfloat16 --steps-per-execution 10 --format json"
G="${LEASE_SCALE_GPUS:-1,2}"  # 1,2,4 or 1,2,4,8 on the larger kinds (issue 9)
N="${G##*,}"                  # all GPUs
# Jobs that need every GPU.
add bench-micro "$TF bench micro --out bench-micro.json --force --format json > bench-micro.out.json"
add scale-resnet50 "$TF scale resnet50 --gpus $G --batch 512 --plot scale-resnet50.png \
  $SCALE --out scale-resnet50.json --force > scale-resnet50.out.json"
add scale-resnet50-device "$TF scale resnet50 --gpus $N --batch 512 --input device $SCALE \
  --out scale-resnet50-device.json --force > scale-resnet50-device.out.json"
add scale-resnet50-cast "$TF scale resnet50 --gpus $G --batch 512 --input-cast compute \
  $SCALE --out scale-resnet50-cast.json --force > scale-resnet50-cast.out.json"
add scale-bert_hub "$TF scale bert_hub --gpus ${LEASE_BERT_GPUS:-$G} --batch 256 \
  --plot scale-bert_hub.png $SCALE --out scale-bert_hub.json --force > scale-bert_hub.out.json"
# Against what the tunes of this lease found (issue 8): their tfaccel-W.json.
add scale-r50-config "$TF scale resnet50 --config tfaccel-resnet50.json --gpus $N \
  --format json --out scale-r50-config.json --force > scale-r50-config.out.json"
add scale-r50-staged "$TF scale resnet50 --config tfaccel-resnet50.json --gpus $G \
  --input staged --input-cast compute --format json --out scale-r50-staged.json --force > scale-r50-staged.out.json"
add scale-bert-config "$TF scale bert_hub --config tfaccel-bert_hub.json --gpus $N \
  --format json --out scale-bert-config.json --force > scale-bert-config.out.json"
# One GPU, tfaccel's step: host batches cast in tf.data vs cast on the host inside the
# step (whose output TensorFlow allocates in pinned memory), side by side.
for m in host staged; do
  add "scale-r50-1gpu-$m" "$TF scale resnet50 --gpus 1 --batch 512 --input-cast compute \
    --input $m $SCALE --out scale-r50-1gpu-$m.json --force > scale-r50-1gpu-$m.out.json"
done
# XLA's GPU options on BERT's tuned step (bf16, XLA, batch 256, 10 steps an execution),
# one child process each: XLA's defaults; CUDA graphs for every kind of command and of
# any size (the step is ~2,000 kernels, a third of them shorter than 5 us); cuBLASLt,
# whose epilogues take the bias and GELU into the GEMM.
BERT256='{"workload": "bert_hub", "steps": {"warmup": 20, "windows": 5, "window": 20},
  "settings": {"precision": "mixed_bfloat16", "xla": "jit", "batch_size": 256,
  "steps_per_execution": 10}}'
declare -A BERTXLA=([default]="" [cublaslt]="--xla_gpu_enable_cublaslt=true"
  [graphs]="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,\
DYNAMIC_SLICE_FUSION,DYNAMIC_SLICE_COPY_FUSION,WHILE,CONDITIONAL --xla_gpu_graph_min_graph_size=1")
for s in default graphs cublaslt; do
  add "bert-xla-$s" "XLA_FLAGS='${BERTXLA[$s]}' $PY -m tfaccel.trial.child '$BERT256' \
    > bert-xla-$s.out"
done
BERT512="${BERT256/\"batch_size\": 256/\"batch_size\": 512}"
add bert-b512-cublaslt "XLA_FLAGS='${BERTXLA[cublaslt]}' $PY -m tfaccel.trial.child '$BERT512' \
  > bert-b512-cublaslt.out"
add pytest-gpu "$PY -m pytest -q -p no:cacheprovider -m 'gpu or multi_gpu' $REPO/tests -rs"
# The fused GPT-2 decoding step's GPU test alone (124M, bf16, against KerasHub's logits).
add pytest-fused "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/bench/test_bench.py -k fused -rs"
# Segment checkpointing's GPU test alone (the peak of a training step, with and without).
add pytest-remat "$PY -m pytest -q -p no:cacheprovider -m gpu $REPO/tests/optimize/test_remat.py -rs"
add scale-search "$TF scale resnet50 --gpus 1,2 --batch 512 --search --format json \
  --out scale-search.json --force > scale-search.out.json"  # about 12 minutes on two GPUs
# A later lease skips what an earlier one finished: LEASE_SKIP="job job ...".
for name in ${LEASE_SKIP:-}; do echo skipped > "$R/done.$name"; done

BEFORE="${LEASE_BEFORE-}"
Q0="${LEASE_Q0-tune-resnet50}"
Q1="${LEASE_Q1-tune-bert_hub}"
AFTER="${LEASE_AFTER-scale-bert-config scale-r50-config scale-r50-staged pytest-gpu \
bench-gpt2-gemv+bench-remat profile-gpt2-bf16 gpt2-loop-b1}"

run_list() {  # GPU LIST: the jobs of LIST one after the other on GPU (all: every GPU)
  local gpu="$1" name; shift
  if [ "$gpu" = all ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES=$gpu; fi
  for name in "$@"; do
    [ -n "${CMD[$name]+x}" ] || { echo "unknown job $name" | tee -a "$R/lease.log"; continue; }
    job "$name" "${CMD[$name]}"
  done
}

driver() {  # every phase; done jobs are skipped at once
  local item
  for item in $BEFORE; do ( run_list all "$item" ); done
  ( run_list 0 $Q0 ) & local a=$!
  ( run_list 1 $Q1 ) & local b=$!
  wait $a $b
  for item in $AFTER; do
    if [[ "$item" == *+* ]]; then
      ( run_list 0 "${item%%+*}" ) & a=$!
      ( run_list 1 "${item#*+}" ) & b=$!
      wait $a $b
    else
      ( run_list all "$item" )
    fi
  done
  echo "[$(($(date +%s) - T0))s] driver: every job is done" | tee -a "$R/lease.log"
  touch "$R/driver.done"
}

pack() {  # at most 8 files come back, 16 MiB each
  ( cd "$R" && tar czf "$OUT/lease.tgz" --exclude='prof-*' --exclude='*.xla-cache' . )
  for d in "$R"/prof-*; do
    [ -d "$d" ] && ( cd "$R" && tar czf "$OUT/trace-${d##*/prof-}.tgz" "${d##*/}" )
  done
  cp "$R/lease.log" "$OUT/lease.log" 2>/dev/null
}

if [ -n "${LEASE_DRIVER:-}" ]; then driver; exit 0; fi
if [ -n "${LEASE_DRY:-}" ]; then driver; pack; exit 0; fi  # LEASE_DRY=1: in the foreground

running() { [ -e "$R/driver.pid" ] && kill -0 "$(cat "$R/driver.pid")" 2>/dev/null; }
if [ -e "$R/driver.done" ]; then
  echo "lease: every job was done already"
elif running; then
  echo "[$(($(date +%s) - T0))s] the driver of an earlier call still runs" | tee -a "$R/lease.log"
else
  # The tunes resume from the journals of earlier leases (benchmarks/results/), unless
  # LEASE_TUNE_FRESH="resnet50 ..." starts them afresh (every trial in this lease).
  for w in resnet50 bert_hub gpt2; do
    [[ " ${LEASE_TUNE_FRESH:-} " == *" $w "* ]] && continue
    j="$REPO/benchmarks/results/tune-$w-h200.journal.jsonl"
    [ -e "$j" ] && [ ! -e "$R/tune-$w.jsonl" ] && cp "$j" "$R/tune-$w.jsonl"
  done
  echo "[$(($(date +%s) - T0))s] driver started" | tee -a "$R/lease.log"
  LEASE_DRIVER=1 setsid nohup bash "$0" "$LIMIT" > "$R/driver.out" 2>&1 < /dev/null &
  echo $! > "$R/driver.pid"
fi
while running && [ $(($(date +%s) - T0)) -lt "$LIMIT" ]; do sleep 5; done
pack
echo "lease: $(ls "$R" | grep -c '^done\.') jobs done$([ -e "$R/driver.done" ] && echo ', all of them')"
