#!/usr/bin/env bash
# Everything tfaccel proves on the GPU machine, in one command. Run after the set-up in
# tools/README.md; writes its results under $OUT (or ./gpu-out).
#   bash tools/gpu_run.sh [plan-models...]
set -uo pipefail
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -d /tmp/site-extra ]; then export PYTHONPATH="$PYTHONPATH:/tmp/site-extra"; fi
python3 -m tfaccel doctor --format json > "$OUT/doctor.json"; echo "doctor exit $?"
python3 -m tfaccel doctor --verbose 2>&1 | tee "$OUT/doctor.txt" | tail -40
python3 -m tfaccel hw --format json > "$OUT/hw.json"; echo "hw exit $?"
python3 -m tfaccel hw 2>&1 | tee "$OUT/hw.txt" | head -60
python3 -m pytest -m "gpu or multi_gpu" -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -15
for m in "$@"; do
  python3 benchmarks/plan_validation.py --model "$m" --out "$OUT/plan-validation-$m.json" \
    2>&1 | tail -30
done
