#!/usr/bin/env bash
# GPU smoke test of the supported floor (TensorFlow 2.16.2, Keras 3.6.0) on the GPU test
# machine, after the TF 2.21 set-up of ../../shared/gpu (its CUDA 12 runtime, CUPTI and
# library shim are reused; TF 2.16 needs cuDNN 8.9, which comes with the floor bundle).
#   bash pack.sh                      # here: .gpu/f0 .. .gpu/fN (cp312 TF 2.16.2 stack)
#   (on the machine) copy every .gpu/fK/* into /tmp/floorparts, then
#   bash experiments/2026-12-03-floor-gpu/smoke.sh   # results under $DEST
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${DEST:-/tmp/floor-out}"
SITE=/tmp/floorsite
mkdir -p "$DEST" "$SITE"
NV=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])")
if [ ! -f "$SITE/.unpacked" ]; then
  cat /tmp/floorparts/floor.part* | PYTHONPATH=/tmp/site python3 -c "
import sys, tarfile, zstandard
reader = zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(sys.stdin.buffer)
with tarfile.open(fileobj=reader, mode='r|') as tar:
    tar.extractall('$SITE', filter='fully_trusted')
" && touch "$SITE/.unpacked"
fi
# the machine's scipy is built for numpy 2; TF 2.16's legacy Keras imports it when present
mkdir -p /tmp/noscipy/scipy
echo 'raise ImportError("scipy is built for numpy 2 here")' > /tmp/noscipy/scipy/__init__.py
export PYTHONPATH="$ROOT/src:/tmp/noscipy:$SITE" PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
export LD_LIBRARY_PATH="$SITE/nvidia/cudnn/lib:$SITE/nvidia/cuda_nvrtc/lib:/tmp/site/nvidia/cuda_runtime/lib:/tmp/site/nvidia/cuda_cupti/lib:/tmp/cu12shim:$NV/cu13/lib:$NV/nccl/lib"
cd "$ROOT"
python3 -c "
import tensorflow as tf, keras
gpus = tf.config.list_physical_devices('GPU')
print('tensorflow', tf.__version__, 'keras', keras.__version__, 'GPUs', len(gpus))
" 2>&1 | tee "$DEST/versions.txt"
python3 -m tfaccel doctor --format json > "$DEST/doctor.json" 2> "$DEST/doctor.err"
echo "doctor exit $?" | tee -a "$DEST/summary.txt"
python3 -m pytest -m gpu tests -q -p no:cacheprovider > "$DEST/pytest-gpu.txt" 2>&1
echo "pytest -m gpu exit $?" | tee -a "$DEST/summary.txt"
t0=$(date +%s)
python3 -m tfaccel tune tiny --time-budget 3m --format json --output "$DEST/tune-tiny.json" \
  --journal "$DEST/tune-tiny.jsonl" > "$DEST/tune-tiny.out.json" 2> "$DEST/tune-tiny.err"
echo "tune tiny exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
touch "$DEST/done"
