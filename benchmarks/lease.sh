#!/usr/bin/env bash
# The GPU evidence for issues 4-8 in one resumable driver, for a two-GPU machine.
#
#   bash benchmarks/lease.sh SECONDS
#
# First the jobs that need both GPUs (all-reduce, scaling); then one worker per GPU
# (CUDA_VISIBLE_DEVICES=0 and =1) takes jobs from one queue in priority order. Every job
# leaves a done-marker in $R, so calling the script again after a 10-minute device call
# goes on where it stopped; `tfaccel tune` resumes from its journal. At SECONDS the
# workers are stopped. The results are packed into $OUT every time: lease.tgz, one
# trace-*.tgz per profile, lease.log.
#
# Before: the set-up in benchmarks/README.md (TF parts, .gpu/bin/setup.sh, the wheels).
set -u
LIMIT="${1:-540}"
T0=$(date +%s)
R="${LEASE_DIR:-/tmp/lease}"
OUT="${OUT:-$PWD/gpu-out}"
REPO="$PWD"
mkdir -p "$R" "$OUT"
[ -n "${LEASE_NO_TFENV:-}" ] || source /tmp/tfenv.sh
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
declare -A CMD
ORDER=()
add() { ORDER+=("$1"); CMD[$1]="$2"; }
tune_cmd() {  # workload start-batch max-batch
  echo "$TF tune $1 --batch $2 --max-batch $3 --timeout 400 --output tfaccel-$1.json \
    ${LEASE_TUNE_BUDGET:+--time-budget $LEASE_TUNE_BUDGET} \
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
add trial-r50-cast-b512 "$PY -m tfaccel.tune.trial '$R50CAST'"
# tfaccel profile's advice, applied: each pair runs in the same lease.
for c in tuned-prefetch tuned; do add "profile-$c" "$(profile_cmd $c)"; done
add gpt2-xla-flags "$PY $B/gpt2_xla_flags.py --out gpt2-xla-flags.json"
add matmul-vs-torch "$PY $B/matmul_vs_torch.py --out matmul-vs-torch.json"
add monitor-overhead "$PY $B/monitor_overhead.py --out monitor-overhead.json"
for c in slow-input slow-input-fixed; do add "profile-$c" "$(profile_cmd $c)"; done
add profile-tuned-cast "$(profile_cmd tuned-cast)"
add profile-bert-tuned "$TF profile --start 20 --steps 10 --logdir prof-bert-tuned --format json \
  --html profile-bert-tuned.html -- $PY $B/profile_r50.py --workload bert_hub --config tuned \
  --batch 256 > profile-bert-tuned.json"
add tune-bert_hub "$(tune_cmd bert_hub 128 512)"
add bench-workloads "$TF bench gpt2 conv3d remat --out bench-workloads.json --format json \
  > bench-workloads.out.json"
add tune-gpt2 "$(tune_cmd gpt2 32 128)"
# A later lease skips what an earlier one finished: LEASE_SKIP="job job ...".
for name in ${LEASE_SKIP:-}; do echo skipped > "$R/done.$name"; done
# Tunes resume from the journals of earlier leases (benchmarks/results/*.journal.jsonl).
# LEASE_TUNE_FRESH="resnet50 ..." starts those tunes afresh (every trial in this lease).
for w in resnet50 bert_hub gpt2; do
  [[ " ${LEASE_TUNE_FRESH:-} " == *" $w "* ]] && continue
  j="$REPO/benchmarks/results/tune-$w-h200.journal.jsonl"
  [ -e "$j" ] && [ ! -e "$R/tune-$w.jsonl" ] && cp "$j" "$R/tune-$w.jsonl"
done
# Jobs a stopped call left half-done are taken again.
for c in "$R"/claim.*; do [ -e "$c" ] && [ ! -e "$R/done.${c##*/claim.}" ] && rmdir "$c"; done

worker() {
  export CUDA_VISIBLE_DEVICES=$1
  local name
  for name in "${ORDER[@]}"; do
    [ -e "$R/done.$name" ] && continue
    mkdir "$R/claim.$name" 2>/dev/null || continue
    job "$name" "${CMD[$name]}"
  done
}
SCALE="--precision mixed_bfloat16 --steps-per-execution 10 --format json"
G="${LEASE_SCALE_GPUS:-1,2}"  # 1,2,4 or 1,2,4,8 on the larger kinds (issue 9)
both() {  # needs both GPUs: all-reduce and scaling, then the GPU-marked tests
  unset CUDA_VISIBLE_DEVICES
  job bench-micro "$TF bench micro --out bench-micro.json --format json > bench-micro.out.json"
  job scale-resnet50 "$TF scale resnet50 --gpus $G --batch 512 --plot scale-resnet50.png \
    $SCALE > scale-resnet50.json"
  job scale-resnet50-device "$TF scale resnet50 --gpus ${G##*,} --batch 512 --input device $SCALE \
    > scale-resnet50-device.json"
  job scale-resnet50-cast "$TF scale resnet50 --gpus $G --batch 512 --input-cast compute \
    $SCALE > scale-resnet50-cast.json"
  job scale-bert_hub "$TF scale bert_hub --gpus ${LEASE_BERT_GPUS:-$G} --batch 256 \
    --plot scale-bert_hub.png $SCALE > scale-bert_hub.json"
  job pytest-gpu "$PY -m pytest -q -p no:cacheprovider -m 'gpu or multi_gpu' $REPO/tests -rs"
  if [ -n "${LEASE_SCALE_SEARCH:-}" ]; then  # about 12 minutes on two GPUs
    job scale-search "$TF scale resnet50 --gpus 1,2 --batch 512 --search --format json \
      > scale-search.json"
  fi
}

pack() {  # at most 8 files come back, 16 MiB each
  ( cd "$R" && tar czf "$OUT/lease.tgz" --exclude='prof-*' --exclude='*.xla-cache' . )
  for d in "$R"/prof-*; do
    [ -d "$d" ] && ( cd "$R" && tar czf "$OUT/trace-${d##*/prof-}.tgz" "${d##*/}" )
  done
  cp "$R/lease.log" "$OUT/lease.log" 2>/dev/null
}

killtree() {  # the lane and every process under it (trial children included)
  local c
  for c in $(pgrep -P "$1"); do killtree "$c"; done
  kill -KILL "$1" 2>/dev/null
}
if true; then  # jobs already done are skipped at once
  ( both ) & C=$!
  while kill -0 $C 2>/dev/null; do
    if [ $(($(date +%s) - T0)) -ge "$LIMIT" ]; then
      echo "[$(($(date +%s) - T0))s] time is up" | tee -a "$R/lease.log"
      killtree $C; pack; exit 0
    fi
    sleep 5
  done
fi
( worker 0 ) & A=$!
( worker 1 ) & Bpid=$!
while kill -0 $A 2>/dev/null || kill -0 $Bpid 2>/dev/null; do
  if [ $(($(date +%s) - T0)) -ge "$LIMIT" ]; then
    echo "[$(($(date +%s) - T0))s] time is up: stopping the workers" | tee -a "$R/lease.log"
    killtree $A; killtree $Bpid; break
  fi
  sleep 5
done
pack
echo "lease: $(ls "$R" | grep -c '^done\.') jobs done"
