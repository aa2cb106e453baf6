#!/usr/bin/env bash
# Here (x86-64, any Python): the cp312 TensorFlow 2.16.2 / Keras 3.6.0 stack with cuDNN 8.9
# for the GPU test machine, compressed and cut into .gpu/f0 .. .gpu/fN (54 MiB each).
set -euo pipefail
ROOT="$(git rev-parse --show-toplevel)"
WORK="${FLOOR_CACHE:-/tmp/floor312}"
if [ ! -f "$WORK/floor.tar.zst" ]; then
  python3 -m pip install -q --target "$WORK/site" --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    tensorflow==2.16.2 keras==3.6.0 nvidia-cudnn-cu12==8.9.7.29 numpy==1.26.4 ml-dtypes==0.3.2 \
    pyelftools matplotlib  # tfaccel's own; the machine's matplotlib is built for numpy 2
  # the machine's CUDA 13 cuBLAS stands in for cuBLAS 12 (see ../../shared/gpu)
  rm -rf "$WORK/site/nvidia/cublas" "$WORK/site/tensorflow/include" "$WORK/site/bin" "$WORK/site/clang"
  (cd "$WORK/site" && tar cf - . | zstd -T0 -12 --long=27 -q -o "$WORK/floor.tar.zst")
fi
rm -rf "$ROOT"/.gpu/f* "$WORK/parts" && mkdir -p "$WORK/parts"
split -b 54m -d "$WORK/floor.tar.zst" "$WORK/parts/floor.part"
i=0
for p in "$WORK"/parts/floor.part*; do mkdir -p "$ROOT/.gpu/f$i"; mv "$p" "$ROOT/.gpu/f$i/"; i=$((i+1)); done
echo "$i parts: .gpu/f0 .. .gpu/f$((i-1))"
