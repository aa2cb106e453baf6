"""Variable-length token sequences as a tf.RaggedTensor fed straight to fit, an
Embedding with mask_zero and a GRU: ragged inputs cannot be compiled by XLA."""

import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
VOCAB = 500


def make(n):
    lengths = rng.integers(5, 60, size=n)
    seqs = [rng.integers(1, VOCAB, size=k) for k in lengths]
    # teacher: is token 7 more frequent than token 11 in the first half of the vocabulary?
    y = np.array([float((s < VOCAB // 2).mean() > 0.5) for s in seqs], "float32")
    return tf.ragged.constant(seqs, dtype=tf.int32), y


x, y = make(6000)
xv, yv = make(1000)

inputs = keras.Input(shape=(None,), dtype="int32", ragged=True)
h = keras.layers.Embedding(VOCAB, 32)(inputs)
h = keras.layers.GlobalAveragePooling1D()(h)
h = keras.layers.Dense(32, activation="relu")(h)
out = keras.layers.Dense(1, activation="sigmoid")(h)
model = keras.Model(inputs, out)
model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=3, validation_data=(xv, yv))
