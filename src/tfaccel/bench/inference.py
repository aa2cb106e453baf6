"""Inference, generation and Conv3D benchmarks (forward passes only)."""

from __future__ import annotations

import time
from typing import Any

from tfaccel._tf import import_tensorflow
from tfaccel.bench.micro import sync_device
from tfaccel.bench.timer import Measurement, measure, start_gpu_sampler
from tfaccel.optimize.decoding import _fused_decoder_step, fuse_generation, fused_caches


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
        forward = tf.function(lambda: model(x, training=False), jit_compile=xla)
        return measure(
            f"{name} inference {precision} xla={'on' if xla else 'off'} batch={batch}",
            forward,
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
    from tfaccel.workloads.models import conv3d_flops

    previous = _policy(precision)
    try:
        layer = keras.layers.Conv3D(channels, 3, padding="same")
        x = tf.random.normal((batch, *dhw, channels))
        if precision != "float32":
            x = tf.cast(x, keras.mixed_precision.global_policy().compute_dtype)
        forward = tf.function(lambda: layer(x), jit_compile=xla)
        flops = conv3d_flops(batch, dhw, channels, channels) / 1e12
        sync = sync_device
        sync(forward())
        started = time.perf_counter()
        sync(forward())
        per_call = max(time.perf_counter() - started, 1e-6)
        number = max(1, int(seconds / 5 / per_call))
        sampler = start_gpu_sampler(0.25)
        start = time.time()
        measurement = measure(
            f"conv3d 3x3x3 {channels}->{channels} {batch}x{'x'.join(map(str, dhw))} {precision}"
            + ("" if xla else " xla=off"),
            forward,
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
                snap.gpus[0].power_w
                for snap in sampler.history(since=start + 1.0)
                if snap.gpus and snap.gpus[0].power_w
            ]
            power = sum(watts) / len(watts) if watts else None
        params = dict(measurement.params)
        params["power_w_mean"] = power
        params["tflops_per_watt"] = (
            (measurement.median / power) if power and measurement.median else None
        )
        return Measurement(
            measurement.name,
            measurement.unit,
            measurement.samples,
            warmup_s=measurement.warmup_s,
            params=params,
            peak=measurement.peak,
        )
    finally:
        keras.mixed_precision.set_global_policy(previous)


def greedy_decoder(
    causal_lm: Any, batch: int, length: int, start: int, xla: bool = True, fused: bool = False
) -> Any:
    """KerasHub GPT-2's greedy `generate`, as one compiled function of (token_ids,
    padding_mask) at a fixed shape, with two changes that leave the tokens the same:
    - each layer's KV cache is its own loop variable, updated in place; KerasHub keeps
      one stacked cache and re-stacks all twelve layers' caches every token;
    - the next token is the argmax of the logits; greedy sampling's float32 softmax over
      the 50,257-word vocabulary does not change which one is largest.
    Like KerasHub, the cache is seeded with one pass over the whole (padded) sequence and
    the loop starts at `start`, the prompt's length; positions the padding mask marks as
    given keep their tokens. `fused=True` decodes each new token with
    `_fused_decoder_step` instead of KerasHub's layers (the prompt's pass is the same;
    in 16 bits it rounds differently, see there)."""
    import keras

    tf = import_tensorflow()
    backbone = causal_lm.backbone
    blocks = list(backbone.transformer_layers)
    heads = backbone.num_heads
    cache_shape = [batch, 2, length, heads, backbone.hidden_dim // heads]
    dtype = causal_lm.compute_dtype
    weights: Any = None
    step: Any = None
    if fused:
        weights, step = _fused_decoder_step(causal_lm, dtype)

    def forward(ids: Any, caches: tuple[Any, ...], index: Any) -> tuple[Any, tuple[Any, ...]]:
        tokens = backbone.token_embedding(ids)
        x = backbone.embeddings_add(
            (tokens, backbone.position_embedding(tokens, start_index=index))
        )
        updated = []
        for block, cache in zip(blocks, caches, strict=True):
            x, cache = block(x, self_attention_cache=cache, self_attention_cache_update_index=index)
            updated.append(cache)
        return backbone.token_embedding(backbone.layer_norm(x), reverse=True), tuple(updated)

    def pick(i: Any, ids: Any, padding_mask: Any, logits: Any) -> Any:
        token = tf.argmax(logits, axis=-1, output_type=ids.dtype)
        token = tf.where(padding_mask[:, i], ids[:, i], token)
        return keras.ops.slice_update(ids, [0, i], token[:, None])  # in place under XLA

    @tf.function(jit_compile=xla)
    def generate(token_ids: Any, padding_mask: Any) -> Any:
        caches = tuple(tf.zeros(cache_shape, dtype) for _ in blocks)
        _, caches = forward(token_ids, caches, 0)
        if fused:
            fused_weights = weights()
            caches_kv = fused_caches(caches)  # once, after the prompt's pass

            def fused_body(i: Any, ids: Any, keys: Any, values: Any) -> tuple[Any, ...]:
                logits, keys, values = step(fused_weights, ids[:, i - 1], keys, values, i - 1)
                return i + 1, pick(i, ids, padding_mask, logits), keys, values

            out = tf.while_loop(
                lambda i, *_: i < length,
                fused_body,
                (tf.constant(start), token_ids, *caches_kv),
                maximum_iterations=length - start,
            )
            return out[1]

        def body(i: Any, ids: Any, caches: tuple[Any, ...]) -> tuple[Any, Any, Any]:
            logits, caches = forward(tf.slice(ids, [0, i - 1], [batch, 1]), caches, i - 1)
            return i + 1, pick(i, ids, padding_mask, logits[:, 0, :]), caches

        _, ids, _ = tf.while_loop(
            lambda i, ids, caches: i < length,
            body,
            (tf.constant(start), token_ids, caches),
            maximum_iterations=length - start,
        )
        return ids

    return generate


LOOPS = ("keras_hub", "tfaccel", "fused", "fused_generate")


def prompt_inputs(rng: Any, batch: int, length: int, prompt: int, vocab: int) -> dict[str, Any]:
    """KerasHub's generate inputs: `prompt` random tokens, then padding up to `length`."""
    import numpy as np

    ids = np.zeros((batch, length), "int32")
    ids[:, :prompt] = rng.integers(1, vocab, (batch, prompt))
    mask = np.zeros((batch, length), "bool")
    mask[:, :prompt] = True
    return {"token_ids": ids, "padding_mask": mask}


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
    loop: str = "keras_hub",
) -> list[Measurement]:
    """KerasHub GPT-2 (124M shape by default, random weights) `generate` with its KV cache:
    tokens/s (new tokens, all sequences) and time to first token. `loop="tfaccel"` runs
    the same greedy decoding through `greedy_decoder` (per-layer caches; same tokens),
    `loop="fused"` through its fused decoding step (`_fused_decoder_step`), and
    `loop="fused_generate"` is KerasHub's `generate` after `fuse_generation`: the fused
    step inside KerasHub's own sampler loop, as users call it."""
    if loop not in LOOPS:
        raise ValueError(f"unknown decoding loop {loop!r}; expected one of {', '.join(LOOPS)}")
    import keras
    import numpy as np

    from tfaccel.workloads.builtin import gpt2_causal_lm

    previous = _policy(precision)
    try:
        causal_lm = gpt2_causal_lm(vocab, layers, hidden, heads, 4 * hidden, 1024)
        if loop == "fused_generate":
            fuse_generation(causal_lm)
        # Greedy decoding, as throughput benchmarks use (KerasHub's default samples top-k).
        causal_lm.compile(sampler="greedy", jit_compile=xla)
        rng = np.random.default_rng(0)
        total = prompt + new_tokens

        decoders: dict[int, Any] = {}

        def generate(length: int) -> Any:
            x = prompt_inputs(rng, batch, length, prompt, vocab)
            if loop in ("keras_hub", "fused_generate"):
                return causal_lm.generate(x, stop_token_ids=None)
            if length not in decoders:
                decoders[length] = greedy_decoder(
                    causal_lm, batch, length, prompt, xla, fused=loop == "fused"
                )
            return decoders[length](x["token_ids"], x["padding_mask"]).numpy()

        started = time.perf_counter()
        generate(total)
        first_call = time.perf_counter() - started
        full, first = [], []
        for _ in range(repeats):
            ended = time.perf_counter()
            generate(total)
            full.append(batch * new_tokens / (time.perf_counter() - ended))
        generate(prompt + 1)  # compile the 1-token shape
        for _ in range(repeats):
            ended = time.perf_counter()
            generate(prompt + 1)
            first.append((time.perf_counter() - ended) * 1e3)
        params = {
            "batch": batch,
            "prompt": prompt,
            "new_tokens": new_tokens,
            "layers": layers,
            "hidden": hidden,
            "precision": precision,
            "sampler": "greedy",
            "xla": xla,
            "loop": loop,
            "first_call_s": first_call,
        }
        # the rows with XLA and KerasHub's loop keep their earlier names
        tag = ("" if xla else " xla=off") + ("" if loop == "keras_hub" else f" loop={loop}")
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
