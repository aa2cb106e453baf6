"""A faster decoding step for KerasHub's decoder-only language models (GPT-2's blocks).

    import tfaccel.optimize.decoding as decoding
    lm = keras_hub.models.GPT2CausalLM.from_preset("gpt2_base_en")
    decoding.fuse_generation(lm)        # lm.generate now decodes through the fused step
    lm.generate("The GPU", max_length=64)

The prompt's pass is KerasHub's own; each new token then runs `_fused_decoder_step` on
the model's weights: one matrix product for query, key and value, key/value caches laid
out for the attention products and updated in place, one-pass layer norms: fewer and
larger kernels per token than `generate`'s loop (the measurements page has the
figures, `tfaccel bench gpt2` reproduces them).
"""

from __future__ import annotations

import types
from typing import Any

from tfaccel._tf import import_tensorflow


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


def _fused_decoder_step(causal_lm: Any, dtype: Any) -> Any:
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
    backbone = causal_lm.backbone
    blocks = list(backbone.transformer_layers)
    _check_blocks(blocks)
    emb = backbone.token_embedding
    tied = emb.tie_weights and emb.reverse_dtype is None and emb.logit_soft_cap is None

    def weights() -> dict[str, Any]:
        return _fused_weights(tf, backbone, blocks, dtype)

    def step(
        weights: dict[str, Any],
        ids: Any,
        kcaches: tuple[Any, ...],
        vcaches: tuple[Any, ...],
        index: Any,
    ) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        x = tf.gather(weights["tok"], ids) + weights["pos"][index]  # [batch, hidden]
        kout, vout = [], []
        for block, layer_weights, key_cache, value_cache in zip(
            blocks, weights["layers"], kcaches, vcaches, strict=True
        ):
            x, key_cache, value_cache = _fused_block(
                tf, keras, block, layer_weights, x, key_cache, value_cache, index, dtype
            )
            kout.append(key_cache)
            vout.append(value_cache)
        x = _layer_norm(tf, x, weights["ln"], backbone.layer_norm.epsilon)
        logits = tf.matmul(x, weights["tok"], transpose_b=True) if tied else emb(x, reverse=True)
        return logits, tuple(kout), tuple(vout)

    return weights, step


# The attributes of KerasHub's TransformerDecoder (0.32) that the fused step reads.
_DECODER_PARTS = (
    "normalize_first",
    "_cross_attention_layer",
    "_self_attention_layer",
    "_self_attention_layer_norm",
    "_feedforward_layer_norm",
    "_feedforward_intermediate_dense",
    "_feedforward_output_dense",
)


def _check_blocks(blocks: list[Any]) -> None:
    """Pre-norm, decoder-only KerasHub TransformerDecoder blocks (GPT-2's), or ValueError."""
    for block in blocks:
        missing = [part for part in _DECODER_PARTS if not hasattr(block, part)]
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


