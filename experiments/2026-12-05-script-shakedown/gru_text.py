# Token sequences to a GRU classifier: a recurrent model other than LSTM.
import numpy as np
import keras

rng = np.random.default_rng(6)
tokens = rng.integers(1, 500, size=(8000, 40))
y = ((tokens[:, :5] > 250).sum(axis=1) >= 3).astype("float32")
model = keras.Sequential([keras.Input((40,), dtype="int32"), keras.layers.Embedding(500, 32),
                          keras.layers.GRU(32), keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="binary_crossentropy", metrics=["accuracy"])
model.fit(tokens, y, batch_size=64, epochs=3, validation_split=0.2)
