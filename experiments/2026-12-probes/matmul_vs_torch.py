"""TensorFlow's bf16 matmul against PyTorch's, same GPU, same call (issue 5's target).

    python experiments/2026-12-probes/matmul_vs_torch.py --out matmul-vs-torch.json

Both use random inputs, 3 warm-ups, then the median of 10 timed repeats of 10 products,
with the device synchronised before each clock read. PyTorch runs in a child process
(before and after TensorFlow), never in TensorFlow's process. Target: TF >= 95 % of
PyTorch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
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


def torch_child(n: int) -> dict[str, list[float]]:
    """PyTorch's figures from a child process: TensorFlow and PyTorch in one process
    load two sets of CUDA libraries, and on the test machine that crashes (SIGFPE)."""
    out = subprocess.run(
        [sys.executable, __file__, "--torch-only", "--n", str(n)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    for line in out.stdout.splitlines():
        if line.startswith("TORCH "):
            return json.loads(line[6:])
    raise SystemExit(f"the PyTorch child failed ({out.returncode}): {out.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    dtypes = ("bfloat16", "float16")
    if args.torch_only:
        print("TORCH " + json.dumps({d: torch_tflops(args.n, d) for d in dtypes}), flush=True)
        return 0
    if args.out is None:
        raise SystemExit("--out is required")
    if args.out.exists():
        raise SystemExit(f"refusing to overwrite {args.out}")
    from tfaccel.bench import micro
    from tfaccel.bench.suite import share_gpu_memory

    share_gpu_memory()  # leave memory for the PyTorch child
    from tfaccel.environment import environment

    # PyTorch before and after TensorFlow, so that neither gets the cooler GPU.
    before = torch_child(args.n)
    tf_runs = {d: micro.matmul(d, (args.n, args.n, args.n), repeats=10, number=10) for d in dtypes}
    after = torch_child(args.n)
    rows = {}
    for dtype in dtypes:
        tf_m, pt = tf_runs[dtype], before[dtype] + after[dtype]
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
