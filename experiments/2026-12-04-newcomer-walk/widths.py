"""Lines over 80 columns in a walk's screens (walk-*.log), TensorFlow's and Keras' own
lines and the error lines left aside:  python3 widths.py OUT"""
import glob
import re
import sys

OWN = re.compile(r"(I0000|E0000|W0000|WARNING: |To enable|\s*\d+/\d+ ━|error:|hint:|Script )")
for path in sorted(glob.glob(sys.argv[1] + "/walk-*.log")):
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", open(path, errors="replace").read())
    lines = [line.split("\r")[-1] for line in text.split("\n")][1:-2]
    long = [line for line in lines if len(line) > 80 and not OWN.match(line)]
    print(f"{path.split('/')[-1]}: {len(lines)} lines, {len(long)} over 80 columns")
    for line in long[:5]:
        print("   ", len(line), line[:120])
