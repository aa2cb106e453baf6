"""A user's KerasHub task model: BertTextClassifier on a small backbone built from its
config (no preset: nothing to download), compiled with KerasHub's own defaults
(`compile()`: optimizer and loss "auto"), fed a tf.data pipeline of dicts.

Token ids are random; the label says whether token 7 occurs more often than token 11
(a fixed teacher function).
"""

import keras_hub
import numpy as np
import tensorflow as tf

SEQ, VOCAB = 64, 512
rng = np.random.default_rng(1)


def make(n):
    ids = rng.integers(1, VOCAB, size=(n, SEQ))
    ids[:, :8] = np.where(rng.random((n, 8)) < 0.5, 7, 11)
    y = ((ids == 7).sum(1) > (ids == 11).sum(1)).astype("int32")
    x = {
        "token_ids": ids.astype("int32"),
        "padding_mask": np.ones_like(ids, dtype=bool),
        "segment_ids": np.zeros_like(ids, dtype="int32"),
    }
    return tf.data.Dataset.from_tensor_slices((x, y))


train = make(6000).shuffle(6000, seed=0).batch(48).prefetch(tf.data.AUTOTUNE)
val = make(1000).batch(48)

backbone = keras_hub.models.BertBackbone(
    vocabulary_size=VOCAB, num_layers=2, num_heads=2, hidden_dim=64,
    intermediate_dim=128, max_sequence_length=SEQ,
)
classifier = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
classifier.compile()
classifier.fit(train, validation_data=val, epochs=2)
