"""Cut a TensorFlow profile down to a few training steps, for test fixtures.

    python tools/trim_trace.py RUN/vm.xplane.pb OUT/vm.xplane.pb STEPS

Keeps the events of steps [2, 2 + STEPS) (the first profiled step is often partial) and
5 ms after them, by the `train` step markers tfaccel's capture writes, and drops the
HLO metadata plane (most of the file). XProf's converters read the result like the
original: the GPU fixtures under tests/profile/fixtures were made this way.
"""

from __future__ import annotations

import sys


def trim(src: str, dst: str, keep: int) -> tuple[int, float]:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    xs = xplane_pb2.XSpace()
    with open(src, "rb") as f:
        xs.ParseFromString(f.read())
    steps = []
    for plane in xs.planes:
        if plane.name == "/host:CPU":
            names = {k: v.name for k, v in plane.event_metadata.items()}
            for line in plane.lines:
                t0 = line.timestamp_ns * 1000
                for e in line.events:
                    if names.get(e.metadata_id, "") == "train":
                        steps.append((t0 + e.offset_ps, t0 + e.offset_ps + e.duration_ps))
    steps.sort()
    chosen = steps[1 : 1 + keep]
    if not chosen:
        raise SystemExit(f"{src}: no 'train' step markers to cut by")
    lo, hi = chosen[0][0], chosen[-1][1] + 5e9  # and 5 ms after, for trailing device work
    planes = [p for p in xs.planes if p.name != "/host:metadata"]
    del xs.planes[:]
    xs.planes.extend(planes)
    for plane in xs.planes:
        for line in plane.lines:
            t0 = line.timestamp_ns * 1000
            kept = [e for e in line.events if lo <= t0 + e.offset_ps <= hi]
            del line.events[:]
            line.events.extend(kept)
    with open(dst, "wb") as f:
        f.write(xs.SerializeToString())
    return len(steps), (hi - lo) / 1e9


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        raise SystemExit(__doc__)
    found, window_ms = trim(argv[0], argv[1], int(argv[2]))
    print(f"{found} steps in the trace; kept a {window_ms:.0f} ms window")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
