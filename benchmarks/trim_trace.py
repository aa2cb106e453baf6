"""Keep steps [first+1 .. first+N] of an XSpace; drop the HLO metadata plane."""
import re
import sys
from tensorflow.tsl.profiler.protobuf import xplane_pb2

src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
xs = xplane_pb2.XSpace()
xs.ParseFromString(open(src, "rb").read())
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
sel = steps[1:1 + keep]
lo, hi = sel[0][0], sel[-1][1] + 5e9  # and 5 ms after, for trailing device work
print("steps", len(steps), "window ms", (hi - lo) / 1e9)
planes = [p for p in xs.planes if p.name != "/host:metadata"]
del xs.planes[:]
xs.planes.extend(planes)
for plane in xs.planes:
    for line in plane.lines:
        t0 = line.timestamp_ns * 1000
        kept = [e for e in line.events if lo <= t0 + e.offset_ps <= hi]
        del line.events[:]
        line.events.extend(kept)
open(dst, "wb").write(xs.SerializeToString())
