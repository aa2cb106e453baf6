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


def _layer_norm(tf: Any, x: Any, gamma_beta: tuple[Any, Any], eps: float) -> Any:
    """Layer normalization with both statistics from one pass over `x`, in float32:
    var = E[x^2] - E[x]^2. Keras reduces twice (the mean, then the squared distances
    to it), and XLA runs two dependent reductions as two kernels; two sibling reductions
    of the same input become one. At a token a step, GPT-2's 25 layer norms were 50 of
    its ~220 kernels."""
    gamma, beta = gamma_beta
    x32 = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
    var = tf.maximum(tf.reduce_mean(tf.square(x32), axis=-1, keepdims=True) - mean * mean, 0.0)
    out = (x32 - mean) * tf.math.rsqrt(var + eps) * gamma + beta
    return tf.cast(out, x.dtype)


def _fused_decoder_step(lm: Any, dtype: Any) -> Any:
    """One decoding step of a KerasHub GPT-2 (pre-norm `TransformerDecoder` blocks), for
    a token a sequence, from the model's own weights, cast to `dtype` once:
    - query, key and value as one matrix product (KerasHub: three);
    - keys and values in caches laid out [batch, heads, length, head_dim], one each per
      layer and updated in place, so that both attention products batch over (batch,
      heads) with no transposed copy of the cache; KerasHub stacks key and value into
      one new [batch, 2, ...] tensor in every layer, every token;
    - layer norms with one reduction (`_layer_norm`), softmax in float32.
    The arithmetic is KerasHub's otherwise (same scaling, mask, activation). In float32
    the tokens are `generate`'s; in 16 bits the logits are KerasHub's within rounding,
    so a token may differ where the best two logits are that close (tested both ways).
    Returns (weights, step), where
    step(weights, ids[batch], kcaches, vcaches, index) -> (logits, kcaches, vcaches)."""
    import keras

    tf = import_tensorflow()
    bb = lm.backbone
    blocks = list(bb.transformer_layers)
    # The attributes of KerasHub's TransformerDecoder (0.32) that the step reads.
    parts = (
        "normalize_first",
        "_cross_attention_layer",
        "_self_attention_layer",
        "_self_attention_layer_norm",
        "_feedforward_layer_norm",
        "_feedforward_intermediate_dense",
        "_feedforward_output_dense",
    )
    for block in blocks:
        missing = [a for a in parts if not hasattr(block, a)]
        if missing:
            raise ValueError(
                f"the fused decoder reads KerasHub's TransformerDecoder; {block.name} "
                f"({type(block).__name__}) has no {', '.join(missing)}"
            )
        if not block.normalize_first or block._cross_attention_layer is not None:
            raise ValueError(
                "the fused decoder runs pre-norm decoder-only blocks (GPT-2's); "
                f"{block.name} is not one"
            )
    emb = bb.token_embedding
    tied = emb.tie_weights and emb.reverse_dtype is None and emb.logit_soft_cap is None

    def c(v: Any) -> Any:
        return tf.cast(tf.convert_to_tensor(v), dtype)

    def f32(v: Any) -> Any:
        return tf.cast(tf.convert_to_tensor(v), tf.float32)

    def weights() -> dict[str, Any]:
        layers = []
        for block in blocks:
            att = block._self_attention_layer
            d = att._query_dense.kernel.shape[0]
            dense = (att._query_dense, att._key_dense, att._value_dense)
            ln1, ln2 = block._self_attention_layer_norm, block._feedforward_layer_norm
            inner, outer = block._feedforward_intermediate_dense, block._feedforward_output_dense
            layers.append(
                {
                    "ln1": (f32(ln1.gamma), f32(ln1.beta)),
                    "qkv": c(tf.concat([tf.reshape(x.kernel, [d, -1]) for x in dense], 1)),
                    "qkv_b": c(tf.concat([tf.reshape(x.bias, [-1]) for x in dense], 0)),
                    "o": c(tf.reshape(att._output_dense.kernel, [-1, d])),
                    "o_b": c(att._output_dense.bias),
                    "ln2": (f32(ln2.gamma), f32(ln2.beta)),
                    "w1": c(inner.kernel),
                    "b1": c(inner.bias),
                    "w2": c(outer.kernel),
                    "b2": c(outer.bias),
                }
            )
        return {
            "layers": layers,
            "pos": c(bb.position_embedding.position_embeddings),
            "tok": c(emb.embeddings),
            "ln": (f32(bb.layer_norm.gamma), f32(bb.layer_norm.beta)),
        }

    def step(
        w: dict[str, Any], ids: Any, kcaches: tuple[Any, ...], vcaches: tuple[Any, ...], index: Any
    ) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        x = tf.gather(w["tok"], ids) + w["pos"][index]  # [batch, hidden]
        batch = tf.shape(x)[0]
        kout, vout = [], []
        for block, lw, kc, vc in zip(blocks, w["layers"], kcaches, vcaches, strict=True):
            att = block._self_attention_layer
            heads, head_dim = kc.shape[1], kc.shape[3]
            h = _layer_norm(tf, x, lw["ln1"], block._self_attention_layer_norm.epsilon)
            qkv = tf.reshape(tf.matmul(h, lw["qkv"]) + lw["qkv_b"], [batch, 3, heads, head_dim])
            q = qkv[:, 0] * tf.cast(att._inverse_sqrt_key_dim, dtype)
            at = [0, 0, index, 0]
            kc = keras.ops.slice_update(kc, at, qkv[:, 1, :, None, :])  # in place under XLA
            vc = keras.ops.slice_update(vc, at, qkv[:, 2, :, None, :])
            scores = tf.cast(tf.einsum("bhd,bhld->bhl", q, kc), tf.float32)
            visible = tf.range(kc.shape[2]) <= index
            scores = tf.where(visible, scores, tf.float32.min)
            p = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
            o = tf.reshape(tf.einsum("bhl,bhld->bhd", p, vc), [batch, heads * head_dim])
            x = x + tf.matmul(o, lw["o"]) + lw["o_b"]
            h = _layer_norm(tf, x, lw["ln2"], block._feedforward_layer_norm.epsilon)
            inner = block._feedforward_intermediate_dense
            h = inner.activation(tf.matmul(h, lw["w1"]) + lw["b1"])
            x = x + tf.matmul(h, lw["w2"]) + lw["b2"]
            kout.append(kc)
            vout.append(vc)
        x = _layer_norm(tf, x, w["ln"], bb.layer_norm.epsilon)
        logits = tf.matmul(x, w["tok"], transpose_b=True) if tied else emb(x, reverse=True)
        return logits, tuple(kout), tuple(vout)

    return weights, step


