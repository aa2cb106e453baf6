"""One scaling plot from several `tfaccel scale --format json` runs of one workload.

    python tools/scale_plot.py --out results/scale-resnet50-h200x2.png \
        "host input=results/scale-resnet50-h200x2.json" \
        "device input=results/scale-resnet50-device-h200x2.json" \
        --tuned 6399 --tuned-source results/trial-resnet50-b512-spe10-input-cast-h200.json

Each run is LABEL=FILE. `--tuned` draws N x the best single-GPU throughput (what the
multi-GPU target is measured against).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tfaccel.render.scale import scale_plot
from tfaccel.scale.runner import read_scale_report


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="LABEL=FILE")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tuned", type=float, help="the best single-GPU samples/s")
    ap.add_argument("--tuned-source", default="tune", help="where --tuned comes from")
    args = ap.parse_args()
    series = []
    for run in args.runs:
        label, sep, path = run.partition("=")
        if not sep:
            ap.error(f"expected LABEL=FILE, got {run!r}")
        series.append((label, read_scale_report(path)))
    if args.tuned:
        import dataclasses

        ref = {"source": args.tuned_source, "samples_per_s": args.tuned, "ratio": {}}
        series[0] = (series[0][0], dataclasses.replace(series[0][1], tuned_reference=ref))
    print(scale_plot(series, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
