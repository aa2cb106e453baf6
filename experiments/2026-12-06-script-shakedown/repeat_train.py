"""An infinite tf.data pipeline (.repeat()) with steps_per_epoch, as TPU-style and
multi-worker tutorials write it; validation_steps over a repeated validation set."""
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
w = rng.normal(size=(20, 1)).astype("float32")


def data(n):
    x = rng.normal(size=(n, 20)).astype("float32")
    y = (np.sin(x @ w) + 0.5 * x[:, :1] * x[:, 1:2]).astype("float32")
    return x, y


xt, yt = data(20000)
xv, yv = data(2000)
train = tf.data.Dataset.from_tensor_slices((xt, yt)).shuffle(20000).repeat().batch(64).prefetch(2)
val = tf.data.Dataset.from_tensor_slices((xv, yv)).batch(64).repeat()
model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(128, activation="gelu"),
                          keras.layers.Dense(128, activation="gelu"), keras.layers.Dense(1)])
model.compile(keras.optimizers.Adam(1e-3), "mse")
model.fit(train, steps_per_epoch=300, epochs=4, validation_data=val, validation_steps=30)
