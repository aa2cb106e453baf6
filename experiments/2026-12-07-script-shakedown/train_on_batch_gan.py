"""A GAN trained with train_on_batch in a loop of the user's own (no fit): the style of
many older GAN tutorials."""

import numpy as np
from tensorflow import keras

rng = np.random.default_rng(0)
real = rng.normal(loc=(2.0, -1.0), scale=0.5, size=(4096, 2)).astype("float32")

gen = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"),
                        keras.layers.Dense(2)])
disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(32, activation="relu"),
                         keras.layers.Dense(1, activation="sigmoid")])
disc.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
disc.trainable = False
z = keras.Input((8,))
gan = keras.Model(z, disc(gen(z)))
gan.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")

batch = 64
for step in range(300):
    idx = rng.integers(0, len(real), batch)
    noise = rng.normal(size=(batch, 8)).astype("float32")
    fake = gen.predict(noise, verbose=0)
    disc.trainable = True
    disc.train_on_batch(np.concatenate([real[idx], fake]),
                        np.concatenate([np.ones((batch, 1)), np.zeros((batch, 1))]))
    disc.trainable = False
    gan.train_on_batch(noise, np.ones((batch, 1)))
print("done")
