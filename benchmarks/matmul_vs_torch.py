"""TensorFlow's bf16 matmul against PyTorch's, same GPU, same call (issue 5's target).

    python benchmarks/matmul_vs_torch.py --out matmul-vs-torch.json

Both use random inputs, 3 warm-ups, then the median of 10 timed repeats of 10 products,
with the device synchronised before each clock read. Target: TF >= 95 % of PyTorch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def torch_tflops(n: int, dtype: str, repeats: int = 10, number: int = 10) -> list[float]:
    import torch

    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    a = torch.randn(n, n, device="cuda", dtype=dt)
    b = torch.randn(n, n, device="cuda", dtype=dt)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            a @ b
        torch.cuda.synchronize()
        out.append(2 * n**3 * number / (time.perf_counter() - t) / 1e12)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=8192)
    args = ap.parse_args()
    if args.out.exists():
        raise SystemExit(f"refusing to overwrite {args.out}")
    from tfaccel.bench import micro
    from tfaccel.environment import environment

    rows = {}
    for dtype in ("bfloat16", "float16"):
        tf_m = micro.matmul(dtype, (args.n, args.n, args.n), repeats=10, number=10)
        pt = torch_tflops(args.n, dtype)
        rows[dtype] = {
            "tensorflow_tflops": list(tf_m.samples),
            "pytorch_tflops": pt,
            "ratio_median": (tf_m.median or 0) / statistics.median(pt),
        }
        print(
            f"{dtype}: TF {tf_m.median:.0f} vs PyTorch {statistics.median(pt):.0f} TFLOP/s "
            f"-> {rows[dtype]['ratio_median']:.1%}"
        )
    args.out.write_text(
        json.dumps(
            {
                "schema": "tfaccel.matmul-vs-torch/1",
                "n": args.n,
                "environment": environment(),
                "results": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