def fused_caches(caches: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """KerasHub's per-layer caches, [batch, 2, length, heads, head_dim] each, as the
    fused step's (keys, values): one [batch, heads, length, head_dim] tensor a layer."""
    tf = import_tensorflow()
    ks, vs = (tuple(tf.transpose(c[:, j], [0, 2, 1, 3]) for c in caches) for j in (0, 1))
    return ks, vs


def greedy_decoder(
    lm: Any, batch: int, length: int, start: int, xla: bool = True, fused: bool = False
) -> Any:
    """KerasHub GPT-2's greedy `generate`, as one compiled function of (token_ids,
    padding_mask) at a fixed shape, with two changes that leave the tokens the same:
    - each layer's KV cache is its own loop variable, updated in place; KerasHub keeps
      one stacked cache and re-stacks all twelve layers' caches every token (15.5 us of
      a 530 us token on the H200);
    - the next token is the argmax of the logits; greedy sampling's float32 softmax over
      the 50,257-word vocabulary does not change which one is largest.
    Like KerasHub, the cache is seeded with one pass over the whole (padded) sequence and
    the loop starts at `start`, the prompt's length; positions the padding mask marks as
    given keep their tokens. `fused=True` decodes each new token with
    `_fused_decoder_step` instead of KerasHub's layers (the prompt's pass is the same;
    in 16 bits it rounds differently, see there)."""
    import keras

    tf = import_tensorflow()
    bb = lm.backbone
    blocks = list(bb.transformer_layers)
    heads = bb.num_heads
    cache_shape = [batch, 2, length, heads, bb.hidden_dim // heads]
    dtype = lm.compute_dtype
    weights: Any = None
    step: Any = None
    if fused:
        weights, step = _fused_decoder_step(lm, dtype)

    def forward(ids: Any, caches: tuple[Any, ...], index: Any) -> tuple[Any, tuple[Any, ...]]:
        tokens = bb.token_embedding(ids)
        x = bb.embeddings_add((tokens, bb.position_embedding(tokens, start_index=index)))
        updated = []
        for block, cache in zip(blocks, caches, strict=True):
            x, cache = block(x, self_attention_cache=cache, self_attention_cache_update_index=index)
            updated.append(cache)
        return bb.token_embedding(bb.layer_norm(x), reverse=True), tuple(updated)

    def pick(i: Any, ids: Any, padding_mask: Any, logits: Any) -> Any:
        token = tf.argmax(logits, axis=-1, output_type=ids.dtype)
        token = tf.where(padding_mask[:, i], ids[:, i], token)
        return keras.ops.slice_update(ids, [0, i], token[:, None])  # in place under XLA

    @tf.function(jit_compile=xla)
    def generate(token_ids: Any, padding_mask: Any) -> Any:
        caches = tuple(tf.zeros(cache_shape, dtype) for _ in blocks)
        _, caches = forward(token_ids, caches, 0)
        if fused:
            w = weights()
            kv = fused_caches(caches)  # once, after the prompt's pass

            def fused_body(i: Any, ids: Any, ks: Any, vs: Any) -> tuple[Any, ...]:
                logits, ks, vs = step(w, ids[:, i - 1], ks, vs, i - 1)
                return i + 1, pick(i, ids, padding_mask, logits), ks, vs

            out = tf.while_loop(
                lambda i, *_: i < length,
                fused_body,
                (tf.constant(start), token_ids, *kv),
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


LOOPS = ("keras_hub", "tfaccel", "fused")


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
    `loop="fused"` through its fused decoding step (`_fused_decoder_step`)."""
    if loop not in LOOPS:
        raise ValueError(f"unknown decoding loop {loop!r}; expected one of {', '.join(LOOPS)}")
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

        decoders: dict[int, Any] = {}

        def generate(length: int) -> Any:
            x = inputs(length)
            if loop == "keras_hub":
                return lm.generate(x, stop_token_ids=None)
            if length not in decoders:
                decoders[length] = greedy_decoder(
                    lm, batch, length, prompt, xla, fused=loop == "fused"
                )
            return decoders[length](x["token_ids"], x["padding_mask"]).numpy()

        t0 = time.perf_counter()
        generate(total)
        first_call = time.perf_counter() - t0
        full, first = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            generate(total)
            full.append(batch * new_tokens / (time.perf_counter() - t))
        generate(prompt + 1)  # compile the 1-token shape
        for _ in range(repeats):
            t = time.perf_counter()
            generate(prompt + 1)
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