def _fused_weights(tf: Any, backbone: Any, blocks: list[Any], dtype: Any) -> dict[str, Any]:
    """The model's weights for the fused step, cast to `dtype` once (layer norms' in
    float32); query, key and value concatenated into one matrix."""

    def c(variable: Any) -> Any:
        return tf.cast(tf.convert_to_tensor(variable), dtype)

    def f32(variable: Any) -> Any:
        return tf.cast(tf.convert_to_tensor(variable), tf.float32)

    layers = []
    for block in blocks:
        att = block._self_attention_layer
        model_dim = att._query_dense.kernel.shape[0]
        dense = (att._query_dense, att._key_dense, att._value_dense)
        ln1, ln2 = block._self_attention_layer_norm, block._feedforward_layer_norm
        inner, outer = block._feedforward_intermediate_dense, block._feedforward_output_dense
        layers.append(
            {
                "ln1": (f32(ln1.gamma), f32(ln1.beta)),
                "qkv": c(tf.concat([tf.reshape(x.kernel, [model_dim, -1]) for x in dense], 1)),
                "qkv_b": c(tf.concat([tf.reshape(x.bias, [-1]) for x in dense], 0)),
                "o": c(tf.reshape(att._output_dense.kernel, [-1, model_dim])),
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
        "pos": c(backbone.position_embedding.position_embeddings),
        "tok": c(backbone.token_embedding.embeddings),
        "ln": (f32(backbone.layer_norm.gamma), f32(backbone.layer_norm.beta)),
    }


def _fused_block(
    tf: Any,
    keras: Any,
    block: Any,
    layer_weights: dict[str, Any],
    x: Any,
    key_cache: Any,
    value_cache: Any,
    index: Any,
    dtype: Any,
) -> tuple[Any, Any, Any]:
    """One decoder block for one token: (its output, the key and value caches)."""
    batch = tf.shape(x)[0]
    att = block._self_attention_layer
    heads, head_dim = key_cache.shape[1], key_cache.shape[3]
    hidden = _layer_norm(tf, x, layer_weights["ln1"], block._self_attention_layer_norm.epsilon)
    qkv = tf.reshape(
        tf.matmul(hidden, layer_weights["qkv"]) + layer_weights["qkv_b"],
        [batch, 3, heads, head_dim],
    )
    q = qkv[:, 0] * tf.cast(att._inverse_sqrt_key_dim, dtype)
    position = [0, 0, index, 0]
    key_cache = keras.ops.slice_update(
        key_cache, position, qkv[:, 1, :, None, :]
    )  # in place under XLA
    value_cache = keras.ops.slice_update(value_cache, position, qkv[:, 2, :, None, :])
    scores = tf.cast(tf.einsum("bhd,bhld->bhl", q, key_cache), tf.float32)
    visible = tf.range(key_cache.shape[2]) <= index
    scores = tf.where(visible, scores, tf.float32.min)
    probs = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
    attended = tf.reshape(tf.einsum("bhl,bhld->bhd", probs, value_cache), [batch, heads * head_dim])
    x = x + tf.matmul(attended, layer_weights["o"]) + layer_weights["o_b"]
    hidden = _layer_norm(tf, x, layer_weights["ln2"], block._feedforward_layer_norm.epsilon)
    inner = block._feedforward_intermediate_dense
    hidden = inner.activation(tf.matmul(hidden, layer_weights["w1"]) + layer_weights["b1"])
    return x + tf.matmul(hidden, layer_weights["w2"]) + layer_weights["b2"], key_cache, value_cache


def fused_caches(caches: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """KerasHub's per-layer caches, [batch, 2, length, heads, head_dim] each, as the
    fused step's (keys, values): one [batch, heads, length, head_dim] tensor a layer."""
    tf = import_tensorflow()
    keys, values = (
        tuple(tf.transpose(cache[:, j], [0, 2, 1, 3]) for cache in caches) for j in (0, 1)
    )
    return keys, values


_BACKBONE_PARTS = ("transformer_layers", "token_embedding", "position_embedding", "layer_norm")


def fuse_generation(causal_lm: Any) -> Any:
    """Make `lm.generate` decode each new token through `_fused_decoder_step`; returns
    `lm`, changed in place (calling it again changes nothing).

    `lm` is a KerasHub causal LM of GPT-2's make: a backbone of pre-norm
    `TransformerDecoder` blocks without cross-attention, with token and position
    embeddings and a final layer norm (`GPT2CausalLM`). Everything else about
    `generate` stays KerasHub's: the preprocessor, `stop_token_ids`, `max_length`, the
    prompt's pass, XLA (`lm.compile(jit_compile=...)`) and the sampler, any but
    `"contrastive"`, which needs the hidden states the fused step does not keep. In
    float32 the tokens are the same as without it (tested with the greedy, top-k and
    beam samplers); in 16 bits the step rounds differently, so where the best two logits
    are within rounding another token can be chosen.

    Raises ValueError, saying what is missing, for a model of another make.
    """
    if getattr(causal_lm, "_tfaccel_fused_generation", False):
        return causal_lm
    backbone = getattr(causal_lm, "backbone", None)
    if backbone is None:
        missing = ["backbone"]
    else:
        missing = [f"backbone.{part}" for part in _BACKBONE_PARTS if not hasattr(backbone, part)]
        missing += [] if hasattr(causal_lm, "_build_cache") else ["_build_cache"]
    if missing:
        raise ValueError(
            "fuse_generation expects a KerasHub causal LM of GPT-2's make (a backbone "
            "with transformer_layers, token_embedding, position_embedding and "
            f"layer_norm, and _build_cache); {type(causal_lm).__name__} has no "
            + ", ".join(missing)
        )
    tf = import_tensorflow()
    from keras import ops
    from keras_hub.samplers import ContrastiveSampler

    weights, step = _fused_decoder_step(
        causal_lm, tf.as_dtype(causal_lm.compute_dtype)
    )  # checks blocks

    def generate_step(self: Any, inputs: Any, stop_token_ids: Any = None) -> Any:
        if isinstance(self.sampler, ContrastiveSampler):
            raise ValueError(
                "the fused decoding step keeps no hidden states, which the contrastive "
                "sampler compares; compile with another sampler (greedy, top_k, top_p, "
                "beam, random), or generate without fuse_generation"
            )
        token_ids, padding_mask = inputs["token_ids"], inputs["padding_mask"]
        _, cache = self._build_cache(token_ids)  # KerasHub's pass over the prompt
        caches = fused_caches([cache[:, i] for i in range(cache.shape[1])])
        index = ops.min(ops.sum(ops.cast(padding_mask, "int32"), axis=-1))
        fused = weights()

        def next(prompt: Any, cache: Any, index: Any) -> tuple[Any, Any, Any]:
            position = index - 1  # the previous token's position
            ids = tf.gather(prompt, position, axis=1)
            logits, keys, values = step(fused, ids, cache[0], cache[1], position)
            return logits, None, (keys, values)

        token_ids = self.sampler(
            next=next,
            prompt=token_ids,
            cache=caches,
            index=index,
            mask=padding_mask,
            stop_token_ids=stop_token_ids,
            model=self,
        )
        return {
            "token_ids": token_ids,
            "padding_mask": _output_mask(ops, token_ids, padding_mask, stop_token_ids),
        }

    causal_lm.generate_step = types.MethodType(generate_step, causal_lm)
    causal_lm.generate_function = None  # built again, from the new step, at the next generate
    causal_lm._tfaccel_fused_generation = True
    return causal_lm


def _output_mask(ops: Any, token_ids: Any, padding_mask: Any, stop_token_ids: Any) -> Any:
    """KerasHub's output padding mask (`GPT2CausalLM.generate_step`): every position up
    to and including each sequence's first new stop token. (`ops`: keras.ops, imported
    by the caller outside the traced step.)"""
    if stop_token_ids is None:
        return ops.ones_like(token_ids, dtype="bool")
    stops = ops.convert_to_tensor(list(stop_token_ids), dtype=token_ids.dtype)
    new_stop = ops.any(ops.equal(ops.expand_dims(token_ids, -1), stops), axis=-1)
    end = ops.cast(ops.logical_and(new_stop, ops.logical_not(padding_mask)), "int32")
    overflow = ops.cast(ops.cumsum(end, axis=-1), "int32") - end
    return ops.logical_not(ops.cast(overflow, "bool"))
