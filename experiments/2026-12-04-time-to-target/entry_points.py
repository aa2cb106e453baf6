"""User-style entry points on learnable data (labels from a fixed teacher), for issue
44's targets that are not scripts: `tfaccel tune entry_points:transformer_classifier`
with this folder on PYTHONPATH.

- transformer_classifier: a text classifier from plain Keras layers (token and
  position embeddings, 2 blocks of MultiHeadAttention + FFN), AdamW at 1e-4, on a
  dataset of batches of 64. Tokens are Zipf-distributed ids; the label says whether a
  fixed +-1 weight of the 2,000 most frequent ids sums above its median, which
  embeddings and pooling can learn.

TTT_EXAMPLES scales the data (default 40,000 sequences of 256 tokens).
"""

import os

import numpy as np
import tensorflow as tf
import keras
from keras import layers

VOCAB, MAXLEN, DIM = 20000, 256, 256


def _tokens(rng, n):
    x = np.minimum(rng.zipf(1.3, (n, MAXLEN)), VOCAB - 1).astype("int32")
    weight = np.zeros(VOCAB)
    weight[1:2001] = np.random.default_rng(7).choice([-1.0, 1.0], 2000)
    sums = weight[x].sum(axis=1)
    return x, (sums > np.median(sums)).astype("int32")


def transformer_classifier():
    tokens = keras.Input((MAXLEN,), dtype="int32")
    x = layers.Embedding(VOCAB, DIM)(tokens)
    x = x + layers.Embedding(MAXLEN, DIM)(keras.ops.arange(MAXLEN))
    for _ in range(2):
        att = layers.MultiHeadAttention(num_heads=4, key_dim=DIM // 4, dropout=0.1)(x, x)
        x = layers.LayerNormalization()(x + att)
        ffn = layers.Dense(DIM * 4, activation="gelu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(DIM)(ffn))
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(2)(layers.Dropout(0.1)(x))
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    n = int(os.environ.get("TTT_EXAMPLES", "40000"))
    x_all, y_all = _tokens(np.random.default_rng(0), n)
    return model, tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(64)
