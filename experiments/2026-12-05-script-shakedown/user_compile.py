# The user already chose jit_compile and steps_per_execution in compile.
import numpy as np
import keras

rng = np.random.default_rng(2)
x = rng.normal(size=(10000, 16)).astype("float32")
y = (np.sin(x[:, :1] * 2) + x[:, 1:2] ** 2).astype("float32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="gelu"),
                          keras.layers.Dense(64, activation="gelu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse", jit_compile=True, steps_per_execution=8)
model.fit(x, y, batch_size=100, epochs=5, validation_split=0.2, verbose=2)
