#!/usr/bin/env bash
# Cuts prepare.sh's TensorFlow parts (.gpu/pN, 50 MiB each) into 45-MiB ones in
# .gpu/q00 .. .gpu/qNN, one a folder, so that a part and the working tree (about 14 MB
# tracked) stay under the 64 MiB one device call carries. setup.sh joins
# /tmp/tfparts/tf.part* in name order either way. Run from the project root.
set -euo pipefail
rm -rf .gpu/q .gpu/q[0-9]*
mkdir -p .gpu/q
cat .gpu/p*/tf.part* | split -b 45M -d -a 2 - .gpu/q/tf.part
for f in .gpu/q/tf.part*; do
  n="${f##*part}"; mkdir -p ".gpu/q$n"; mv "$f" ".gpu/q$n/"
done
rmdir .gpu/q
cmp <(cat .gpu/q*/tf.part*) <(cat .gpu/p*/tf.part*) && ls -d .gpu/q[0-9]*
