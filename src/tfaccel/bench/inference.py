"""Inference, generation and Conv3D benchmarks (forward passes only)."""

from __future__ import annotations

import time
from typing import Any

from tfaccel._tf import import_tensorflow
from tfaccel.bench.micro import sync_device
from tfaccel.bench.timer import Measurement, measure, start_gpu_sampler


def _policy(precision: str) -> Any:
    import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32" if precision == "float32" else precision)
    return previous


def forward_throughput(
    name: str,
    build: Any,
    batch: int,
    precision: str = "float32",
    xla: bool = True,
    repeats: int = 5,
    number: int = 5,
) -> Measurement:
    """Samples (images) per second of a compiled forward pass on synthetic inputs."""
    import keras

    tf = import_tensorflow()
    from tfaccel.workloads.synthetic import synthetic_inputs

    previous = _policy(precision)
    try:
        model = build()
        x = tf.constant(synthetic_inputs(model, batch))
        fn = tf.function(lambda: model(x, training=False), jit_compile=xla)
        return measure(
            f"{name} inference {precision} xla={'on' if xla else 'off'} batch={batch}",
            fn,
            work=float(batch),
            unit="samples/s",
            sync=lambda out: tf.reduce_sum(tf.reshape(out, [-1])[:1]).numpy(),
            repeats=repeats,
            number=number,
            params={"batch": batch, "precision": precision, "xla": xla},
        )
    finally:
        keras.mixed_precision.set_global_policy(previous)


def conv3d(
    batch: int = 4,
    dhw: tuple[int, int, int] = (64, 128, 128),
    channels: int = 64,
    precision: str = "mixed_bfloat16",
    seconds: float = 8.0,
    peak_tflops: float | None = None,
    xla: bool = True,
) -> Measurement:
    """TFLOP/s of one 3x3x3 Conv3D, and TFLOP/s per watt over a steady load.

    NVML's power reading averages over about a second, so the load runs `seconds`
    (several seconds) while the GPU is sampled; the first second is dropped.
    """
    import keras

    tf = import_tensorflow()
    from tfaccel.bench.models import conv3d_flops

    previous = _policy(precision)
    try:
        layer = keras.layers.Conv3D(channels, 3, padding="same")
        x = tf.random.normal((batch, *dhw, channels))
        if precision != "float32":
            x = tf.cast(x, keras.mixed_precision.global_policy().compute_dtype)
        fn = tf.function(lambda: layer(x), jit_compile=xla)
        flops = conv3d_flops(batch, dhw, channels, channels) / 1e12
        sync = sync_device
        sync(fn())
        t0 = time.perf_counter()
        sync(fn())
        per_call = max(time.perf_counter() - t0, 1e-6)
        number = max(1, int(seconds / 5 / per_call))
        sampler = start_gpu_sampler(0.25)
        start = time.time()
        m = measure(
            f"conv3d 3x3x3 {channels}->{channels} {batch}x{'x'.join(map(str, dhw))} {precision}"
            + ("" if xla else " xla=off"),
            fn,
            work=flops,
            unit="TFLOP/s",
            sync=sync,
            repeats=5,
            number=number,
            params={
                "batch": batch,
                "dhw": dhw,
                "channels": channels,
                "precision": precision,
                "xla": xla,
            },
            peak=peak_tflops,
        )
        power = None
        if sampler is not None:
            sampler.stop()
            watts = [
                s.gpus[0].power_w
                for s in sampler.history(since=start + 1.0)
                if s.gpus and s.gpus[0].power_w
            ]
            power = sum(watts) / len(watts) if watts else None
        params = dict(m.params)
        params["power_w_mean"] = power
        params["tflops_per_watt"] = (m.median / power) if power and m.median else None
        return Measurement(
            m.name, m.unit, m.samples, warmup_s=m.warmup_s, params=params, peak=m.peak
        )
    finally:
        keras.mixed_precision.set_global_policy(previous)


def gpt2_generation(
    batch: int = 1,
    prompt: int = 32,
    new_tokens: int = 128,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    vocab: int = 50257,
    precision: str = "float32",
    repeats: int = 3,
    xla: bool = True,
) -> list[Measurement]:
    """KerasHub GPT-2 (124M shape by default, random weights) `generate` with its KV cache:
    tokens/s (new tokens, all sequences) and time to first token."""
    import keras
    import numpy as np

    from tfaccel.workloads.builtin import gpt2_causal_lm

    previous = _policy(precision)
    try:
        lm = gpt2_causal_lm(vocab, layers, hidden, heads, 4 * hidden, 1024)
        # Greedy decoding, as throughput benchmarks use (KerasHub's default samples top-k).
        lm.compile(sampler="greedy", jit_compile=xla)
        rng = np.random.default_rng(0)
        total = prompt + new_tokens

        def inputs(length: int) -> dict[str, Any]:
            ids = np.zeros((batch, length), "int32")
            ids[:, :prompt] = rng.integers(1, vocab, (batch, prompt))
            mask = np.zeros((batch, length), "bool")
            mask[:, :prompt] = True
            return {"token_ids": ids, "padding_mask": mask}

        t0 = time.perf_counter()
        lm.generate(inputs(total), stop_token_ids=None)
        first_call = time.perf_counter() - t0
        full, first = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            lm.generate(inputs(total), stop_token_ids=None)
            full.append(batch * new_tokens / (time.perf_counter() - t))
        lm.generate(inputs(prompt + 1), stop_token_ids=None)  # compile the 1-token shape
        for _ in range(repeats):
            t = time.perf_counter()
            lm.generate(inputs(prompt + 1), stop_token_ids=None)
            first.append((time.perf_counter() - t) * 1e3)
        params = {
            "batch": batch,
            "prompt": prompt,
            "new_tokens": new_tokens,
            "layers": layers,
            "hidden": hidden,
            "precision": precision,
            "sampler": "greedy",
            "xla": xla,
            "first_call_s": first_call,
        }
        tag = "" if xla else " xla=off"  # the rows with XLA keep their earlier names
        return [
            Measurement(
                f"gpt2 generate batch={batch} {precision}{tag}",
                "tokens/s",
                tuple(full),
                warmup_s=first_call,
                params=params,
            ),
            Measurement(
                f"gpt2 time to first token batch={batch} {precision}{tag}",
                "ms",
                tuple(first),
                higher_is_better=False,
                params=params,
            ),
        ]
    finally:
        keras.mixed_precision.set_global_policy(previous)
