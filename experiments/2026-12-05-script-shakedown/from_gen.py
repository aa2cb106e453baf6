"""Batches made by a Python generator, wrapped in tf.data.Dataset.from_generator."""
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(1)
W = rng.normal(size=(20, 1))

def batches():
    r = np.random.default_rng(2)
    for _ in range(200):
        xb = r.normal(size=(40, 20)).astype("float32")
        yield xb, (np.sin(xb @ W) > 0).astype("float32")

ds = tf.data.Dataset.from_generator(
    batches, output_signature=(tf.TensorSpec((None, 20), tf.float32), tf.TensorSpec((None, 1), tf.float32)))
model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(keras.optimizers.SGD(0.05, momentum=0.9), "binary_crossentropy", metrics=["accuracy"])
model.fit(ds, epochs=3)
