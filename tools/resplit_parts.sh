#!/usr/bin/env bash
# Re-split the TensorFlow parts that ../shared/gpu/prepare.sh writes (.gpu/p0..p5, up to
# 62 MiB each) into .gpu/s0..sN of SIZE MiB (default 48), so that one part plus the
# working tree stays under a device call's 64 MiB. setup.sh concatenates
# /tmp/tfparts/tf.part* in name order, so the new names keep the stream's order.
#   bash tools/resplit_parts.sh [SIZE_MIB]
set -euo pipefail
size="${1:-48}"
ls .gpu/p*/tf.part* >/dev/null
rm -rf .gpu/s[0-9]* .gpu/split
mkdir -p .gpu/split
cat .gpu/p*/tf.part* | split -b "${size}m" -d -a 3 - .gpu/split/tf.part
i=0
for f in .gpu/split/tf.part*; do
  mkdir -p ".gpu/s$i"
  mv "$f" ".gpu/s$i/"
  i=$((i + 1))
done
rmdir .gpu/split
echo "$i parts of ${size} MiB: .gpu/s0 .. .gpu/s$((i - 1)); send each with"
echo "  mkdir -p /tmp/tfparts && cp .gpu/sK/* /tmp/tfparts/   (carry [\".gpu/sK\"])"
