"""`fuse_generation`: KerasHub's `generate`, each new token through the fused step."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")


def _lm():  # type: ignore[no-untyped-def]
    import keras

    from tfaccel.workloads.builtin import gpt2_causal_lm

    keras.utils.set_random_seed(4)
    return gpt2_causal_lm(300, 3, 48, 4, 192, 64)


def _prompts():  # type: ignore[no-untyped-def]
    import numpy as np

    ids = np.zeros((3, 24), "int32")
    mask = np.zeros((3, 24), bool)
    rng = np.random.default_rng(1)
    for b, n in enumerate((5, 8, 6)):  # prompts of three lengths
        ids[b, :n] = rng.integers(1, 300, n)
        mask[b, :n] = True
    return {"token_ids": ids, "padding_mask": mask}


def test_fused_generation_writes_kerashubs_tokens_with_its_samplers() -> None:
    """float32: greedy, top-k (seeded) and beam search give the same tokens and output
    masks with and without the fused step, with a stop token that is generated."""
    import keras_hub
    import numpy as np

    from tfaccel.optimize.decoding import fuse_generation

    plain, fused = _lm(), _lm()
    for a, b in zip(plain.weights, fused.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert fuse_generation(fused) is fused
    inputs = _prompts()
    plain.compile(sampler="greedy")
    free = plain.generate(inputs, stop_token_ids=None)["token_ids"]
    stop = int(free[0, 10])  # a token greedy decoding writes after the prompt
    assert not (inputs["token_ids"][0, :10] == stop).any()
    samplers = (
        lambda: "greedy",
        lambda: keras_hub.samplers.TopKSampler(k=5, seed=7),
        lambda: keras_hub.samplers.BeamSampler(num_beams=3),
    )
    masks = []
    for make in samplers:
        plain.compile(sampler=make())
        fused.compile(sampler=make())
        want = plain.generate(inputs, stop_token_ids=[stop])
        got = fused.generate(inputs, stop_token_ids=[stop])
        np.testing.assert_array_equal(got["token_ids"], want["token_ids"])
        np.testing.assert_array_equal(got["padding_mask"], want["padding_mask"])
        masks.append(got["padding_mask"])
    # greedy: the stop token ended the first sequence, nothing after it is kept
    assert not masks[0][0, 11:].any() and masks[0][0, :11].all()


def test_fused_generation_is_idempotent_and_refuses_what_it_cannot_run() -> None:
    import keras
    import keras_hub

    from tfaccel.optimize.decoding import fuse_generation

    lm = fuse_generation(_lm())
    step = lm.generate_step
    assert fuse_generation(lm).generate_step is step
    lm.compile(sampler=keras_hub.samplers.ContrastiveSampler())
    with pytest.raises(ValueError, match="contrastive sampler"):
        lm.generate(_prompts(), stop_token_ids=None)
    with pytest.raises(ValueError, match="has no backbone"):
        fuse_generation(keras.Sequential([keras.layers.Dense(2)]))
    post = _lm()
    post.backbone.transformer_layers[0].normalize_first = False
    with pytest.raises(ValueError, match="pre-norm decoder-only"):
        fuse_generation(post)


def test_fused_generation_in_bfloat16_keeps_the_prompts() -> None:
    """16 bits: the step runs on the bf16 caches of KerasHub's prompt pass and rounds
    differently (its logits are tested against KerasHub's in tests/bench); here the
    prompts stay and every position is in the output mask."""
    import keras

    from tfaccel.optimize.decoding import fuse_generation

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        lm = fuse_generation(_lm())
        lm.compile(sampler="greedy")
        inputs = _prompts()
        out = lm.generate(inputs, stop_token_ids=None)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    mask = inputs["padding_mask"]
    assert (out["token_ids"][mask] == inputs["token_ids"][mask]).all()
    assert out["token_ids"].shape == (3, 24) and out["padding_mask"].all()
