"""Three models written the way users write them, each returning a dataset of
*batches* in a different form (the forms that failed every trial before tfaccel read
batches from the model's input shapes). Entry points: `user_models:unet`,
`user_models:text_transformer`, `user_models:stacked_lstm`."""

import numpy as np
import tensorflow as tf
import keras
from keras import layers


def unet():
    """A U-Net for 4-class segmentation of 128x128 RGB images; one batch of 16,
    repeated (`Dataset.from_tensors`: a static batch dimension)."""

    def block(x, filters):
        x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        return layers.Conv2D(filters, 3, padding="same", activation="relu")(x)

    inputs = keras.Input((128, 128, 3))
    skips, x = [], inputs
    for f in (32, 64, 128, 256):
        x = block(x, f)
        skips.append(x)
        x = layers.MaxPooling2D()(x)
    x = block(x, 512)
    for f, skip in zip((256, 128, 64, 32), reversed(skips)):
        x = layers.Conv2DTranspose(f, 2, strides=2, padding="same")(x)
        x = block(layers.Concatenate()([x, skip]), f)
    outputs = layers.Conv2D(4, 1)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = np.random.rand(16, 128, 128, 3).astype("float32")
    y = np.random.randint(0, 4, (16, 128, 128)).astype("int32")
    return model, tf.data.Dataset.from_tensors((x, y)).repeat()


def text_transformer():
    """A transformer text classifier from plain Keras layers (token and position
    embeddings, 2 blocks of MultiHeadAttention + FFN); batches of 64 token sequences
    from a Python generator (`from_generator`: an unknown batch dimension)."""
    vocab, maxlen, dim = 20000, 256, 256
    tokens = keras.Input((maxlen,), dtype="int32")
    x = layers.Embedding(vocab, dim)(tokens)
    positions = layers.Embedding(maxlen, dim)(keras.ops.arange(maxlen))
    x = x + positions
    for _ in range(2):
        att = layers.MultiHeadAttention(num_heads=4, key_dim=dim // 4, dropout=0.1)(x, x)
        x = layers.LayerNormalization()(x + att)
        ffn = layers.Dense(dim * 4, activation="gelu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(dim)(ffn))
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(2)(layers.Dropout(0.1)(x))
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    x_all = rng.integers(1, vocab, (4096, maxlen)).astype("int32")
    y_all = rng.integers(0, 2, 4096).astype("int32")

    def batches():
        while True:
            for i in range(0, 4096, 64):
                yield x_all[i : i + 64], y_all[i : i + 64]

    signature = (
        tf.TensorSpec((None, maxlen), tf.int32),
        tf.TensorSpec((None,), tf.int32),
    )
    return model, tf.data.Dataset.from_generator(batches, output_signature=signature)


class _Sequences(keras.utils.PyDataset):
    def __init__(self, batch=64, **kwargs):
        super().__init__(**kwargs)
        rng = np.random.default_rng(1)
        self.x = rng.standard_normal((6400, 100, 32)).astype("float32")
        self.y = rng.integers(0, 10, 6400).astype("int32")
        self.batch = batch

    def __len__(self):
        return len(self.x) // self.batch

    def __getitem__(self, i):
        s = slice(i * self.batch, (i + 1) * self.batch)
        return self.x[s], self.y[s]


def stacked_lstm():
    """Two stacked LSTMs over 100 steps of 32 features, 10 classes; a
    keras.utils.PyDataset of batches of 64."""
    model = keras.Sequential(
        [
            keras.Input((100, 32)),
            layers.LSTM(256, return_sequences=True),
            layers.LSTM(256),
            layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model, _Sequences()
