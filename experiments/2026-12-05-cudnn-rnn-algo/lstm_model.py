"""keras-io's bidirectional LSTM model (IMDB: 20,000 words, 200 steps, two
Bidirectional(LSTM(64))) and learnable data for it, shared by probe.py and
eval_probe.py: token ids drawn from a Zipf law, labels from a fixed teacher (each word
votes +1 or -1; the label is whether a text's sum is above the median)."""

import keras
import numpy as np


def learnable(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` texts of 200 token ids and their teacher's labels."""
    x = np.minimum(rng.zipf(1.2, (count, 200)), 19999).astype("int32")
    score = rng.choice([-1.0, 1.0], 20000)[x].sum(axis=1)
    return x, (score > np.median(score)).astype("float32")


def build() -> keras.Model:
    """The model, compiled as the script compiles it."""
    inputs = keras.Input(shape=(None,), dtype="int32")
    h = keras.layers.Embedding(20000, 128)(inputs)
    h = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True))(h)
    h = keras.layers.Bidirectional(keras.layers.LSTM(64))(h)
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
    model.compile("adam", "binary_crossentropy")
    return model
