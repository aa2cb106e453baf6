"""Trains, then fails afterwards (a plot that cannot be written): the training counts."""
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(4000, 8)).astype("float32")
y = (x[:, 0] * x[:, 1] > 0).astype("int32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("rmsprop", "sparse_categorical_crossentropy")
history = model.fit(x, y, batch_size=50, epochs=3, validation_split=0.1)
open("/nonexistent/dir/history.txt", "w").write(str(history.history))
