"""ResNet-50 training for `tfaccel profile` (issue 6's GPU evidence).

    tfaccel profile --start 20 --steps 10 -- python benchmarks/profile_r50.py --config fp32
    tfaccel profile --start 20 --steps 10 -- python benchmarks/profile_r50.py --config slow-input

Configurations:
- fp32:        float32, no XLA (the baseline users start from)
- defaults:    Keras' defaults (jit_compile="auto", TF32)
- tuned:       mixed_bfloat16 + XLA, batch 512
- tuned-prefetch: tuned, with the batches prefetched to the GPU (what `tfaccel profile`
               advised for "tuned": its host-to-device copies ran beside no kernel)
- slow-input:  TF32 without XLA, fed by a pipeline that decodes and resizes JPEGs on one
               thread without prefetch (what an input-bound run looks like)
- slow-input-fixed: the same pipeline with what `tfaccel profile` advised for
               "slow-input": map(num_parallel_calls=AUTOTUNE) and prefetch
- tuned-cast:  tuned, with the batches sent in bf16 (`input_cast="compute"`, the
               memcpy advice's first step)

`--workload bert_hub` profiles KerasHub BERT-base instead, in the configurations that do
not read images (fp32, defaults, tuned, tuned-cast), e.g. with `--batch 256`.
`--settings '{"float8": true, ...}'` sets more of `tfaccel.configure`'s knobs on top of
the configuration (a JSON object of its keywords).
The settings go through `tfaccel.configure`; the model trains with plain `fit`, which
`tfaccel profile` hooks.
"""

from __future__ import annotations

import argparse
import json

CONFIGS = {
    "fp32": {"precision": "float32", "xla": "off", "batch_size": 256},
    "defaults": {"precision": "tf32", "xla": "auto", "batch_size": 256},
    "tuned": {"precision": "mixed_bfloat16", "xla": "jit", "batch_size": 512},
    "tuned-prefetch": {
        "precision": "mixed_bfloat16",
        "xla": "jit",
        "batch_size": 512,
        "prefetch": "device",
    },
    "slow-input": {"precision": "tf32", "xla": "off", "batch_size": 256},
    "slow-input-fixed": {"precision": "tf32", "xla": "off", "batch_size": 256},
    "tuned-cast": {
        "precision": "mixed_bfloat16",
        "xla": "jit",
        "batch_size": 512,
        "input_cast": "compute",
    },
}


def slow_pipeline(batch: int, fixed: bool = False):  # type: ignore[no-untyped-def]
    """JPEG decode + random crop + resize per image, sequential, no prefetch; with
    `fixed`, the map runs in parallel (AUTOTUNE) and batches are prefetched."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    jpeg = tf.io.encode_jpeg(rng.integers(0, 255, (375, 500, 3), dtype=np.uint8))

    def load(i):  # type: ignore[no-untyped-def]
        img = tf.io.decode_jpeg(jpeg, channels=3)
        img = tf.image.random_crop(img, (300, 300, 3))
        img = tf.image.resize(img, (224, 224)) / 255.0
        return img, tf.cast(i % 1000, tf.int32)

    options = tf.data.Options()
    options.autotune.enabled = fixed
    ds = tf.data.Dataset.range(10**9).map(
        load, num_parallel_calls=tf.data.AUTOTUNE if fixed else None
    )
    ds = ds.batch(batch, drop_remainder=True).with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE) if fixed else ds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=None, help="Override the batch size.")
    ap.add_argument("--workload", default="resnet50", help="A built-in workload.")
    ap.add_argument("--settings", default="{}", help="More configure() keywords, as JSON.")
    args = ap.parse_args()
    if args.config.startswith("slow-input") and args.workload != "resnet50":
        ap.error("the slow-input configurations decode images: ResNet-50 only")
    try:
        extra = json.loads(args.settings)
    except json.JSONDecodeError as e:
        ap.error(f"--settings is not JSON ({e}); expected an object of configure() keywords")
    if not isinstance(extra, dict):
        ap.error("--settings: expected a JSON object of configure() keywords")
    settings = {**CONFIGS[args.config], **extra}
    if args.batch:
        settings["batch_size"] = args.batch

    import tfaccel

    report = tfaccel.configure(**settings)
    import keras
    import tensorflow as tf

    from tfaccel.workloads import load_workload
    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    wl = load_workload(args.workload)
    report.compile(wl.model, optimizer=wl.optimizer, loss=wl.loss)
    batch = int(settings["batch_size"])
    if args.config.startswith("slow-input"):
        ds = slow_pipeline(batch, fixed=args.config == "slow-input-fixed")
    else:
        element = report.cast_inputs(
            (synthetic_inputs(wl.model, batch), synthetic_labels(wl, batch))
        )
        ds = report.dataset(tf.data.Dataset.from_tensors(element).repeat())
    keras.utils.set_random_seed(0)
    wl.model.fit(ds, epochs=1, steps_per_epoch=args.steps, verbose=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
