# A user-style script for the walk: a small classifier on labels from a fixed teacher.
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 32)).astype("float32")
teacher = rng.normal(size=(32, 4))
y = np.argmax(x @ teacher, axis=1)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=3, validation_split=0.1)
