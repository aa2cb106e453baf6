#!/usr/bin/env bash
# Issue 45's fresh-clone walk at 80 columns, on a machine without a GPU: clone, the
# README's set-up command, then each command a newcomer meets, each in a pseudo-terminal
# of 80 columns (`script`), its screen kept in $OUT/walk-NAME.log; then the docs site in
# headless Chromium (docs_walk.py: every page, every internal link, no request leaving
# the machine, the search box).
#   OUT=/tmp/walk-out bash experiments/2026-12-04-newcomer-walk/walk.sh
# Needs: git, script (util-linux), chromium (Debian's package) and playwright in
# another environment (PLAYWRIGHT_PYTHON, default /tmp/pw/bin/python).
set -u
REPO="$(cd "$(dirname "$0")/../.." && pwd)"; OUT="${OUT:-/tmp/walk-out}"; WALK=/tmp/walk
rm -rf "$WALK" && git clone -q "$REPO" "$WALK" && mkdir -p "$OUT" && cd "$WALK"
cp "$REPO/experiments/2026-12-04-newcomer-walk/train.py" .
step() {  # name, command line
  local name="$1" t0=$(date +%s); shift
  script -qec "stty cols 80 rows 40; $*" "$OUT/walk-$name.log" > /dev/null 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s: $*" | tee -a "$OUT/summary.txt"
}
T=.venv/bin/tfaccel
step main "python3 -m venv .venv && .venv/bin/pip install -q -e '.[tf]' && $T tune tiny"
step doctor "$T doctor"
step plan-local "$T plan tiny --batch 256"
step plan-spec "$T plan tiny --batch 256 --spec H200"
step tune-script "$T tune --time-budget 3m --output train-tfaccel.json -- python train.py"
step run-script "$T run --config train-tfaccel.json -- python train.py"
step profile-script "$T profile -- python train.py"
step bench "$T bench micro --quick"
step power "$T power"
step power-json "$T power --format json"
step hw "$T hw"
NO_MKDOCS_2_WARNING=1 "$REPO/.venv/bin/mkdocs" build --strict --site-dir "$OUT/site" -q
"${PLAYWRIGHT_PYTHON:-/tmp/pw/bin/python}" "$REPO/experiments/2026-12-04-newcomer-walk/docs_walk.py" \
  "$OUT/site" 2>/dev/null | tee "$OUT/docs.json"
